"""The ``move`` actions: sets of placed or running whole-GPU jobs whose moves free a partly used unit
whole, executed when every job of the set is preemptible and a whole-GPU job waits for
fragmentation, proposed otherwise; at most :data:`MAX_MOVES` each per run (:func:`plan_moves`).
Plans only.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ...choices import JobKind
from ...models import Job
from ...placement import FreeState, RequestError, UnknownTier, place
from ...planner import HeldJob
from ..queue.passes import queued_job
from .common import MOVE, Action, Snapshot, give, hosts_text, label, per_host, take

#: jobs moved per run at most (each move restarts a job), and jobs in proposed moves at most
MAX_MOVES = 8


def _unit_free(st: Snapshot, key: str) -> int:
    return sum(sum(st.inv.gpus.get(h, {}).values()) for h in st.loc.domains[key].hosts)


def _whole_free(st: Snapshot, key: str) -> bool:
    dom = st.loc.domains[key]
    cap = st.loc.capacity(key)
    return cap > 0 and not any(h in st.unusable for h in dom.hosts) and _unit_free(st, key) == cap


def plan_moves(st: Snapshot) -> list[Action]:
    """Move sets, least used units first (the cheapest to empty), each planned on the GPUs free
    after the sets before it (never on the set's own GPUs: a job spanning two units does not
    consolidate into the other one): an executed set's jobs are on their new hosts and their old
    GPUs free; a proposed set keeps its old GPUs *and* holds its targets (nothing later is
    planned on either, so the listed proposals can all be made together), and its unit is not a
    target of later sets."""
    out: list[Action] = []
    moved = proposed = 0
    kept: set[str] = set()  # units that proposals would free
    units = st.loc.units()
    start_used = {u.key: st.loc.capacity(u.key) - _unit_free(st, u.key) for u in units}
    for unit in sorted(units, key=lambda u: (start_used[u.key], u.key)):
        if moved >= MAX_MOVES and proposed >= MAX_MOVES:
            break
        cap = st.loc.capacity(unit.key)
        used = cap - _unit_free(st, unit.key)
        if used <= 0 or any(h in st.unusable for h in unit.hosts):
            continue
        hosts = set(unit.hosts)
        movers: dict[int, int] = defaultdict(int)
        for h in st.held.values():
            for host, _, k in h.gpus:
                if host in hosts:
                    movers[h.job_id] += k
        if sum(movers.values()) != used:  # something else holds GPUs here (not a job, not whole GPUs)
            continue
        jobs = [st.jobs.get(pk) for pk in movers]
        if any(j is None or j.kind != JobKind.GPU or j.pk in st.touched for j in jobs):
            continue
        if any(not all(host in st.loc.hosts for host, _, _ in st.held[j.pk].gpus) for j in jobs):
            continue
        execute = st.fragmented and all(j.preemptible for j in jobs)
        if (moved if execute else proposed) + len(jobs) > MAX_MOVES:
            continue
        jobs.sort(key=lambda j: (-sum(k for _, _, k in st.held[j.pk].gpus), j.pk))
        whole_before = [u.key for u in units if _whole_free(st, u.key)]
        blocked = dict(st.blocked())
        for key in [unit.key, *whole_before, *kept]:
            for h in st.loc.domains[key].hosts:
                blocked.setdefault(h, "rebalance: kept whole")
        olds = [st.held[j.pk] for j in jobs]  # planned on GPUs free now: their own stay theirs until moved
        plans: list[tuple[Job, Any, tuple]] = []
        ok = True
        for j in jobs:
            try:
                req = queued_job(j).request(st.pools[j.pool_id].fabric_id)
            except (RequestError, UnknownTier):
                ok = False
                break
            key = st.key(j)
            d = place(st.loc, FreeState(gpus=st.inv.gpu_view(key), unusable=blocked), req, st.cong)
            old_tier = st.loc.span(per_host(st.held[j.pk]))[0]
            if not d.ok or d.tier is None or d.tier > old_tier:
                ok = False
                break
            plans.append((j, d, take(st.inv, d.placed, key)))
        if not ok:
            for _, _, gpus in plans:
                give(st.inv, HeldJob(0, 0, 0, 0, False, 0.0, gpus))
            continue
        if execute:  # moved: their old GPUs are free (a proposal keeps them, and holds its targets)
            for h in olds:
                give(st.inv, h)
        why = (
            f"frees {unit.name} whole ({cap} GPUs): whole free units {len(whole_before)} → {len(whole_before) + 1}"
            + ("" if execute else " (proposed: " + (
                "a job of the set is not preemptible" if not all(j.preemptible for j in jobs)
                else "no job is pending for fragmentation") + ")")
        )  # fmt: skip
        for j, d, gpus in plans:
            before = per_host(st.held[j.pk])
            out.append(
                Action(
                    MOVE, j.pk, f"{label(j)} moves from {hosts_text(before)} to {hosts_text(d.placed)}: {why}",
                    execute, placed=dict(d.placed), before=before, frees=[unit.name],
                    details={"decision": d.as_dict(), "allocation": j.allocation_id, "unit": unit.key},
                )
            )  # fmt: skip
            st.touched.add(j.pk)
            if execute:
                old = st.held[j.pk]
                st.held[j.pk] = HeldJob(
                    j.pk, old.tenant_id, old.pool_id, old.priority, old.preemptible, old.ends_at, gpus
                )
        if execute:
            moved += len(plans)
        else:
            proposed += len(plans)
            kept.add(unit.key)
    return out
