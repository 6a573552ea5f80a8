"""What every write of a job records, shared by the queue's use cases, the fault service
(``scheduler.services.faults``) and the rebalancer: the job's history rows (:func:`record_decision`,
capped by :func:`trim_decisions` at ``WEFT_SCHEDULER_DECISION_HISTORY`` per job), its ``job.*`` events
(:func:`job_event`, :func:`event_spec`; those in :data:`TENANT_MAIL_CODES` name the tenant's
contacts), ``scheduler.signals.job_changed`` on commit (:func:`send_changed`), and the row locks in
the queue's order (:func:`locked`: the job row, then its pool's row; :func:`lock_pools`: pool rows in
pk order). Each runs in the caller's transaction.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import transaction

from events.services import EventSpec, record_events
from fabric.models import Fabric
from pools.models import AllocationItem, Pool

from ...models import Job, JobDecision
from ...signals import job_changed


def fabric_for(job: Job) -> Fabric | None:
    """The fabric a job's events belong to: its pool's, else that of the GPUs it was given."""
    if job.pool.fabric_id:
        return Fabric(pk=job.pool.fabric_id)
    if job.allocation_id:
        fid = (
            AllocationItem.objects.filter(allocation_id=job.allocation_id)
            .values_list("gpu__host__fabric_id", flat=True)
            .first()
        )
        if fid is not None:
            return Fabric(pk=fid)
    return None


def event_spec(job: Job, code: str, message: str, details: dict | None = None) -> EventSpec:
    """A job event: keyed by the job, its tenant and pool in the details beside ``details``;
    those the tenant hears of (``faults.TENANT_MAIL_CODES``) name its contacts in ``notify``
    (the alarm engine mails them)."""
    notify = {"notify": job.tenant.contacts} if code in TENANT_MAIL_CODES and job.tenant.contacts else {}
    return EventSpec(
        code=code, object_type="job", object_key=str(job.pk), object_repr=f"{job} ({job.tenant.name})",
        message=message, details={"job": job.pk, "tenant": job.tenant_id, "pool": job.pool_id, **(details or {}),
                                  **notify},
        tenant_id=job.tenant_id,
    )  # fmt: skip


#: job event codes whose mail goes to the tenant's contacts too (``scheduler.services.faults``)
TENANT_MAIL_CODES = frozenset({"job.degraded", "job.requeued", "job.replaced", "job.failed"})


def seen_by(job: Job, other: Job) -> str:
    """``job`` as an event of ``other`` names it: itself when both are one tenant's, else
    "a job of another tenant" (issue 22: a preempted job's event named the other tenant's job)."""
    return str(job) if job.tenant_id == other.tenant_id else "a job of another tenant"


def job_event(job: Job, code: str, message: str, now: datetime, details: dict | None = None) -> None:
    record_events(fabric_for(job), [event_spec(job, code, message, details)], at=now)


def send_changed(job: Job, previous: str, source: str) -> None:
    payload = {"job_id": job.pk, "state": job.state, "previous": previous, "source": source}
    transaction.on_commit(lambda: job_changed.send(sender=Job, **payload))


def record_decision(
    job: Job, code: str, reasons: list[str], details: dict, now: datetime, *, trim: bool = True
) -> None:
    """A new history row for ``job`` (a state change: never a repeat of the last one), capped
    per job now, or by the caller later (``trim=False``: a pass trims its placements at its end)."""
    JobDecision.objects.create(job=job, at=now, last_at=now, code=code, reasons=reasons, details=details)
    if trim:
        trim_decisions([job.pk])


def trim_decisions(job_ids) -> None:
    cap = settings.WEFT_SCHEDULER_DECISION_HISTORY
    doomed, seen, n = [], None, 0
    for job_id, pk in (
        JobDecision.objects.filter(job_id__any=list(job_ids))
        .order_by("job_id", "-id")
        .values_list("job_id", "id")
    ):
        n = n + 1 if job_id == seen else 1
        seen = job_id
        if n > cap:
            doomed.append(pk)
    if doomed:
        JobDecision.objects.filter(pk__any=doomed).delete()


def lock_pools(pool_ids) -> None:
    list(
        Pool.objects.select_for_update().filter(pk__in=sorted(set(pool_ids))).order_by("pk").values_list("pk")
    )


def locked(job_id: int) -> Job:
    job = Job.objects.select_for_update(of=("self",)).select_related("pool", "tenant").get(pk=job_id)
    lock_pools([job.pool_id])
    return job
