"""What the rebalancer's planners share: :class:`Action` (one thing a run does or reports) and its
kinds, and :class:`Snapshot`, the stored state as plain shapes (:func:`load_snapshot`: the locality,
the free inventory, unusable and reserved hosts, congestion marks, held jobs, pools and their usage,
borrowed allocations; read with the same readers as a scheduling pass, ``scheduler.services.state``),
which each planner changes in memory as it plans (:func:`give`, :func:`take`, :func:`take_back`).
Reads only.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pools.models import Pool

from ...choices import HOLDING, JobKind, JobState, PendingCode
from ...locality import Locality
from ...models import Job
from ...placement import Congestion
from ...planner import HeldJob, Inventory
from .. import state

RECLAIM, MOVE, CONGESTED = "reclaim", "move", "congested"
REPLACE, REQUEUE = "replace", "requeue"


@dataclass
class Action:
    """One thing the rebalancer does or reports.

    ``kind``: ``reclaim`` / ``move`` / ``congested``; ``job_id`` the job it is about (reclaim:
    the pending job placed; move: the job moved; congested: the job reported); ``execute``:
    whether a real run carries it out (reports and proposals: False); ``reason``: what a person
    reads; ``placed``: host → GPUs (MIG slices; 1 for a fraction) where the job goes (or could
    go); ``before``: host → GPUs it holds now (``{}`` for a pending job); ``victims``: jobs
    preempted (reclaim); ``frees``: units a move set frees whole (names); ``details``: the
    engine's decision dict, the allocation the job holds when planned (``allocation``), the
    pools involved; a reclaim's ``kind`` (gpu/mig/fraction), ``unit`` (``GPUs``/``MIG
    slices``), ``held``/``guaranteed`` (the pool's, in that unit), ``gpu`` (a fraction's GPU
    id); a congestion report's ``congested`` domain keys and ``hca_links``.
    """

    kind: str
    job_id: int
    reason: str
    execute: bool
    placed: dict[str, int] = field(default_factory=dict)
    before: dict[str, int] = field(default_factory=dict)
    victims: list[int] = field(default_factory=list)
    frees: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    label: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (the API's action list); ``label`` what the action is, in words (a
        ``congested`` report on links whose alarms are errors says so, not "congested")."""
        return {
            "kind": self.kind,
            "label": self.label or self.kind,
            "job": self.job_id,
            "execute": self.execute,
            "reason": self.reason,
            "placed": dict(sorted(self.placed.items())),
            "before": dict(sorted(self.before.items())),
            "victims": list(self.victims),
            "frees": list(self.frees),
            "details": self.details,
        }


@dataclass
class Snapshot:
    loc: Locality
    inv: Inventory
    unusable: dict[str, str]
    reserved: dict[str, str]  # host → reserved for the queue's head (job id)
    head: int | None
    cong: Congestion
    held: dict[int, HeldJob]
    jobs: dict[int, Job]
    pools: dict[int, Pool]
    used: dict[int, int]  # pool → GPUs held (pools' count: whole + distinct GPUs with fractions)
    borrowed: set[int]  # jobs whose allocation holds borrowed GPUs, slices or a borrowed share
    fragmented: bool  # some whole-GPU job is pending for fragmentation
    now: datetime
    touched: set[int] = field(default_factory=set)
    used_slices: dict[int, int] = field(default_factory=dict)  # pool → MIG slices held
    # job → its MIG slices ((host, profile, model, n), ...) / fractions ((host, GPU, model, MiB, %), ...):
    # loaded only when a MIG / fraction job is pending
    slices: dict[int, tuple] = field(default_factory=dict)
    shares: dict[int, tuple] = field(default_factory=dict)
    rooms: dict[int, list] = field(default_factory=dict)  # GPU → its ``inv.shared`` entry (the same list)
    gpu_host: dict[int, str] = field(default_factory=dict)  # GPU of ``rooms`` → host name
    share_gpus: dict[int, dict[int, int]] = field(default_factory=dict)  # pool → GPU → its fractions there
    hca: dict[str, list[state.HcaMark]] = field(default_factory=dict)  # host → its congested HCA links

    def key(self, job: Job) -> tuple[str, str]:
        return ((self.pools[job.pool_id].gpu_model or "").lower(), (job.gpu_model or "").lower())

    def blocked(self, *, head_ok: int | None = None) -> dict[str, str]:
        """Unusable hosts plus the head's reserved ones (not for the head itself)."""
        if head_ok is not None and head_ok == self.head:
            return self.unusable
        return {**self.reserved, **self.unusable}


def load_snapshot(now: datetime) -> Snapshot:
    loc = state.current_locality()
    jobs = {
        j.pk: j
        for j in Job.objects.filter(state__in=[*HOLDING, JobState.PENDING]).select_related("pool", "tenant")
    }
    waiting = {j.kind for j in jobs.values() if j.state == JobState.PENDING} & {JobKind.MIG, JobKind.FRACTION}
    inv = state.load_inventory(loc, {"gpu", *waiting})
    inv.reset_views({h: s.fabric_id for h, s in loc.hosts.items()})
    held = {h.job_id: h for h in state.held_jobs(loc)}
    pools = {
        p.pk: p
        for p in Pool.objects.select_related("tenant").filter(pk__in={j.pool_id for j in jobs.values()})
    }
    # a pool deleted between the two reads (its jobs go with it): leave its jobs out of this pass
    jobs = {pk: j for pk, j in jobs.items() if j.pool_id in pools}
    infos = state.pool_infos(pools)
    used = {pk: info.used_gpus for pk, info in infos.items()}
    borrowed = set(
        Job.objects.filter(
            state__in=HOLDING, allocation__borrowed=True, allocation__state="active"
        ).values_list("pk", flat=True)
    )
    reserved: dict[str, str] = {}
    head = None
    for pk, hosts in Job.objects.filter(state=JobState.PENDING, reserved_start__isnull=False).values_list(
        "pk", "reserved_hosts"
    ):
        head = pk
        for h in hosts or ():
            reserved.setdefault(h, f"reserved for job {pk}")
    fragmented = any(
        j.state == JobState.PENDING and j.kind == JobKind.GPU and j.pending_code == PendingCode.FRAGMENTATION
        for j in jobs.values()
    )
    st = Snapshot(
        loc, inv, state.unusable_hosts(loc), reserved, head, state.congestion_marks(loc), held, jobs, pools,
        used, borrowed, fragmented, now, used_slices={pk: info.used_slices for pk, info in infos.items()},
    )  # fmt: skip
    st.hca = state.hca_link_marks(loc)
    if JobKind.MIG in waiting:
        st.slices = state.held_slices(loc)
    if JobKind.FRACTION in waiting:
        _load_shares(st)
    return st


def _load_shares(st: Snapshot) -> None:
    """The held fractions and the room of every GPU open to a fraction, full shared GPUs
    included (added to ``inv.shared``: a reclaim may free room there)."""
    st.shares = state.held_fractions(st.loc)
    for host, entries in st.inv.shared.items():
        for g in entries:
            st.rooms[g[0]], st.gpu_host[g[0]] = g, host
    where = {gpu: host for items in st.shares.values() for host, gpu, *_ in items}
    for gpu, entry in sorted(state.shared_room(st.loc, set(where) - set(st.rooms)).items()):
        st.inv.shared.setdefault(where[gpu], []).append(entry)
        st.rooms[gpu], st.gpu_host[gpu] = entry, where[gpu]
    for job_id, items in st.shares.items():
        job = st.jobs.get(job_id)
        if job is not None:
            for _, gpu, *_ in items:
                per = st.share_gpus.setdefault(job.pool_id, {})
                per[gpu] = per.get(gpu, 0) + 1


def label(job: Job) -> str:
    return f"{job} ({job.tenant.name})"


def hosts_text(placed: dict[str, int]) -> str:
    return ", ".join(f"{h} ×{n}" for h, n in sorted(placed.items()))


def per_host(held: HeldJob) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for host, _, k in held.gpus:
        out[host] += k
    return dict(out)


def give(inv: Inventory, held: HeldJob) -> None:
    by_host: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for host, model, k in held.gpus:
        by_host[host].append((model, k))
    for host, lst in by_host.items():
        inv.give_gpus(host, lst)


def take_back(inv: Inventory, held: HeldJob) -> None:
    """Undo :func:`give` (the same models on the same hosts)."""
    for host, model, k in held.gpus:
        inv.take_gpus(host, k, (model, ""))


def take(inv: Inventory, placed: dict[str, int], key) -> tuple[tuple[str, str, int], ...]:
    gpus = []
    for host, n in sorted(placed.items()):
        gpus.extend((host, m, k) for m, k in inv.take_gpus(host, n, key))
    return tuple(gpus)
