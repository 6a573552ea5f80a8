"""A job's life after its placement, each use case one transaction that locks what it changes:
:func:`cancel`, :func:`start`, :func:`finish` (the state machine of ``scheduler.choices``; a refused
transition is :class:`~.spec.JobConflict`), :func:`allocation_lost` (the pools ended a job's
allocation themselves: preempted), :func:`expire_time_limits` (a running job past ``time_limit_s``
ends ``timeout``; run at the start of every pass), :func:`end_previous_run` (a restarted demo's jobs
end ``failed``), and :func:`sync_job_partitions` (after a discovery, job partitions get their hosts'
current CA ports).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from accounts import audit
from fabric.models import Fabric
from pools.services.partitions import sync_allocation_partition

from ...choices import HOLDING, RUNNING_STATES, JobState
from ...models import Job
from .ends import end_job
from .records import job_event, lock_pools, locked, record_decision, send_changed
from .spec import JobConflict


def cancel(job_id: int, *, user=None, reason: str = "", now: datetime | None = None) -> Job:
    """Cancel a pending, placed or running job (its GPUs are released). Raises
    :class:`JobConflict` for an ended job, ``Job.DoesNotExist``."""
    now = now or timezone.now()
    with transaction.atomic():
        job = locked(job_id)
        end_job(job, JobState.CANCELLED, reason or "cancelled", now, user, "cancel")
    return job


def start(job_id: int, *, user=None, now: datetime | None = None) -> Job:
    """A placed job is running (its prolog, or an Operator, says so). Raises :class:`JobConflict`."""
    now = now or timezone.now()
    with transaction.atomic():
        job = locked(job_id)
        if job.state != JobState.PLACED:  # (degraded → running is the fault service's)
            raise JobConflict(f"job {job.pk} is {job.state}: it cannot become running", state=job.state)
        job.state, job.started_at, job.reason = JobState.RUNNING, now, ""
        job.save(update_fields=["state", "started_at", "reason"])
        record_decision(job, JobState.RUNNING, ["started"], {}, now)
        job_event(job, "job.started", f"{job}: running on {len(job.placement)} hosts", now)
        audit.record("job.start", job, {"state": [JobState.PLACED, JobState.RUNNING]}, user=user)
        send_changed(job, JobState.PLACED, "start")
    return job


def finish(job_id: int, *, ok: bool = True, reason: str = "", user=None, now: datetime | None = None) -> Job:
    """A placed or running job ended: ``completed`` (``ok``) or ``failed``; its GPUs are
    released. Raises :class:`JobConflict`, ``Job.DoesNotExist``."""
    now = now or timezone.now()
    with transaction.atomic():
        job = locked(job_id)
        to = JobState.COMPLETED if ok else JobState.FAILED
        end_job(job, to, reason or ("completed" if ok else "failed"), now, user, "finish")
    return job


def allocation_lost(allocation_id: int, allocation_state: str, *, now: datetime | None = None) -> Job | None:
    """The pools ended the allocation of a placed or running job themselves (``reclaimed`` for
    another pool's guarantee, ``expired``, released through the pools API): the job is
    ``preempted`` with that reason. No-op (None) when no holding job owns it."""
    now = now or timezone.now()
    with transaction.atomic():
        job = (
            Job.objects.select_for_update(of=("self",))
            .select_related("pool", "tenant")
            .filter(allocation_id=allocation_id, state__in=HOLDING)
            .first()
        )
        if job is None:
            return None
        lock_pools([job.pool_id])
        end_job(
            job,
            JobState.PREEMPTED,
            f"its allocation {allocation_id} was {allocation_state} by the pools",
            now,
            None,
            "pools",
        )
    return job


def sync_job_partitions(fabric_id: int) -> int:
    """After a discovery of fabric ``fabric_id`` (a host's HCA replaced: new port GUIDs; a port
    gone or back): recompute the members of the partition of every job holding GPUs with its own
    partition on that fabric, through the pools' partitions service
    (``pools.services.partitions.sync_allocation_partition``, the writer of job partition
    members, as ``sync_fabric_pools`` is for pools' after the same discovery). Each job in its
    own transaction, its row locked first (the queue's lock order: job, then partition) and
    checked still holding that partition, so a job that ended or moved meanwhile is left alone.
    Returns how many jobs' members changed."""
    jobs = list(
        Job.objects.filter(state__in=HOLDING, partition__fabric_id=fabric_id, allocation__isnull=False)
        .order_by("pk")
        .values_list("pk", "partition_id", "allocation_id")
    )
    changed = 0
    for job_id, partition_id, allocation_id in jobs:
        with transaction.atomic():
            still = (
                Job.objects.select_for_update()
                .filter(pk=job_id, state__in=HOLDING, partition_id=partition_id, allocation_id=allocation_id)
                .exists()
            )
            if still and sync_allocation_partition(partition_id, allocation_id) is not None:
                changed += 1
    return changed


def expire_time_limits(now: datetime | None = None) -> int:
    """End every running job past its time limit as ``timeout`` (Slurm's ``TIMEOUT`` state: the
    limit counts from ``started_at``, the job's prolog report; a job without ``time_limit_s`` is
    never ended), each in its own transaction: its allocation released through the pools'
    allocation service (``end_job``), its own partition closed, a ``job.timeout`` event (details:
    ``limit_s``, ``started_at``, ``ran_s``), audit ``job.timeout``, and ``job_changed`` on commit
    (its runner sees the state; the freed GPUs queue a pass). Run at the start of every pass
    (:func:`run_pass`, also the beat's periodic pass). A job that ended or was requeued between
    the read and its lock is left alone. Returns how many jobs timed out."""
    now = now or timezone.now()
    n = 0
    overdue = (
        Job.objects.filter(state__in=RUNNING_STATES, time_limit_s__isnull=False, started_at__lt=now)
        .order_by("pk")
        .values_list("pk", "started_at", "time_limit_s")
    )
    for pk, started, limit in overdue:
        if started + timedelta(seconds=limit) > now:
            continue
        with transaction.atomic():
            job = locked(pk)
            if job.state not in RUNNING_STATES or job.started_at != started:
                continue
            ran = (now - started).total_seconds()
            end_job(
                job, JobState.TIMEOUT, f"time limit of {limit} s reached", now, None, "pass",
                {"limit_s": limit, "started_at": started.isoformat(), "ran_s": round(ran, 3)},
            )  # fmt: skip
            n += 1
    return n


def end_previous_run(fabric: Fabric, reason: str, *, now: datetime | None = None) -> list[int]:
    """End the jobs that hold GPUs (placed, running, degraded) in pools of ``fabric`` as ``failed``
    with ``reason``: for a fabric whose hosts are new (the demo restarted on an existing database
    with a new lab: the previous run's jobs cannot be running there). Each job in its own
    transaction through :func:`end_job` (allocation released, own partition closed, ``job.failed``
    event with ``reason``, audit, ``job_changed`` on commit); pending jobs stay queued. A job
    that ended between the read and its lock is left alone. Returns the ended jobs' ids."""
    now = now or timezone.now()
    ended: list[int] = []
    held = (
        Job.objects.filter(state__in=HOLDING, pool__fabric=fabric).order_by("pk").values_list("pk", flat=True)
    )
    for pk in held:
        with transaction.atomic():
            job = locked(pk)
            if job.state not in HOLDING:
                continue
            end_job(job, JobState.FAILED, reason, now, None, "restart", {"previous_run": True})
            ended.append(pk)
    return ended
