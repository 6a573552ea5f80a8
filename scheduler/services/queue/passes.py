"""The scheduling pass: :func:`run_pass` (one at a time under the pass lock, ``core.locks``; a pass
asked for while one runs leaves a mark and the running pass goes round again) loads the queue and
the free state (``scheduler.services.state``, :func:`pass_inputs`), plans it
(``scheduler.planner.plan_pass``), binds the plan in plan order through the binder (runs of plain
whole-GPU placements in bulk, up to :data:`BIND_BATCH` per transaction; the others one transaction
each), records every pending job's decision and reservation in one transaction, and ends with the
rebalancer's reclaim when a pending job fits in its pool's guarantee (handed over at start:
:func:`set_reclaimer`; the fault service's replacements begin it: :func:`set_replacer`).
:func:`queue_order` is the order the next pass considers the pending jobs in (:func:`queued_job`:
the planner's view of one).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import F, Max
from django.utils import timezone

from core.bulk import create_objects, update_rows
from core.locks import single_instance
from pools.choices import AllocationState
from pools.models import Allocation

from ...choices import JobKind, JobState, PendingCode, TopologyMode
from ...models import Job, JobDecision
from ...planner import Outcome, QueuedJob, fair_order, plan_pass
from .. import state
from .binder import batchable, bind_job, bind_many, decision_dict
from .lifecycle import expire_time_limits
from .records import trim_decisions

log = logging.getLogger(__name__)

#: the pass lock's key (``core.locks``) and the cache key of "another pass was asked for"
PASS_LOCK = "scheduler.pass"
PASS_WANTED = "weft:scheduler:pass-wanted"
#: a pass stops renewing its lock after this (seconds): a wedged pass cannot block forever
PASS_LIMIT_S = 600
#: passes run back to back at most, when more were asked for while one ran
MAX_ROUNDS = 3
#: placements bound per transaction in bulk (``bind_many``): bounds how long a pass holds the
#: pools' rows (other allocations wait for them)
BIND_BATCH = 250


def queued_job(job: Job) -> QueuedJob:
    """The planner's view of a pending job (with the start of the reservation the last pass gave
    it: the planner counts its quota then, ``scheduler.planner`` step 6)."""
    return QueuedJob(
        job_id=job.pk, tenant_id=job.tenant_id, pool_id=job.pool_id, priority=job.priority, kind=job.kind,
        count=job.count, gpu_model=(job.gpu_model or "").lower(), mig_profile=job.mig_profile,
        memory_mib=job.memory_mib, compute_pct=job.compute_pct, gpus_per_host=job.gpus_per_host,
        segments=(job.segments, job.segment_hosts, job.segment_tier) if job.segments else None,
        tier=job.tier, tier_required=job.tier_mode == TopologyMode.REQUIRED,
        time_limit_s=float(job.time_limit_s or settings.WEFT_SCHEDULER_DEFAULT_TIME_LIMIT_S),
        submitted=job.submitted_at.timestamp(),
        reserved_start=job.reserved_start.timestamp() if job.reserved_start else None,
    )  # fmt: skip


def queue_order(now: datetime | None = None) -> list[Job]:
    """Pending jobs in the order the next pass considers them (``scheduler.planner.fair_order``)."""
    now = now or timezone.now()
    jobs = {
        j.pk: j for j in Job.objects.filter(state=JobState.PENDING).select_related("pool", "tenant", "owner")
    }
    order = fair_order([queued_job(j) for j in jobs.values()], state.fair_shares(now))
    return [jobs[q.job_id] for q in order]


def pass_inputs(
    loc, pending: list[Job], now: datetime, *, more_pools=(), more_fraction_pools=()
) -> dict[str, Any]:
    """What ``plan_pass`` reads besides the queue and the inventory, for the ``pending`` jobs (and
    the pools ``more_pools``; ``more_fraction_pools``: where a fraction is asked too):
    ``{"pools": {id: PoolInfo}, "held", "shares", "unusable", "congestion", "now": epoch s}``
    (``scheduler.services.state``). A pass and the dry run (``scheduler.services.whatif``) read
    the same."""
    fractions = {j.pool_id for j in pending if j.kind == JobKind.FRACTION} | set(more_fraction_pools)
    return dict(
        pools=state.pool_infos({j.pool_id for j in pending} | set(more_pools), fractions),
        held=state.held_jobs(loc), shares=state.fair_shares(now), unusable=state.unusable_hosts(loc),
        congestion=state.congestion_marks(loc), now=now.timestamp(),
    )  # fmt: skip


def request_pass() -> None:
    """Ask for a pass while one may be running: the running pass goes round again."""
    try:
        cache.set(PASS_WANTED, 1, timeout=PASS_LIMIT_S)
    except Exception as exc:  # the cache is down: the periodic pass catches up
        log.warning("could not mark a pass as wanted: %s", exc)


def _take_wanted() -> bool:
    try:
        return bool(cache.delete(PASS_WANTED))
    except Exception:
        return False


def run_pass(*, now: datetime | None = None) -> dict[str, Any]:
    """One scheduling pass (module docstring), unless one is running (then it asks that one to
    go round again and returns ``{"skipped": …}``). Returns a summary: ``pending`` (jobs
    considered), ``placed``, ``preempted``, ``backfilled``, pending counts per code,
    ``expired`` (time limits), ``bind_failed``, ``engine_calls``, seconds spent loading the
    state (``load_s``), planning (``plan_s``), binding (``bind_s``), writing the pending
    decisions (``write_s``) and in all (``duration_s``), ``reclaimed`` (jobs placed on GPUs reclaimed
    for their pool's guarantee), and ``rounds``."""
    with single_instance(PASS_LOCK, PASS_LIMIT_S) as mine:
        if not mine:
            request_pass()
            return {"skipped": "a scheduling pass is already running"}
        summary: dict[str, Any] = {}
        for rounds in range(1, MAX_ROUNDS + 1):
            _take_wanted()
            summary = _one_pass(now)
            summary["rounds"] = rounds
            if now is not None or not _take_wanted():
                break
        return summary


def _no_reclaim(now: datetime) -> list[dict]:
    return []


#: the pass's reclaim step: ``scheduler.services.rebalance.reclaim_for_guarantees`` (one dict per
#: action, ``outcome`` ``done`` when it bound), set by ``SchedulerConfig.ready`` (:func:`set_reclaimer`)
_reclaimer: Callable[[datetime], list[dict]] = _no_reclaim


def set_reclaimer(reclaim: Callable[[datetime], list[dict]]) -> None:
    """Make every pass end with ``reclaim(now)`` when a pending job may reclaim borrowed GPUs. The
    rebalancer imports this module (it binds and moves jobs through the queue, the one writer of
    jobs), so it is handed over at start instead of imported here."""
    global _reclaimer
    _reclaimer = reclaim


def _no_replace(now: datetime) -> dict[str, int]:
    return {"replaced": 0, "requeued": 0}


#: a pass's first step: degraded jobs with ``on_fault=replace`` get healthy hosts
#: (``scheduler.services.faults.replace_faulted``), set by ``SchedulerConfig.ready``
_replacer: Callable[[datetime], dict[str, int]] = _no_replace


def set_replacer(replace: Callable[[datetime], dict[str, int]]) -> None:
    """Make every pass begin with ``replace(now)`` (the fault service imports this module, the
    one writer of jobs, so it is handed over at start instead of imported here)."""
    global _replacer
    _replacer = replace


def _one_pass(now: datetime | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    now = now or timezone.now()
    expired = expire_time_limits(now)
    replaced = _replacer(now)  # before the free state is read: a host goes to one of them
    pending = list(Job.objects.filter(state=JobState.PENDING).select_related("pool", "tenant").order_by("pk"))
    if not pending:
        Job.objects.filter(reserved_start__isnull=False).update(reserved_start=None, reserved_hosts=[])
        return {
            "pending": 0,
            "placed": 0,
            "expired": expired,
            **replaced,
            "duration_s": round(time.perf_counter() - t0, 4),
        }
    loc = state.current_locality()
    inputs = pass_inputs(loc, pending, now)
    inv = state.load_inventory(loc, {j.kind for j in pending})
    t1 = time.perf_counter()
    plan = plan_pass(loc, inv, [queued_job(j) for j in pending], **inputs)
    t2 = time.perf_counter()
    jobs = {j.pk: j for j in pending}
    pending_out: list[Outcome] = []
    failed = 0
    batch: list[Outcome] = []

    def refuse(out: Outcome, refused: tuple[str, list[str]]) -> None:
        nonlocal failed
        failed += 1
        out.code, out.reasons = str(refused[0]), refused[1] + out.reasons
        out.placed, out.victims, out.backfilled = {}, [], False
        pending_out.append(out)

    def flush() -> None:
        refused = bind_many(batch, loc, now) if batch else {}
        for out in batch:
            if out.job_id in refused:
                refuse(out, refused[out.job_id])
        batch.clear()

    for out in plan.outcomes:  # in plan order: a job may use GPUs an earlier preemption freed
        if not out.ok:
            pending_out.append(out)
            continue
        if batchable(out, jobs[out.job_id]):
            batch.append(out)
            if len(batch) >= BIND_BATCH:
                flush()
            continue
        flush()
        refused = bind_job(out, loc, now)
        if refused is not None:
            refuse(out, refused)
    flush()
    t3 = time.perf_counter()
    _write_pending(pending_out, jobs, plan, now, placed=[o.job_id for o in plan.outcomes if o.ok])
    reclaimed = 0
    infos = inputs["pools"]
    if (
        any(_may_reclaim(jobs[o.job_id], infos) for o in pending_out if o.code in _RECLAIMABLE)
        and Allocation.objects.filter(state=AllocationState.ACTIVE, borrowed=True).exists()
    ):
        reclaimed = sum(a["outcome"] == "done" for a in _reclaimer(now))
    t4 = time.perf_counter()
    summary = {
        "pending": len(pending),
        "expired": expired,
        "bind_failed": failed,
        "placed": 0,
        **plan.summary(),
        "reclaimed": reclaimed,
        **replaced,
    }
    summary["engine_calls"] = plan.engine_calls
    summary |= {
        "load_s": t1 - t0,
        "plan_s": t2 - t1,
        "bind_s": t3 - t2,
        "write_s": t4 - t3,
        "duration_s": t4 - t0,
    }
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in summary.items()}


#: pending codes for which a job within its pool's guarantee may reclaim borrowed GPUs
_RECLAIMABLE = (PendingCode.CAPACITY, PendingCode.FRAGMENTATION, PendingCode.CONGESTION)


def _may_reclaim(job: Job, infos) -> bool:
    """Cheap first check (the rebalancer checks exactly): a job that fits in its pool's
    guaranteed share on top of what the pool held before the pass — whole GPUs and a fraction
    (one GPU more) against ``guaranteed_gpus``, MIG slices against ``guaranteed_slices``."""
    info = infos.get(job.pool_id)
    if job.kind == JobKind.MIG:
        used = info.used_slices if info is not None else 0
        return bool(job.pool.guaranteed_slices) and used + job.count <= job.pool.guaranteed_slices
    used = info.used_gpus if info is not None else 0
    more = job.count if job.kind == JobKind.GPU else 1
    return bool(job.pool.guaranteed_gpus) and used + more <= job.pool.guaranteed_gpus


def _write_pending(outs: list[Outcome], jobs: dict[int, Job], plan, now: datetime, placed=()) -> None:
    """Record the pass's pending decisions in one transaction: changed ones on the job and as a
    new history row, unchanged ones bump their history row; the head's reservation; and cap the
    history of the jobs it placed."""
    head = plan.reservation.job_id if plan.reservation is not None else None
    if not outs and not placed:
        Job.objects.filter(reserved_start__isnull=False).update(reserved_start=None, reserved_hosts=[])
        return
    with transaction.atomic():
        changed, same = [], []
        for out in outs:
            job = jobs[out.job_id]
            d = decision_dict(out)
            res = out.reservation
            reserved = (datetime.fromtimestamp(res.start, tz=UTC), sorted(res.hosts)) if res else (None, [])
            if (
                job.pending_code == out.code
                and (job.decision or {}).get("reasons") == d["reasons"]
                and (job.reserved_start, job.reserved_hosts) == reserved
            ):
                same.append(job.pk)
                continue
            job.pending_code, job.reason, job.decision, job.decided_at = (
                out.code,
                d["reasons"][0][:300] if d["reasons"] else "",
                d,
                now,
            )
            job.reserved_start, job.reserved_hosts = reserved
            changed.append(job)
        still = set(
            Job.objects.select_for_update(of=("self",))
            .filter(pk__any=sorted([j.pk for j in changed] + same), state=JobState.PENDING)
            .order_by("pk")
            .values_list("pk", flat=True)
        )  # a job cancelled or placed meanwhile keeps what its writer wrote
        changed = [j for j in changed if j.pk in still]
        same = [pk for pk in same if pk in still]
        update_rows(
            Job,
            ["pending_code", "reason", "decision", "decided_at", "reserved_start", "reserved_hosts"],
            [(j.pk, j.pending_code, j.reason, j.decision, j.decided_at, j.reserved_start, j.reserved_hosts)
             for j in changed],
        )  # fmt: skip
        create_objects(
            [
                JobDecision(job_id=j.pk, at=now, last_at=now, code=j.pending_code, reasons=j.decision["reasons"],
                            details={k: v for k, v in j.decision.items() if k != "reasons"})
                for j in changed
            ],
        )  # fmt: skip
        if changed or placed:
            trim_decisions([j.pk for j in changed] + list(placed))
        if same:
            last = (
                JobDecision.objects.filter(job_id__any=same)
                .values("job_id")
                .annotate(m=Max("id"))
                .values_list("m", flat=True)
            )
            JobDecision.objects.filter(pk__any=list(last)).update(count=F("count") + 1, last_at=now)
            Job.objects.filter(pk__any=same).update(decided_at=now)
        stale = Job.objects.filter(reserved_start__isnull=False)
        if head is not None:
            stale = stale.exclude(pk=head)
        stale.update(reserved_start=None, reserved_hosts=[])
