"""The end of a job, in the caller's transaction (the caller holds the job row and its pool's row):
:func:`end_job` (the state machine's check, its allocation released through
``pools.services.allocation.release``, its own partition closed, final state, history, event, audit,
signal on commit) and :func:`requeue_job` (a preempted job with ``Job.requeue`` back to pending with
its submit time and priority: events ``job.preempted`` and ``job.requeued``, audit ``job.requeue``).
:func:`close_partition` deletes a job's own partition (per-job isolation; OpenSM applies on commit).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from accounts import audit
from pools.services.allocation import NotHolding, release
from pools.services.partitions import close_job_partition

from ...choices import HOLDING, TRANSITIONS, JobState
from ...models import Job
from .records import job_event, record_decision, send_changed
from .spec import JobConflict


def _check_transition(job: Job, to: str) -> None:
    if to not in TRANSITIONS.get(job.state, ()):
        raise JobConflict(f"job {job.pk} is {job.state}: it cannot become {to}", state=job.state)


def _release_held(job: Job, to: str, reason: str, now: datetime, user) -> int | None:
    """Release the allocation of a locked placed/running job (None when the pools ended it
    already: reclaimed, expired); returns its id when this released it."""
    if job.allocation_id and job.state in HOLDING:
        try:
            release(job.allocation_id, user=user, reason=f"{job.reference} {to}: {reason}"[:200], now=now)
            return job.allocation_id
        except NotHolding:  # the pools ended it already (reclaimed, expired)
            pass
    return None


def close_partition(job: Job, user) -> dict[str, Any]:
    """Delete a locked job's own partition (per-job isolation) with its GPUs, in the caller's
    transaction (OpenSM applies on commit); ``job.partition`` becomes None (the caller saves it,
    ``pkey`` stays for the record). Returns the details for its history, event and audit entry
    (``{"removed_pkey": "0x6001"}``; empty without a partition)."""
    if not job.partition_id:
        return {}
    close_job_partition(job.partition_id, user=user)
    job.partition = None
    return {"removed_pkey": f"0x{job.pkey:04x}" if job.pkey is not None else None}


def end_job(
    job: Job, to: str, reason: str, now: datetime, user, source: str, more: dict | None = None
) -> None:
    """End a locked job: release its allocation (if it still holds one) and delete its own
    partition (if it has one), final state, history, event, audit, signal on commit. The caller
    holds the job row (and its pool row). ``more``: extra details for the history, event and
    audit entry. A job with ``requeue`` that is preempted goes back to pending instead
    (:func:`requeue_job`)."""
    _check_transition(job, to)
    if to == JobState.PREEMPTED and job.requeue:
        requeue_job(job, reason, now, user, source)
        return
    previous = job.state
    released = _release_held(job, to, reason, now, user)
    isolation = close_partition(job, user)
    job.state, job.ended_at, job.reason, job.pending_code = to, now, reason[:300], ""
    job.reserved_start, job.reserved_hosts, job.partition = None, [], None
    job.save(
        update_fields=["state", "ended_at", "reason", "pending_code", "reserved_start", "reserved_hosts",
                       "partition"]
    )  # fmt: skip
    more = more or {}
    record_decision(job, to, [reason], {"released_allocation": released, **isolation, **more}, now)
    job_event(
        job,
        f"job.{to}",
        f"{job}: {to} ({reason})",
        now,
        {"reason": reason, "allocation": released, **isolation, **more},
    )
    verb = {"cancelled": "cancel", "completed": "complete", "failed": "fail", "preempted": "preempt",
            "timeout": "timeout"}[to]  # fmt: skip
    audit.record(
        f"job.{verb}",
        job,
        {"state": [previous, to], "reason": reason, "released_allocation": released, **isolation, **more},
        user=user,
    )
    send_changed(job, previous, source)


def requeue_job(job: Job, reason: str, now: datetime, user, source: str) -> None:
    """A locked placed/running job with ``requeue`` lost its GPUs (``reason``: to whom): release
    its allocation, back to pending with its submit time and priority (its place in the queue),
    ``preemptions`` + 1; history, a ``job.preempted`` and a ``job.requeued`` event, audit
    (``job.requeue``), signal on commit (the pass that follows places it again)."""
    previous = job.state
    released = _release_held(job, JobState.PREEMPTED, reason, now, user)
    isolation = close_partition(job, user)  # placed again: a partition of its new hosts then
    why = f"requeued: {reason}"[:300]
    job.state, job.reason, job.pending_code, job.preemptions = JobState.PENDING, why, "", job.preemptions + 1
    job.placed_at = job.started_at = None
    job.placement, job.reserved_start, job.reserved_hosts = {}, None, []  # ``allocation``: the ended one
    job.decision, job.decided_at = (
        {"code": "requeued", "reasons": [why], "released_allocation": released},
        now,
    )
    job.save(update_fields=["state", "reason", "pending_code", "preemptions", "placed_at", "started_at",
                            "placement", "reserved_start", "reserved_hosts", "decision",
                            "decided_at", "partition"])  # fmt: skip
    record_decision(
        job, "requeued", [why], {"released_allocation": released, "from": previous, **isolation}, now
    )
    details = {"reason": reason, "allocation": released, "requeued": True, "preemptions": job.preemptions,
               **isolation}  # fmt: skip
    job_event(job, "job.preempted", f"{job}: preempted ({reason})", now, details)
    job_event(
        job, "job.requeued",
        # what happened and what happens next, for the tenant's mail (issue 26 §4: it said neither)
        f"{job}: requeued: {reason}. Its GPUs were released and it is pending again in pool {job.pool.name} "
        f"with its submit time ({job.submitted_at:%Y-%m-%d %H:%M:%S} UTC) and {job.priority_class} priority "
        f"kept, so it goes before later jobs: the scheduler places it again as soon as {job.count} GPUs fit "
        f"in its quota and on healthy hosts, and its runner starts it there (from its last checkpoint). "
        f"Requeued or preempted {job.preemptions} time{'s' if job.preemptions != 1 else ''}; its page shows "
        "where it waits.",
        now, details,
    )  # fmt: skip
    audit.record(
        "job.requeue",
        job,
        {"state": [previous, JobState.PENDING], "reason": reason, "released_allocation": released,
         "preemptions": job.preemptions},
        user=user,
    )  # fmt: skip
    send_changed(job, previous, source)
