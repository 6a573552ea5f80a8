"""The rebalancing worker (issue 12, "Rebalancing worker"): reclaim borrowed GPUs, MIG slices and
shared-GPU fractions for owners with pending work, move preemptible jobs so that whole units
(leaves, rail pods) come free, and report jobs that run across persistently congested links
(uplinks, or their hosts' own HCA links) when a better placement exists.

:func:`plan_rebalance` builds the list of :class:`Action` from the stored state, with the same
readers as a scheduling pass (``scheduler.services.state``) and the placement engine
(``scheduler.placement.place``/``select_victims``); it writes nothing. :func:`run_rebalance`
plans and, unless ``dry_run``, executes: a dry run lists exactly the actions the real run takes
on the same state (both call :func:`plan_rebalance`; the plan is deterministic).

Actions, planned in this order on one in-memory copy of the free GPUs (each sees the GPUs the
ones before it took or freed, as a pass does):

* ``replace`` / ``requeue`` — a ``degraded`` job one of whose hosts lost its fabric (a failing
  cause, ``faults.FAILING_CODES``: an HCA link down, an HCA or the host gone): what its
  ``on_fault`` does, by the scheduler's own rule (``faults.plan_replacement``). ``replace``: each
  failed host by a healthy host of the same placement unit with the GPUs (executed through
  ``faults.replace_hosts``, the pass's own writer), else ``requeue``; ``requeue``: executed
  (``faults.requeue_degraded``); ``notify``: the job keeps running degraded, and the replacement
  (or, without one, a requeue) is *proposed* as the admin's option — applied with ``POST
  /api/scheduler/jobs/{id}/replace/`` (``faults.replace_now``, the same writer). Planned first: a
  pass replaces before it places new jobs too.
* ``reclaim`` (executed) — the pools' guarantee (issue 11): a pending job that fits in its
  pool's guaranteed share on top of what the pool holds (the pools' own counting: whole GPUs
  and a fraction — one GPU more — against ``Pool.guaranteed_gpus``, MIG slices against
  ``guaranteed_slices``) and that does not place on what is free, while other pools'
  *borrowed* allocations (``Allocation.borrowed``) of preemptible jobs hold capacity of the
  same kind it may use (its model filters, usable hosts): whole GPUs for a whole-GPU job,
  slices of its profile for a MIG job, shares of one GPU for a fraction. Victims: the fewest
  such jobs whose release lets it place (whole GPUs: ``select_victims``; slices and shares:
  :func:`_fewest`, the same order — fewest victims, then the lowest highest priority, the most
  compact tier, the fewest units released; a fraction's victims are on one GPU, the one it is
  placed on). The guarantee is the pool's right whatever the priorities, as in
  ``pools.services.allocation``'s own reclaim; except that a preemptible job does not reclaim
  from a higher-priority one, which a pass would then preempt it for: the two would take the
  capacity from each other on every run. Executed as a pass binds a preemption: one
  transaction preempts the victims (requeued when they asked: ``Job.requeue``) and places the
  job (``queue.bind_job``), with a ``job.reclaimed`` event carrying the reason and a
  ``job.reclaim`` audit entry (each victim its ``job.preempted`` event saying for whom). The gap
  this fills: a pass places on named GPUs (a fraction on a named GPU) and plans MIG jobs only
  on free slices, and the pools' allocation service reclaims only for requests by count, so no
  pass ever reclaimed; and a pass preempts only for a higher priority. A pass that leaves such
  a job pending ends with these reclaims itself (:func:`reclaim_for_guarantees`); the periodic
  run catches the rest.
* ``move`` — a unit that is partly used, only by placed/running whole-GPU jobs, whose jobs all
  place elsewhere (not on a whole free unit, not on hosts reserved for the queue's head, not on
  unusable hosts; never spanning a higher tier than now): moving them frees the unit whole.
  Executed (``job.moved`` event, ``job.move`` audit; the job is ``placed`` on its new hosts,
  its prolog starts it again) when every job of the set is preemptible and some whole-GPU job is
  pending for ``fragmentation`` (moving running work helps only a job that waits for a shape);
  otherwise proposed (listed, a ``job.move_proposed`` event once per target). At most
  :data:`MAX_MOVES` jobs moved, and as many in proposals, per run; the proposals of one run can
  all be made together (``_plan_moves``).
* ``congested`` (reported) — a placed/running job whose units' uplinks (or, when it spans
  above them, its blocks' or spine groups' uplinks) carry a port with an open congestion or error
  alarm (``state.congestion_marks``; the counter rules raise ``port.congestion`` only after
  ``consecutive`` sweeps over the threshold: persistent, not one bad sample), or one of whose
  hosts' own HCA links (HCA port ↔ leaf port) carries such an alarm (``state.hca_link_marks``:
  the report names the link by both ends, the alarm's figure and the ports' latest congestion
  index from telemetry), and for which the engine finds a placement, on the free GPUs plus its
  own, that uses no marked domain and no host with a congested HCA link and spans no higher
  tier. A ``job.congested`` event once per job and target.

Every action carries its ``reason``. The real run holds the pass lock (``queue.PASS_LOCK``): never
at the same time as a pass; a repeated run finds nothing more to do once its actions are done
(reclaimed jobs are placed; moved units are whole; reports are recorded once).

Errors: none raised for a refused action (another writer changed the job in between): its
``outcome`` says why and the next run plans again.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from itertools import combinations
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts import audit
from core.locks import single_instance
from events.models import Event
from pools.models import Pool
from pools.services.allocation import AllocationError

from ...choices import HOLDING, JobKind, JobState, OnFault, PendingCode
from ...locality import TIER_NAMES, UNIT_TIER, Locality
from ...models import Job
from ...placement import (
    PLACED,
    Congestion,
    FreeState,
    RequestError,
    RunningJob,
    UnknownTier,
    place,
    select_victims,
)
from ...planner import PREEMPT_CANDIDATES, HeldJob, Inventory, Outcome, fair_order
from .. import faults, state
from ..queue import (  # the queue stays the one writer of jobs: the rebalancer binds through it
    PASS_LIMIT_S,
    PASS_LOCK,
    JobError,
    bind_job,
    job_event,
    move,
    queued_job,
    seen_by,
)

log = logging.getLogger(__name__)

RECLAIM, MOVE, CONGESTED = "reclaim", "move", "congested"
REPLACE, REQUEUE = "replace", "requeue"
#: jobs moved per run at most (each move restarts a job), and jobs in proposed moves at most
MAX_MOVES = 8
_SOURCE = "rebalance"


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


# --- the stored state, as plain shapes ------------------------------------------------------------


@dataclass
class _State:
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


def _load(now: datetime) -> _State:
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
    st = _State(
        loc, inv, state.unusable_hosts(loc), reserved, head, state.congestion_marks(loc), held, jobs, pools,
        used, borrowed, fragmented, now, used_slices={pk: info.used_slices for pk, info in infos.items()},
    )  # fmt: skip
    st.hca = state.hca_link_marks(loc)
    if JobKind.MIG in waiting:
        st.slices = state.held_slices(loc)
    if JobKind.FRACTION in waiting:
        _load_shares(st)
    return st


def _load_shares(st: _State) -> None:
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


def _label(job: Job) -> str:
    return f"{job} ({job.tenant.name})"


def _hosts_text(placed: dict[str, int]) -> str:
    return ", ".join(f"{h} ×{n}" for h, n in sorted(placed.items()))


def _per_host(held: HeldJob) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for host, _, k in held.gpus:
        out[host] += k
    return dict(out)


def _give(inv: Inventory, held: HeldJob) -> None:
    by_host: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for host, model, k in held.gpus:
        by_host[host].append((model, k))
    for host, lst in by_host.items():
        inv.give_gpus(host, lst)


def _take_back(inv: Inventory, held: HeldJob) -> None:
    """Undo :func:`_give` (the same models on the same hosts)."""
    for host, model, k in held.gpus:
        inv.take_gpus(host, k, (model, ""))


def _take(inv: Inventory, placed: dict[str, int], key) -> tuple[tuple[str, str, int], ...]:
    gpus = []
    for host, n in sorted(placed.items()):
        gpus.extend((host, m, k) for m, k in inv.take_gpus(host, n, key))
    return tuple(gpus)


# --- planning -------------------------------------------------------------------------------------


def plan_rebalance(now: datetime | None = None) -> list[Action]:
    """The actions a rebalancing run takes now (module docstring), in execution order. Reads the
    database, writes nothing; the same stored state gives the same list."""
    st = _load(now or timezone.now())
    return [*_plan_faults(st), *_plan_reclaims(st), *_plan_moves(st), *_plan_congested(st)]


def _plan_faults(st: _State) -> list[Action]:
    """The ``replace`` / ``requeue`` actions for degraded jobs whose hosts lost their fabric
    (module docstring): what the job's ``on_fault`` does, by the scheduler's own rule
    (``faults.plan_replacement``: a healthy host of the same placement unit with the GPUs),
    executed by a real run; for a ``notify`` job the same, proposed as the admin's option
    (``POST /api/scheduler/jobs/{id}/replace/``). The hosts a replacement takes are taken from
    this plan's free GPUs, so no later action counts them."""
    out: list[Action] = []
    taken: dict[str, int] = {}
    degraded = sorted(
        (j for j in st.jobs.values() if j.state == JobState.DEGRADED and j.allocation_id and faults.failing_hosts(j)),
        key=lambda j: (-j.priority, j.submitted_at, j.pk),
    )  # fmt: skip
    for job in degraded:
        policy = job.effective_on_fault
        plan = faults.plan_replacement(job, st.loc, st.unusable, st.inv, taken)
        head = f"{_label(job)} is degraded ({plan.causes}); its on_fault is {policy}"
        where = {
            h: st.loc.domains[s.unit].name
            for h in plan.failed
            if (s := st.loc.hosts.get(h)) and s.unit in st.loc.domains
        }
        swaps = "; ".join(
            f"{h} by {p}" + (f" in {where[h]}" if h in where else "") for h, p in sorted(plan.picks.items())
        )  # fmt: skip
        details = {
            "on_fault": policy, "failed": plan.failed, "picks": plan.picks, "placement": plan.placement,
            "new": plan.new, "causes": [f.get("code") for f in job.faults or ()], "summary": plan.causes, "allocation": job.allocation_id,
        }  # fmt: skip
        if policy == OnFault.REQUEUE:
            a = Action(REQUEUE, job.pk, f"{head}: release its GPUs and queue it again with its submit time and "
                       "priority", True, before=dict(plan.placement), details=details)  # fmt: skip
        elif plan.ok:
            if policy == OnFault.REPLACE:
                reason = f"{head}: replace {swaps}"
            else:
                reason = (f"{head} (it keeps running degraded); admin option: replace {swaps} "
                          f"(POST /api/scheduler/jobs/{job.pk}/replace/)")  # fmt: skip
                details["apply"] = f"/api/scheduler/jobs/{job.pk}/replace/"
            a = Action(REPLACE, job.pk, reason, policy == OnFault.REPLACE, placed=dict(plan.new),
                       before=dict(plan.placement), details=details)  # fmt: skip
            key = st.key(job)
            for h, p in plan.picks.items():
                _take(st.inv, {p: plan.placement[h]}, key)
        elif policy == OnFault.REPLACE:
            a = Action(REQUEUE, job.pk, f"{head}, but {plan.why}: requeue it, as the scheduler does", True,
                       before=dict(plan.placement), details=details)  # fmt: skip
        else:
            a = Action(REQUEUE, job.pk, f"{head} (it keeps running degraded); {plan.why}; admin option: "
                       "requeue it", False, before=dict(plan.placement), details=details)  # fmt: skip
        if not a.execute:
            a.label = f"{a.kind} (admin option)"
        st.touched.add(job.pk)
        out.append(a)
    return out


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


def _guarantee(st: _State, job: Job, pool: Pool) -> tuple[int, int, str] | None:
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


def _may_take(st: _State, job: Job, pool: Pool, h: HeldJob) -> bool:
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


def _plan_reclaims(st: _State) -> list[Action]:
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
        f"{_label(st.jobs[v])} in pool {st.jobs[v].pool.name}"
        if st.jobs[v].tenant_id == job.tenant_id
        else "a job of another tenant"
        for v in victims
    )
    jobs = f"{len(victims)} preemptible job{'s' if len(victims) != 1 else ''}"
    return (
        f"pool {pool.name} holds {held} of the {guaranteed} {unit} guaranteed to it and {_label(job)} "
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


def _reclaim_gpus(st: _State, job: Job, pool: Pool, req, share) -> Action | None:
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
        _give(st.inv, h)
        n = sum(k for _, _, k in h.gpus)
        st.used[h.pool_id] = st.used.get(h.pool_id, 0) - n
        taken += n
    d = pre.decision
    gpus = _take(st.inv, d.placed, key)
    st.used[pool.pk] = used + job.count
    st.held[job.pk] = HeldJob(job.pk, job.tenant_id, pool.pk, job.priority, job.preemptible, 0.0, gpus)
    st.touched.update([job.pk, *victims])
    reason = _reclaim_reason(
        job, pool, share, str(job.count), f"{taken} borrowed GPU{'s' if taken != 1 else ''}", victims, st
    )
    return _reclaim_action(
        job, pool, share, reason, d, victims, st, guaranteed_gpus=pool.guaranteed_gpus, held_gpus=used
    )


def _fewest(st: _State, req, cands: list[_Cand], free_after, enough) -> tuple[list[int], Any] | None:
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


def _reclaim_slices(st: _State, job: Job, pool: Pool, req, share) -> Action | None:
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


def _reclaim_share(st: _State, job: Job, pool: Pool, req, share) -> Action | None:
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


def _unit_free(st: _State, key: str) -> int:
    return sum(sum(st.inv.gpus.get(h, {}).values()) for h in st.loc.domains[key].hosts)


def _whole_free(st: _State, key: str) -> bool:
    dom = st.loc.domains[key]
    cap = st.loc.capacity(key)
    return cap > 0 and not any(h in st.unusable for h in dom.hosts) and _unit_free(st, key) == cap


def _plan_moves(st: _State) -> list[Action]:
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
            old_tier = st.loc.span(_per_host(st.held[j.pk]))[0]
            if not d.ok or d.tier is None or d.tier > old_tier:
                ok = False
                break
            plans.append((j, d, _take(st.inv, d.placed, key)))
        if not ok:
            for _, _, gpus in plans:
                _give(st.inv, HeldJob(0, 0, 0, 0, False, 0.0, gpus))
            continue
        if execute:  # moved: their old GPUs are free (a proposal keeps them, and holds its targets)
            for h in olds:
                _give(st.inv, h)
        why = (
            f"frees {unit.name} whole ({cap} GPUs): whole free units {len(whole_before)} → {len(whole_before) + 1}"
            + ("" if execute else " (proposed: " + (
                "a job of the set is not preemptible" if not all(j.preemptible for j in jobs)
                else "no job is pending for fragmentation") + ")")
        )  # fmt: skip
        for j, d, gpus in plans:
            before = _per_host(st.held[j.pk])
            out.append(
                Action(
                    MOVE, j.pk, f"{_label(j)} moves from {_hosts_text(before)} to {_hosts_text(d.placed)}: {why}",
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


def _plan_congested(st: _State) -> list[Action]:
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
        before = _per_host(h)
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
        _give(st.inv, h)
        try:
            d = place(st.loc, FreeState(gpus=st.inv.gpu_view(key), unusable=blocked), req, st.cong)
        finally:
            _take_back(st.inv, h)
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
            f"{_label(job)} on {_hosts_text(before)} {' and '.join(why)}; a placement on "
            f"{_hosts_text(d.placed)} within one {TIER_NAMES[d.tier]} avoids them (reported, not moved)"
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


# --- running --------------------------------------------------------------------------------------


def run_rebalance(dry_run: bool = True, user=None, *, now: datetime | None = None) -> dict[str, Any]:
    """Plan (:func:`plan_rebalance`) and, unless ``dry_run``, execute. Returns ``{"dry_run",
    "actions": [Action.as_dict() + "outcome"], "counts": {kind: n}}``; ``outcome`` is ``would
    execute`` / ``proposed`` / ``reported`` in a dry run, and ``done`` / ``refused: …`` /
    ``proposed`` / ``reported`` in a real one. A real run holds the pass lock; when a pass (or
    another run) holds it, nothing is done and ``{"skipped": …}`` is returned. A dry run reads
    only and takes no lock."""
    now = now or timezone.now()
    if dry_run:
        actions = plan_rebalance(now)
        return _result(True, actions, ["would execute" if a.execute else _passive(a) for a in actions])
    with single_instance(PASS_LOCK, PASS_LIMIT_S) as mine:
        if not mine:
            return {
                "dry_run": False,
                "skipped": "a scheduling pass or rebalancing run is running",
                "actions": [],
            }
        actions = plan_rebalance(now)
        loc = state.current_locality()
        outcomes = [_execute(a, loc, now, user) for a in actions]
    return _result(False, actions, outcomes)


def reclaim_for_guarantees(now: datetime, user=None) -> list[dict[str, Any]]:
    """Plan and take only the ``reclaim`` actions (module docstring), for a caller that holds the
    pass lock: a scheduling pass, after binding its own plan, so that a pool's guarantee is
    served at once rather than at the next rebalancing run. Returns the actions' dicts with
    their ``outcome``."""
    st = _load(now)
    return [a.as_dict() | {"outcome": _execute(a, st.loc, now, user)} for a in _plan_reclaims(st)]


def _passive(a: Action) -> str:
    return "reported" if a.kind == CONGESTED else "proposed"


def _result(dry_run: bool, actions: list[Action], outcomes: list[str]) -> dict[str, Any]:
    counts: dict[str, int] = defaultdict(int)
    for a in actions:
        counts[a.kind] += 1
    return {
        "dry_run": dry_run,
        "actions": [a.as_dict() | {"outcome": o} for a, o in zip(actions, outcomes, strict=True)],
        "counts": dict(counts),
    }


def _execute(a: Action, loc, now: datetime, user) -> str:
    try:
        if not a.execute:
            _note(a, now)
            return _passive(a)
        if a.kind == RECLAIM:
            return _reclaim(a, loc, now, user)
        if a.kind == REPLACE:
            return _replace(a, loc, now, user)
        if a.kind == REQUEUE:
            ok = faults.requeue_degraded(a.job_id, now, f"fabric fault (rebalance): {a.reason}"[:300])
            return "done" if ok else "refused: the job is no longer degraded"
        return _move(a, loc, now, user)
    except Exception:  # one action's failure must not stop the others; the next run plans again
        log.exception("rebalance action %s of job %s failed", a.kind, a.job_id)
        return "refused: internal error (logged)"


def _reclaim(a: Action, loc, now: datetime, user) -> str:
    decision = dict(a.details["decision"])
    out = Outcome(a.job_id, 0, PLACED, [a.reason, *decision.get("reasons", [])], decision)
    out.placed, out.victims = dict(a.placed), list(a.victims)
    if a.details.get("gpu") is not None:  # a fraction: on the GPU its victims made room on
        out.gpu_ids = [a.details["gpu"]]
    unit = a.details.get("unit", "GPUs")

    def recorded(job: Job) -> None:
        job_event(job, "job.reclaimed", f"{job}: placed on reclaimed {unit} ({a.reason})", now,
               {"victims": a.victims, "hosts": sorted(a.placed), "kind": job.kind,
                "reason": a.reason})  # fmt: skip
        audit.record(
            "job.reclaim", job, {"victims": a.victims, "placement": a.placed, "reason": a.reason}, user=user
        )

    refused = bind_job(
        out, loc, now,
        victim_reason=lambda job, victim: (
            f"reclaimed for {seen_by(job, victim)}: "
            + (f"pool {job.pool.name}'s" if job.tenant_id == victim.tenant_id else "its pool's")
            + f" guaranteed {unit}"
        ),
        source=_SOURCE, user=user, also=recorded,
    )  # fmt: skip
    return "done" if refused is None else f"refused: {' '.join(refused[1])}"


def _replace(a: Action, loc, now: datetime, user) -> str:
    """A degraded job's replacement, through the scheduler's own (``faults.replace_hosts``)."""
    d = a.details
    plan = faults.Replacement(a.job_id, d["failed"], d["picks"], d["placement"], d["new"], "",
                              d.get("summary", ""))  # fmt: skip
    try:
        faults.replace_hosts(plan, loc, now, user=user, source=_SOURCE)
    except JobError as exc:
        return f"refused: {exc}"
    except AllocationError as exc:
        return f"refused: the pools refused the replacement ({exc})"
    except Job.DoesNotExist:
        return "refused: the job is gone"
    return "done"


def _move(a: Action, loc, now: datetime, user) -> str:
    try:
        move(
            a.job_id, a.placed, loc, expected_allocation=a.details.get("allocation"), expected_placement=a.before,
            reason=a.reason, details={**a.details["decision"], "frees": a.frees}, user=user, now=now,
        )  # fmt: skip
    except JobError as exc:
        return f"refused: {exc}"
    except AllocationError as exc:
        return f"refused: the pools refused the move ({exc})"
    except Job.DoesNotExist:
        return "refused: the job is gone"
    return "done"


def _note(a: Action, now: datetime) -> None:
    """A proposal's or report's event, once per job and target since the job was placed (a
    proposed requeue has none: the job's ``job.degraded`` event already says why)."""
    if a.kind == REQUEUE:
        return
    code = "job.congested" if a.kind == CONGESTED else "job.move_proposed"
    with transaction.atomic():
        job = Job.objects.select_related("pool", "tenant").filter(pk=a.job_id, state__in=HOLDING).first()
        if job is None:
            return
        seen = Event.objects.filter(code=code, object_type="job", object_key=str(job.pk))
        if job.placed_at is not None:
            seen = seen.filter(at__gte=job.placed_at)
        if any((d or {}).get("to") == a.placed for d in seen.values_list("details", flat=True)):
            return
        job_event(
            job, code, f"{job}: {a.reason}", now, {"from": a.before, "to": a.placed, "reason": a.reason}
        )


__all__ = [
    "CONGESTED",
    "MOVE",
    "RECLAIM",
    "REPLACE",
    "REQUEUE",
    "Action",
    "plan_rebalance",
    "reclaim_for_guarantees",
    "run_rebalance",
]
