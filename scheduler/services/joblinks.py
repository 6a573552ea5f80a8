"""The job→links index (issue 24 §2): the one writer of ``scheduler.JobLink``.

For every job holding hosts (``placed``, ``running``, ``degraded``) it computes the directed
ports its traffic crosses from the routes (``routing.services.current.current_routes``: the
switches' LFTs over the stored topology) and its rails under its traffic model
(``scheduler.jobpaths``), and stores one row per (job, port, rail) with the path count.

Rails: rail ``r`` of a job is the HCA of index ``r`` (``mlx5_3`` is rail 3) of each of its
hosts, as ``faults.job_scopes`` numbers them (``faults.rails``); an HCA's LID is that of its lowest-numbered port that has
one (``fabric.Port.lid``). HCAs of different fabrics form separate rails per fabric.

Kept current (``scheduler.receivers``): on ``routing.signals.routes_changed`` every holding job
of that fabric (:func:`refresh` with ``fabric_id``), on ``job_changed`` the job (a job that no
longer holds hosts loses its rows). Each job is written in its own transaction, only when its
rows change, and ``job_links_changed`` is sent on commit with the port keys that changed.

Readers: :func:`links_of` (a job's links with live utilisation and congestion from
``telemetry.PortCounters``, the one store of latest rates) and :func:`jobs_on_ports` (which jobs
cross given ports, with their path counts and estimated share of the traffic).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.urls import reverse

from fabric.keys import link_key, port_key, port_name, split_link_key
from fabric.models import Fabric, Link, Port
from routing.services.current import current_routes
from telemetry.models import PortCounters

from ..choices import HOLDING
from ..jobpaths import ALL_TO_ALL, dead_ends, job_port_loads, rail_pairs
from ..models import Job, JobLink
from ..signals import job_links_changed
from .faults import job_scopes

log = logging.getLogger(__name__)


def job_rails(jobs: Iterable[Job]) -> dict[int, dict[int, dict[int, list[int]]]]:
    """``{job id: {fabric id: {rail: [LID, ...]}}}`` of ``jobs`` (module docstring), members in
    host-name order; HCAs gone from the fabric or without a LID are left out."""
    scopes = job_scopes(jobs)
    node_ids = [h.node_id for s in scopes for hcas in s.hosts.values() for h in hcas if h.node_id]
    lid_of: dict[int, int] = {}
    for node_id, lid in (
        Port.objects.filter(node_id__in=node_ids, lid__gt=0)
        .order_by("-port_num")
        .values_list("node_id", "lid")
    ):
        lid_of[node_id] = lid  # the lowest-numbered port last: it wins
    out: dict[int, dict[int, dict[int, list[int]]]] = {}
    for s in scopes:
        per: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
        for _host, hcas in sorted(s.hosts.items()):
            for h in hcas:
                if h.node_id and h.node_id in lid_of and h.fabric_id:
                    per[h.fabric_id][h.rail].append(lid_of[h.node_id])
        out[s.job_id] = {f: dict(r) for f, r in per.items()}
    return out


def compute(jobs: Iterable[Job]) -> dict[int, dict[tuple[str, int], tuple[int, int, int | None, bool]]]:
    """``{job id: {(port key, rail): (fabric id, paths, snapshot id, dead end)}}``: what the index
    should hold for ``jobs`` now (nothing for a fabric without routes). A rail with pairs without
    a path gets rows for the ports where they stop (``jobpaths.dead_ends``, ``dead end`` True)."""
    jobs = list(jobs)
    rails = job_rails(jobs)
    routes: dict[int, Any] = {}
    out: dict[int, dict[tuple[str, int], tuple[int, int, int | None]]] = {}
    for job in jobs:
        rows: dict[tuple[str, int], tuple[int, int, int | None]] = {}
        for fabric_id, by_rail in rails.get(job.pk, {}).items():
            if fabric_id not in routes:
                routes[fabric_id] = current_routes(Fabric(pk=fabric_id))
            cur = routes[fabric_id]
            if cur is None:
                continue
            t = cur.tables
            per_rail, unrouted = job_port_loads(t, by_rail, job.traffic)
            for rail, loads in per_rail.items():
                for code, n in loads.items():
                    rows[port_key(*t.port_key(code)), rail] = (fabric_id, n, cur.snapshot.pk, False)
            for rail, lids in by_rail.items() if unrouted else ():
                for code, n in dead_ends(t, rail_pairs(lids, job.traffic or ALL_TO_ALL)).items():
                    k = port_key(*t.port_key(code))
                    old = rows.get((k, rail))
                    rows[k, rail] = (fabric_id, n + (old[1] if old else 0), cur.snapshot.pk, True)
        out[job.pk] = rows
    return out


def refresh(job_ids: Iterable[int] | None = None, fabric_id: int | None = None) -> dict[str, int]:
    """Bring the index up to date for ``job_ids`` (default: every job holding hosts, or with
    rows), or for the jobs holding hosts on ``fabric_id``'s HCAs. Returns ``{"jobs", "changed",
    "rows"}`` (jobs looked at, jobs whose rows changed, rows written)."""
    holding = Job.objects.filter(state__in=HOLDING, allocation__isnull=False)
    stale = JobLink.objects.exclude(job__state__in=HOLDING)
    if job_ids is not None:
        job_ids = list(job_ids)
        holding = holding.filter(pk__in=job_ids)
        stale = stale.filter(job_id__in=job_ids)
    if fabric_id is not None:
        holding = holding.filter(allocation__items__gpu__host__fabric_id=fabric_id).distinct()
    jobs = list(holding.select_related("pool").order_by("pk"))
    wanted = compute(jobs)
    for jid in set(stale.values_list("job_id", flat=True)):
        wanted.setdefault(jid, {})
    counts = {"jobs": len(wanted), "changed": 0, "rows": 0}
    for jid, rows in sorted(wanted.items()):
        n = _write(jid, rows)
        if n is not None:
            counts["changed"] += 1
            counts["rows"] += n
    return counts


def _write(job_id: int, rows: dict[tuple[str, int], tuple[int, int, int | None, bool]]) -> int | None:
    """Replace one job's rows when they differ (its own transaction); None when unchanged."""
    with transaction.atomic():
        if not Job.objects.select_for_update().filter(pk=job_id).exists():
            return None
        have = {
            (k, r): (f, n, s, d)
            for k, r, f, n, s, d in JobLink.objects.filter(job_id=job_id).values_list(
                "port_key", "rail", "fabric_id", "paths", "snapshot_id", "dead_end"
            )
        }
        if {k: v[:2] + v[3:] for k, v in have.items()} == {k: v[:2] + v[3:] for k, v in rows.items()}:
            return None
        JobLink.objects.filter(job_id=job_id).delete()
        JobLink.objects.bulk_create(
            [JobLink(job_id=job_id, port_key=k, rail=r, fabric_id=f, paths=n, snapshot_id=s, dead_end=d)
             for (k, r), (f, n, s, d) in sorted(rows.items())]
        )  # fmt: skip
        changed = sorted(
            {k for k, _ in set(have) ^ set(rows)}
            | {k for (k, r), v in rows.items() if (k, r) in have and have[k, r] != v}
        )
        transaction.on_commit(lambda: job_links_changed.send(Job, job_id=job_id, ports=changed))
        return len(rows)


# --- readers -------------------------------------------------------------------------------------


def ports_of_link(key: str) -> list[str]:
    """The two port keys (both directions) of a link key ``"<guid>/<port>-<guid>/<port>"``.

    Raises:
        ValueError: not a link key.
    """
    a, b = split_link_key(key)
    return [port_key(*a), port_key(*b)]


def _live(keys: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{port key: {"port", "name", "link", "utilisation", "congestion", "xmit_bytes_per_s",
    "stale"}}`` from the stored ports and ``telemetry.PortCounters`` (None: no rate yet)."""
    keys = set(keys)
    ends = defaultdict(set)
    for k in keys:
        g, _, p = k.rpartition("/")
        ends[g].add(int(p))
    out: dict[str, dict[str, Any]] = {}
    if not keys:
        return out
    ports = {}
    for pk, guid, num, name in Port.objects.filter(node__node_guid__in=list(ends)).values_list(
        "pk", "node__node_guid", "port_num", "node__name"
    ):
        if num in ends[guid]:
            ports[pk] = port_key(guid, num)
            out[ports[pk]] = {"port": pk, "name": port_name(name or guid, num), "link": None,
                              "utilisation": None, "congestion": None, "xmit_bytes_per_s": None, "stale": None}  # fmt: skip
    for port_id, u, c, x, stale in PortCounters.objects.filter(port_id__in=list(ports)).values_list(
        "port_id", "utilisation", "congestion", "xmit_bytes_per_s", "stale"
    ):
        out[ports[port_id]].update(utilisation=u, congestion=c, xmit_bytes_per_s=x, stale=stale)
    for _a, ga, pa, gb, pb in Link.objects.filter(
        Q(port_a_id__in=list(ports)) | Q(port_b_id__in=list(ports))
    ).values_list(
        "port_a_id",
        "port_a__node__node_guid",
        "port_a__port_num",
        "port_b__node__node_guid",
        "port_b__port_num",
    ):
        key = link_key((ga, pa), (gb, pb))
        for k in (port_key(ga, pa), port_key(gb, pb)):
            if k in out:
                out[k]["link"] = key
    return out


def links_of(job_id: int) -> list[dict[str, Any]]:
    """A job's links: ``[{"port_key", "name", "link", "rails", "paths", "dead_end", "utilisation",
    "congestion", "xmit_bytes_per_s", "stale"}]`` (``paths`` summed over rails; ``rails`` the
    rails crossing it; utilisation/congestion 0..1 of the egress port, telemetry's latest sweep),
    the most loaded first (congestion, utilisation, paths)."""
    per: dict[str, dict[str, Any]] = {}
    for k, rail, n, dead in JobLink.objects.filter(job_id=job_id).values_list(
        "port_key", "rail", "paths", "dead_end"
    ):
        row = per.setdefault(k, {"port_key": k, "rails": [], "paths": 0, "dead_end": False})
        row["rails"].append(rail)
        row["paths"] += n
        row["dead_end"] |= dead
    live = _live(per)
    for k, row in per.items():
        row.update(live.get(k, {"port": None, "name": k, "link": None, "utilisation": None,
                                "congestion": None, "xmit_bytes_per_s": None, "stale": None}))  # fmt: skip
    return sorted(
        per.values(),
        key=lambda r: (-(r["congestion"] or 0), -(r["utilisation"] or 0), -r["paths"], r["port_key"]),
    )


def jobs_on_ports(keys: Iterable[str], user=None) -> dict[str, list[dict[str, Any]]]:
    """Which jobs cross each port: ``{port key: [{"job", "name", "state", "paths", "share",
    "url"}]}`` (``url`` the job's page), the largest estimated share first. ``share`` (0..1) is the *estimated* part of the port's
    traffic the job causes: its path count on the port × its measured HCA rate (the mean
    ``xmit_bytes_per_s`` of its HCA ports, telemetry's latest sweep; 1 when none is measured),
    normalised over the jobs on the port. An estimate: routes say where a job's pairs go, not
    how much each pair sends.

    ``user``: list only the jobs that user may read (``scheduler.access.scope_jobs``: an Admin
    every job, others their tenants' jobs), as the job pages do; the shares stay those of every
    job on the port. None (internal callers): every job."""
    keys = list(set(keys))
    rows = list(
        JobLink.objects.filter(port_key__in=keys, job__state__in=HOLDING).values_list(
            "port_key", "job_id", "job__name", "job__state", "paths"
        )
    )
    jobs = {j for _, j, _, _, _ in rows}
    rate = job_rates(jobs)
    shown = jobs
    if user is not None and jobs:
        from ..access import scope_jobs  # the access module imports the queue, which imports this

        shown = set(scope_jobs(Job.objects.filter(pk__in=jobs), user).values_list("pk", flat=True))
    per: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for k, j, name, st, n in rows:
        e = per[k].setdefault(
            j, {"job": j, "name": name, "state": st, "paths": 0, "url": reverse("scheduler:job", args=[j])}
        )
        e["paths"] += n
    out: dict[str, list[dict[str, Any]]] = {}
    for k, by_job in per.items():
        weights = {j: e["paths"] * (rate.get(j) or 1.0) for j, e in by_job.items()}
        total = sum(weights.values()) or 1.0
        for j, e in by_job.items():
            e["share"] = round(weights[j] / total, 4)
        visible = [e for j, e in by_job.items() if j in shown]
        if visible:
            out[k] = sorted(visible, key=lambda e: (-e["share"], e["job"]))
    return out


def job_rates(job_ids: Iterable[int]) -> dict[int, float | None]:
    """Each job's mean measured HCA send rate, bytes/s (its HCA ports' ``xmit_bytes_per_s``,
    telemetry's latest sweep; None when none is measured)."""
    job_ids = list(job_ids)
    if not job_ids:
        return {}
    rails = {s.job_id: s for s in job_scopes(Job.objects.filter(pk__in=job_ids).select_related("pool"))}
    out: dict[int, float | None] = {}
    for jid, s in rails.items():
        nodes = [h.node_id for hcas in s.hosts.values() for h in hcas if h.node_id]
        vals = [
            v for v in PortCounters.objects.filter(port__node_id__in=nodes, xmit_bytes_per_s__isnull=False)
            .values_list("xmit_bytes_per_s", flat=True)
        ]  # fmt: skip
        out[jid] = sum(vals) / len(vals) if vals else None
    return out
