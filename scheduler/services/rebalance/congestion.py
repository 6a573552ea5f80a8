"""The ``congested`` reports: a held whole-GPU job crossing uplinks with open congestion or error
alarms, or running over one of its hosts' alarmed HCA links, for which a placement avoiding them
exists (:func:`plan_congested`). Reports only.
"""

from __future__ import annotations

from ...choices import JobKind
from ...locality import TIER_NAMES, UNIT_TIER, Locality
from ...placement import FreeState, RequestError, UnknownTier, place
from .. import state
from ..queue.passes import queued_job
from .common import CONGESTED, Action, Snapshot, give, hosts_text, label, per_host, take_back


def _alarm_label(codes) -> str:
    """A congestion report's label: ``congested`` when every alarm behind it is a congestion
    one, else what they are (``on links with symbol errors``)."""
    if set(codes) <= {"port.congestion"}:
        return "congested"
    return f"on links with {state.alarm_causes(codes)}"


def _crossed(loc: Locality, hosts: list[str], tier: int) -> list[str]:
    """Domain keys whose marks count for a job on ``hosts`` spanning ``tier`` (as the engine
    counts them: its units always, a block or spine group when the job spans above it)."""
    keys = set()
    for h in hosts:
        site = loc.hosts[h]
        keys.add(site.unit)
        for t in range(UNIT_TIER + 1, tier):
            keys.add(site.domain(t))
    return sorted(keys)


def plan_congested(st: Snapshot) -> list[Action]:
    """The ``congested`` reports (module docstring): a held whole-GPU job crossing marked
    uplinks or running over one of its hosts' congested HCA links, with a placement (on the
    free GPUs plus its own) that uses neither a marked domain nor a host with a congested HCA
    link and spans no higher tier."""
    out: list[Action] = []
    if not st.cong.marks and not st.hca:
        return out
    blocked = dict(st.blocked())
    for host, links in st.hca.items():
        blocked.setdefault(
            host, f"HCA link with a {state.alarm_causes([links[0].code])} alarm: {links[0].name}"
        )
    for pk in sorted(st.held):
        job = st.jobs.get(pk)
        if job is None or job.kind != JobKind.GPU or pk in st.touched:
            continue
        h = st.held[pk]
        before = per_host(h)
        if not before or any(host not in st.loc.hosts for host in before):
            continue
        tier = st.loc.span(before)[0]
        hot = [(k, st.cong.hot(k)) for k in _crossed(st.loc, list(before), tier)]
        hot = [(k, m) for k, m in hot if m is not None]
        links = [(host, m) for host in sorted(before) for m in st.hca.get(host, ())]
        if not hot and not links:
            continue
        try:
            req = queued_job(job).request(st.pools[job.pool_id].fabric_id)
        except (RequestError, UnknownTier):
            continue
        key = st.key(job)
        give(st.inv, h)
        try:
            d = place(st.loc, FreeState(gpus=st.inv.gpu_view(key), unusable=blocked), req, st.cong)
        finally:
            take_back(st.inv, h)
        if not d.ok or d.congested or d.tier is None or d.tier > tier or set(d.placed) == set(before):
            continue
        why = []
        if hot:
            # a mark's score is the alarm's value over its threshold (state.congestion_marks): a ratio
            marks = "; ".join(
                f"{st.loc.domains[k].name}: {m.reason} ({m.score:g}× the alarm's threshold)" for k, m in hot
            )
            # the alarms are congestion, error-rate or link-went-down-and-up ones: each is named by what
            # it is (state.alarm_causes), none is called "congestion" unless it is (issues 24, 26)
            why.append(
                f"crosses uplinks with {state.alarm_causes({m.code for _, m in hot})} alarms ({marks})"
            )
        if links:
            why.append(
                f"runs over HCA links with {state.alarm_causes({m.code for _, m in links})} alarms "
                f"({'; '.join(m.text() for _, m in links)})"
            )
        codes = sorted({m.code for _, m in hot} | {m.code for _, m in links})
        reason = (
            f"{label(job)} on {hosts_text(before)} {' and '.join(why)}; a placement on "
            f"{hosts_text(d.placed)} within one {TIER_NAMES[d.tier]} avoids them (reported, not moved)"
        )
        hca = [
            {
                "host": host,
                "link": m.link,
                "name": m.name,
                "score": m.score,
                "index": m.index,
                "reason": m.reason,
            }
            for host, m in links
        ]
        out.append(
            Action(
                CONGESTED, pk, reason, False, placed=dict(d.placed), before=before,
                details={"decision": d.as_dict(), "congested": [k for k, _ in hot], "hca_links": hca,
                         "allocation": job.allocation_id, "alarms": codes},
                label=_alarm_label(codes),
            )
        )  # fmt: skip
    return out
