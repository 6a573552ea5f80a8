"""Receivers of the scheduler app (connected in ``SchedulerConfig.ready()``; the signal it sends,
``job_changed``, is declared in ``scheduler/signals.py``).

Received here — each queues a scheduling pass (``scheduler.tasks.run_pass_task``) on commit:

* :data:`job_changed` from anything but a pass (a new job, or GPUs freed by a job's end);
* ``pools.signals.allocation_changed`` when an allocation outside the queue ends (GPUs freed).
  When the pools ended a placed or running job's allocation themselves (reclaimed, expired,
  released through the pools API), the job is marked preempted (``queue.allocation_lost``),
  whose own signal queues the pass;
* ``pools.signals.inventory_committed`` (GPUs appeared, became healthy or unhealthy);
* ``fabric.signals.discovery_committed`` (topology changed: the cached locality tree is dropped;
  a host whose links went down is no longer placed on); before the pass, the partitions of jobs
  holding GPUs on that fabric get their hosts' current CA ports (``queue.sync_job_partitions``,
  as ``pools.receivers`` does for pools' partitions; a failure is logged, never raised);
* ``events.signals.alarms_changed`` when an alarm that makes hosts unusable or domains congested
  opened or cleared (``link.down``, the counter rules' congestion and error alarms).

Fault evaluation (``scheduler.services.faults``, through ``scheduler.tasks.evaluate_faults_task``
on commit): ``alarms_changed`` with an alarm of a reason source's ``triggers`` opened or cleared
(``link.down``, ``node.removed``, ``port.congestion``, ``partition.drift``), every
``discovery_committed``, every ``fabric.signals.partitions_changed``, and ``job_changed`` of a job
that started. Every ``job_changed`` is pushed to ``ws/jobs/`` and, for a job with a webhook,
posted to its runner (``faults.announce``), before the pass it queues.

The job→links index (``scheduler.services.joblinks``, through ``refresh_job_links_task`` on
commit): ``routing.signals.routes_changed`` and ``discovery_committed`` (the jobs of that
fabric), every ``job_changed`` (that job); ``job_links_changed`` of a running job re-evaluates its
faults (its path causes follow its paths).

Also received (no pass): ``events.signals.prune_due`` (the daily prune) clears idempotency keys
past ``WEFT_IDEMPOTENCY_TTL_S`` (``queue.expire_idempotency_keys``).
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.dispatch import receiver

from core import realtime
from events.signals import alarms_changed, prune_due
from fabric.signals import discovery_committed, partitions_changed
from pools.signals import allocation_changed, inventory_committed
from routing.signals import routes_changed

from .choices import HOLDING, RUNNING_STATES
from .models import Job
from .services.faults import announce, trigger_codes
from .services.queue import allocation_lost, expire_idempotency_keys, sync_job_partitions
from .services.state import forget_locality
from .signals import job_changed, job_links_changed
from .tasks import evaluate_faults_task, refresh_job_links_task, run_pass_task

log = logging.getLogger(__name__)

#: alarm codes whose opening or clearing changes where jobs may go
PLACEMENT_ALARMS = {
    "link.down",
    "port.congestion",
    "port.symbol_errors",
    "port.rcv_errors",
    "port.link_downed",
}
_HOLDING_ENDS = {"released", "expired", "reclaimed"}


def queue_pass() -> None:
    """Queue a scheduling pass once the current transaction commits."""

    def send() -> None:
        try:
            run_pass_task.delay()
        except Exception:  # the broker may be down: the periodic pass catches up
            log.warning("could not queue a scheduling pass", exc_info=True)

    transaction.on_commit(send)


def _publish(job_id: int, state: str, previous: str, source: str, tenant: int | None) -> None:
    """Tell the job pages and the queue (``ws/jobs/``, ``scheduler.consumers``): best effort."""
    payload = {"job": job_id, "state": state, "previous": previous, "source": source, "tenant": tenant}
    for key in ("all", tenant):
        if key is not None:
            realtime.publish(realtime.group_name("jobs", key), "job.changed", payload)


def queue_job_links(job_ids: list[int] | None = None, fabric_id: int | None = None) -> None:
    """Queue ``refresh_job_links_task`` once the current transaction commits."""

    def send() -> None:
        try:
            refresh_job_links_task.delay(job_ids, fabric_id)
        except Exception:  # the broker may be down: the next change refreshes again
            log.warning("could not queue a job links refresh", exc_info=True)

    transaction.on_commit(send)


@receiver(routes_changed, dispatch_uid="scheduler.routes_changed")
def on_routes_changed(sender, fabric_id: int, **kwargs) -> None:
    queue_job_links(fabric_id=fabric_id)


@receiver(job_links_changed, dispatch_uid="scheduler.job_links_changed")
def on_job_links_changed(sender, job_id: int, **kwargs) -> None:
    if Job.objects.filter(pk=job_id, state__in=RUNNING_STATES).exists():
        queue_fault_evaluation([job_id])  # its path causes follow its paths


def queue_fault_evaluation(job_ids: list[int] | None = None) -> None:
    """Queue ``evaluate_faults_task`` once the current transaction commits (at once outside one)."""

    def send() -> None:
        try:
            evaluate_faults_task.delay(job_ids)
        except Exception:  # the broker may be down: the next change evaluates again
            log.warning("could not queue a fault evaluation", exc_info=True)

    transaction.on_commit(send)


@receiver(job_changed, dispatch_uid="scheduler.job_changed")
def on_job_changed(sender, job_id: int, state: str, source: str = "", previous: str = "", **kwargs) -> None:
    # the page and the runner hear of this change before a pass it queues (run at once in an
    # eager or in-process worker) changes the job again
    _tell(job_id, state, previous, source)
    if source != "pass":
        queue_pass()
    if source == "start":
        queue_fault_evaluation([job_id])
    queue_job_links(job_ids=[job_id])


def _tell(job_id: int, state: str, previous: str, source: str) -> None:
    """Push the change to the live pages and, when the job or its tenant has one, its webhook."""
    row = Job.objects.filter(pk=job_id).values_list("tenant_id", "webhook_url", "tenant__webhook_url").first()
    if row is None:
        return
    _publish(job_id, state, previous, source, row[0])
    if not (row[1] or row[2]):
        return  # no webhook for this job
    try:
        announce(job_id, state, previous, source)
    except Exception:  # the change is stored; the runner reads the job's status
        log.exception("could not queue the webhook of job %s", job_id)


@receiver(allocation_changed, dispatch_uid="scheduler.allocation_changed")
def on_allocation_changed(sender, allocation_id: int, state: str, **kwargs) -> None:
    if state not in _HOLDING_ENDS:
        return
    owner = Job.objects.filter(allocation_id=allocation_id).values_list("state", flat=True).first()
    if owner is None:
        queue_pass()  # GPUs freed outside the queue
    elif owner in HOLDING:
        allocation_lost(allocation_id, state)  # its job_changed queues the pass
    # else: the queue itself ended the job (its own signal covers it)


@receiver(inventory_committed, dispatch_uid="scheduler.inventory_committed")
def on_inventory_committed(sender, **kwargs) -> None:
    forget_locality()  # GPU counts and rails are part of the tree
    queue_pass()


@receiver(discovery_committed, dispatch_uid="scheduler.discovery_committed")
def on_discovery_committed(sender, fabric_id: int, **kwargs) -> None:
    forget_locality()
    try:  # job partitions follow their hosts' ports, as the pools' receiver does for pools'
        sync_job_partitions(fabric_id)
    except Exception:  # the discovery is stored; the next one catches up
        log.exception("could not update the job partitions of fabric %s", fabric_id)
    queue_pass()
    queue_fault_evaluation()
    queue_job_links(fabric_id=fabric_id)


@receiver(partitions_changed, dispatch_uid="scheduler.partitions_changed")
def on_partitions_changed(sender, fabric_id: int, **kwargs) -> None:
    queue_fault_evaluation()  # a drift found (or gone) on a job's ports


@receiver(alarms_changed, dispatch_uid="scheduler.alarms_changed")
def on_alarms_changed(sender, outcome, **kwargs) -> None:
    changed = [*outcome.raised, *outcome.cleared]
    if any(a.code in PLACEMENT_ALARMS for a in changed):
        queue_pass()
    if any(a.code in trigger_codes() for a in changed):
        queue_fault_evaluation()


@receiver(prune_due, dispatch_uid="scheduler.prune_due")
def on_prune_due(sender, now, **kwargs) -> dict[str, int]:
    """The daily prune: clear idempotency keys past ``WEFT_IDEMPOTENCY_TTL_S``
    (``scheduler.services.queue.expire_idempotency_keys``); returns ``{"idempotency_keys": n}``."""
    return {"idempotency_keys": expire_idempotency_keys(now)}
