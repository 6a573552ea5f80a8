"""The ``reclaim`` actions: a pending job within its pool's guaranteed share takes back borrowed
whole GPUs (victims by ``scheduler.placement.select_victims``), MIG slices of its profile or shares
of one GPU (victims by :func:`_fewest`, the same order) from other pools' preemptible jobs
(:func:`plan_reclaims`; the package docstring says which). Plans only.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from pools.models import Pool

from ...choices import JobKind, JobState
from ...models import Job
from ...placement import FreeState, RequestError, RunningJob, UnknownTier, place, select_victims
from ...planner import PREEMPT_CANDIDATES, HeldJob, Inventory, fair_order
from .. import state
from ..queue.passes import queued_job
from .common import RECLAIM, Action, Snapshot, give, label, take

#: at most this many victims per reclaim, and engine checks per MIG / fraction victim search
#: (whole GPUs: ``select_victims``' own budget); candidates searched: the
#: ``planner.PREEMPT_CANDIDATES`` lowest-priority ones holding the most
MAX_VICTIMS = 8
VICTIM_CHECKS = 2000


@dataclass(frozen=True)
class _Cand:
    """A borrower's job a reclaim may preempt: ``units`` (GPUs, slices of the profile asked
    for, or 1 share) it holds that the pending job may use, ``placed`` host → those units;
    ``gpu``/``memory_mib``/``compute_pct``: its fraction (shares only)."""

    job_id: int
    priority: int
    placed: dict[str, int]
    gpu: int | None = None
    memory_mib: int = 0
    compute_pct: int = 0

    @property
    def units(self) -> int:
        return sum(self.placed.values())


def _guarantee(st: Snapshot, job: Job, pool: Pool) -> tuple[int, int, str] | None:
    """``(held, guaranteed, unit word)`` when ``job`` fits in its pool's guaranteed share on top
    of what the pool holds (the pools' own rule, ``pools.services.allocation``: whole GPUs and
    fractions count against ``guaranteed_gpus`` — a fraction as one more GPU —, MIG slices
    against ``guaranteed_slices``); None otherwise."""
    if job.kind == JobKind.MIG:
        held, guaranteed, more, unit = (
            st.used_slices.get(pool.pk, 0),
            pool.guaranteed_slices,
            job.count,
            "MIG slices",
        )
    else:
        held, guaranteed, unit = st.used.get(pool.pk, 0), pool.guaranteed_gpus, "GPUs"
        more = job.count if job.kind == JobKind.GPU else 1
    if not guaranteed or held + more > guaranteed:
        return None
    return held, guaranteed, unit


def _may_take(st: Snapshot, job: Job, pool: Pool, h: HeldJob) -> bool:
    """A held job a reclaim for ``job`` may preempt: preemptible, of another pool, holding
    borrowed capacity, not touched by this run, and not of a higher priority than a preemptible
    ``job`` (the next pass would preempt ``job`` for it again: no ping-pong)."""
    return (
        h.preemptible
        and h.pool_id != pool.pk
        and h.job_id in st.borrowed
        and h.job_id not in st.touched
        and not (job.preemptible and h.priority > job.priority)
    )


def plan_reclaims(st: Snapshot) -> list[Action]:
    """The ``reclaim`` actions (module docstring), pending jobs in the pass's order; each one
    planned on the state the ones before it left."""
    out: list[Action] = []
    pending = [j for j in st.jobs.values() if j.state == JobState.PENDING]
    if not pending or not st.borrowed:
        return out
    for q in fair_order([queued_job(j) for j in pending], state.fair_shares(st.now)):
        job = st.jobs[q.job_id]
        pool = st.pools[job.pool_id]
        share = _guarantee(st, job, pool)
        if share is None:
            continue
        try:
            req = q.request(pool.fabric_id)
        except (RequestError, UnknownTier):
            continue
        plan = {JobKind.GPU: _reclaim_gpus, JobKind.MIG: _reclaim_slices}.get(job.kind, _reclaim_share)
        action = plan(st, job, pool, req, share)
        if action is not None:
            out.append(action)
    return out


def _reclaim_reason(
    job: Job, pool: Pool, share: tuple[int, int, str], wants: str, taken: str, victims, st
) -> str:
    """A reclaim's reason: the pool's guarantee and holding (``share``: held, guaranteed, unit),
    what ``job`` waits for (``wants``), what is taken back (``taken``) and from which jobs."""
    held, guaranteed, unit = share
    # the reason goes into ``job``'s events (its tenant reads them): other tenants' jobs unnamed
    names = "; ".join(
        f"{label(st.jobs[v])} in pool {st.jobs[v].pool.name}"
        if st.jobs[v].tenant_id == job.tenant_id
        else "a job of another tenant"
        for v in victims
    )
    jobs = f"{len(victims)} preemptible job{'s' if len(victims) != 1 else ''}"
    return (
        f"pool {pool.name} holds {held} of the {guaranteed} {unit} guaranteed to it and {label(job)} "
        f"waits for {wants}: reclaim {taken} from {jobs} (the fewest): {names}"
    )


def _reclaim_action(job, pool, share, reason, d, victims, st, **details) -> Action:
    """The ``reclaim`` :class:`Action` placing ``job`` as decision ``d`` after ``victims``
    (job ids) end; ``details`` added to its details (module docstring of :class:`Action`)."""
    held, guaranteed, unit = share
    return Action(
        RECLAIM, job.pk, reason, True, placed=dict(d.placed), victims=list(victims),
        details={"decision": d.as_dict(), "pool": pool.pk, "kind": job.kind, "unit": unit,
                 "guaranteed": guaranteed, "held": held,
                 "victim_pools": sorted({st.jobs[v].pool_id for v in victims}), **details},
    )  # fmt: skip


def _reclaim_gpus(st: Snapshot, job: Job, pool: Pool, req, share) -> Action | None:
    """Whole GPUs: victims by ``select_victims`` (the fewest borrowers' jobs whose GPUs let the
    job place), as a pass preempts."""
    used = share[0]
    key = st.key(job)
    blocked = st.blocked(head_ok=job.pk)
    free = FreeState(gpus=st.inv.gpu_view(key), unusable=blocked)
    if place(st.loc, free, req, st.cong).ok:
        return None  # the next pass places it without taking anything back
    cands = []
    for h in st.held.values():
        if not _may_take(st, job, pool, h):
            continue
        placed: dict[str, int] = defaultdict(int)
        for host, model, k in h.gpus:
            if Inventory.matches(key, model) and host in st.loc.hosts and host not in blocked:
                placed[host] += k
        if placed:
            cands.append(RunningJob(h.job_id, h.priority, dict(placed), True))
    if not cands:
        return None
    cands.sort(key=lambda r: r.job_id)
    pre = select_victims(
        st.loc, free, req, cands, priority=max(c.priority for c in cands) + 1, congestion=st.cong
    )
    if pre is None or not pre.decision.ok or not pre.victims:
        return None
    victims = sorted(pre.victims)
    taken = 0
    for v in victims:
        h = st.held.pop(v)
        give(st.inv, h)
        n = sum(k for _, _, k in h.gpus)
        st.used[h.pool_id] = st.used.get(h.pool_id, 0) - n
        taken += n
    d = pre.decision
    gpus = take(st.inv, d.placed, key)
    st.used[pool.pk] = used + job.count
    st.held[job.pk] = HeldJob(job.pk, job.tenant_id, pool.pk, job.priority, job.preemptible, 0.0, gpus)
    st.touched.update([job.pk, *victims])
    reason = _reclaim_reason(
        job, pool, share, str(job.count), f"{taken} borrowed GPU{'s' if taken != 1 else ''}", victims, st
    )
    return _reclaim_action(
        job, pool, share, reason, d, victims, st, guaranteed_gpus=pool.guaranteed_gpus, held_gpus=used
    )


def _fewest(st: Snapshot, req, cands: list[_Cand], free_after, enough) -> tuple[list[int], Any] | None:
    """The fewest of ``cands`` whose release lets ``req`` place (``free_after(combo)``: the free
    state once they released; ``enough(combo)``: a cheap necessary condition), the rule
    ``select_victims`` applies to whole GPUs: the fewest victims, then the lowest highest
    priority, the most compact tier, the fewest units released, the lowest job ids. Exhaustive
    over the :data:`~scheduler.planner.PREEMPT_CANDIDATES` lowest-priority candidates holding
    the most, up to :data:`MAX_VICTIMS` victims and :data:`VICTIM_CHECKS` engine calls.
    Returns ``(victim ids sorted, decision)`` or None."""
    cands = sorted(cands, key=lambda c: (c.priority, -c.units, c.job_id))[:PREEMPT_CANDIDATES]
    checks = 0
    for k in range(1, min(MAX_VICTIMS, len(cands)) + 1):
        best = None
        for combo in combinations(cands, k):
            if not enough(combo):
                continue
            if checks >= VICTIM_CHECKS:
                break
            checks += 1
            d = place(st.loc, free_after(combo), req, st.cong)
            if d.ok:
                ids = sorted(c.job_id for c in combo)
                rank = (max(c.priority for c in combo), d.tier, sum(c.units for c in combo), ids)
                if best is None or rank < best[0]:
                    best = (rank, ids, d)
        if best is not None:
            return best[1], best[2]
        if checks >= VICTIM_CHECKS:
            return None
    return None


def _reclaim_slices(st: Snapshot, job: Job, pool: Pool, req, share) -> Action | None:
    """MIG slices of the job's profile: the fewest borrowers' MIG jobs holding slices of that
    profile (on GPUs the pool's and the job's model filters match, on usable hosts) whose
    release lets the job place (:func:`_fewest`)."""
    key, prof = st.key(job), job.mig_profile
    blocked = st.blocked(head_ok=job.pk)
    base = st.inv.mig_view(key)
    if place(st.loc, FreeState(mig=base, unusable=blocked), req, st.cong).ok:
        return None
    cands = []
    for h in st.held.values():
        if not _may_take(st, job, pool, h):
            continue
        placed: dict[str, int] = defaultdict(int)
        for host, p, model, n in st.slices.get(h.job_id, ()):
            if p == prof and Inventory.matches(key, model) and host in st.loc.hosts and host not in blocked:
                placed[host] += n
        if placed:
            cands.append(_Cand(h.job_id, h.priority, dict(placed)))
    if not cands:
        return None
    have = sum(v.get(prof, 0) for h, v in base.items() if h in st.loc.hosts and h not in blocked)

    def free_after(combo) -> FreeState:
        mig = {h: dict(v) for h, v in base.items()}
        for c in combo:
            for host, n in c.placed.items():
                mig.setdefault(host, {})[prof] = mig.get(host, {}).get(prof, 0) + n
        return FreeState(mig=mig, unusable=blocked)

    found = _fewest(st, req, cands, free_after, lambda combo: have + sum(c.units for c in combo) >= job.count)
    if found is None:
        return None
    victims, d = found
    taken = 0
    for v in victims:
        h = st.held.pop(v)
        for host, p, model, n in st.slices.pop(v, ()):  # all its slices come free
            slices = st.inv.mig.setdefault(host, {})
            slices[(p, model)] = slices.get((p, model), 0) + n
            st.used_slices[h.pool_id] = st.used_slices.get(h.pool_id, 0) - n
            taken += n if p == prof else 0
    for host, n in sorted(d.placed.items()):
        st.inv.take_slices(host, n, prof, key)
    st.used_slices[pool.pk] = share[0] + job.count
    st.held[job.pk] = HeldJob(job.pk, job.tenant_id, pool.pk, job.priority, job.preemptible, 0.0, ())
    st.touched.update([job.pk, *victims])
    reason = _reclaim_reason(
        job, pool, share, f"{job.count} × {prof}", f"{taken} borrowed {prof} slice{'s' if taken != 1 else ''}",
        victims, st,
    )  # fmt: skip
    return _reclaim_action(job, pool, share, reason, d, victims, st, mig_profile=prof)


def _reclaim_share(st: Snapshot, job: Job, pool: Pool, req, share) -> Action | None:
    """A shared-GPU fraction: the fewest borrowers' fraction jobs on one GPU (the pool's and the
    job's model filters, a usable host) whose shares, ended, leave room for the job's memory
    and compute there (:func:`_fewest`). The job is placed on that GPU."""
    key = st.key(job)
    mem, pct = job.memory_mib or 0, job.compute_pct or 0
    blocked = st.blocked(head_ok=job.pk)
    base = st.inv.shared_view(key)
    if place(st.loc, FreeState(shared=base, unusable=blocked), req, st.cong).ok:
        return None
    cands = []
    for h in st.held.values():
        if not _may_take(st, job, pool, h):
            continue
        for host, gpu, model, m, p in st.shares.get(h.job_id, ()):
            if (
                gpu in st.rooms
                and Inventory.matches(key, model)
                and host in st.loc.hosts
                and host not in blocked
            ):
                cands.append(_Cand(h.job_id, h.priority, {host: 1}, gpu, m, p))
    if not cands:
        return None

    def enough(combo) -> bool:
        room = st.rooms[combo[0].gpu]
        return (
            len({c.gpu for c in combo}) == 1
            and room[2] + sum(c.memory_mib for c in combo) >= mem
            and room[3] + sum(c.compute_pct for c in combo) >= pct
        )

    def free_after(combo) -> FreeState:
        gpu = combo[0].gpu
        shared = {}
        for host, entries in st.inv.shared.items():
            rooms = []
            for g in entries:
                if Inventory.matches(key, g[1]):
                    more = [c for c in combo if g[0] == gpu]
                    rooms.append(
                        (g[2] + sum(c.memory_mib for c in more), g[3] + sum(c.compute_pct for c in more))
                    )
            if rooms:
                shared[host] = rooms
        return FreeState(shared=shared, unusable=blocked)

    found = _fewest(st, req, cands, free_after, enough)
    if found is None:
        return None
    victims, d = found
    gpu = next(c.gpu for c in cands if c.job_id == victims[0])
    if set(d.placed) != {st.gpu_host[gpu]}:  # only that GPU has room once they end (none had before)
        return None
    room = st.rooms[gpu]
    for v in victims:
        h = st.held.pop(v)
        for _, g, _, m, p in st.shares.pop(v, ()):
            st.rooms[g][2] += m
            st.rooms[g][3] += p
            per = st.share_gpus.get(h.pool_id, {})
            per[g] = per.get(g, 1) - 1
            if not per[g]:
                del per[g]
                st.used[h.pool_id] = st.used.get(h.pool_id, 0) - 1
    room[2] -= mem
    room[3] -= pct
    per = st.share_gpus.setdefault(pool.pk, {})
    if gpu not in per:
        st.used[pool.pk] = st.used.get(pool.pk, 0) + 1
    per[gpu] = per.get(gpu, 0) + 1
    st.held[job.pk] = HeldJob(job.pk, job.tenant_id, pool.pk, job.priority, job.preemptible, 0.0, ())
    st.touched.update([job.pk, *victims])
    n = len(victims)
    reason = _reclaim_reason(
        job, pool, share, f"{mem} MiB + {pct} % of one GPU",
        f"{n} borrowed share{'s' if n != 1 else ''} of GPU {gpu} on {st.gpu_host[gpu]}", victims, st,
    )  # fmt: skip
    return _reclaim_action(job, pool, share, reason, d, victims, st, gpu=gpu)
