"""Celery tasks of the scheduler app: thin wrappers around the queue service (STYLE.md)."""

from __future__ import annotations

from celery import shared_task
from django.db import DatabaseError

from .services.faults import evaluate
from .services.joblinks import refresh
from .services.queue import PASS_LIMIT_S, run_pass
from .services.rebalance import run_rebalance


@shared_task(
    name="scheduler.tasks.run_pass_task",
    soft_time_limit=PASS_LIMIT_S,
    time_limit=PASS_LIMIT_S + 30,
    autoretry_for=(DatabaseError,),
    retry_backoff=2,
    retry_kwargs={"max_retries": 2},
)
def run_pass_task() -> dict:
    """One scheduling pass (``scheduler.services.queue.run_pass``): queued on submit, on release,
    on topology and alarm changes (``scheduler.signals``), and by beat every
    ``WEFT_SCHEDULER_PASS_INTERVAL_S``. Never two at once (lock ``scheduler.pass``)."""
    return run_pass()


@shared_task(
    name="scheduler.tasks.rebalance_task",
    soft_time_limit=PASS_LIMIT_S,
    time_limit=PASS_LIMIT_S + 30,
    autoretry_for=(DatabaseError,),
    retry_backoff=2,
    retry_kwargs={"max_retries": 2},
)
def rebalance_task() -> dict:
    """One rebalancing run (``scheduler.services.rebalance.run_rebalance``, not a dry run): by
    beat every ``WEFT_SCHEDULER_REBALANCE_INTERVAL_S``; skipped while a pass holds the lock."""
    result = run_rebalance(dry_run=False)
    return {"skipped": result.get("skipped"), "counts": result.get("counts", {})}


@shared_task(
    name="scheduler.tasks.evaluate_faults_task",
    soft_time_limit=120,
    time_limit=150,
    autoretry_for=(DatabaseError,),
    retry_backoff=1,
    retry_kwargs={"max_retries": 2},
)
def evaluate_faults_task(job_ids: list[int] | None = None) -> dict:
    """Degrade, recover, requeue running jobs whose fabric changed
    (``scheduler.services.faults.evaluate``): queued on commit of alarm changes, discoveries,
    partition applies and job starts (``scheduler.signals``)."""
    return evaluate(job_ids)


@shared_task(
    name="scheduler.tasks.refresh_job_links_task",
    soft_time_limit=120,
    time_limit=150,
    autoretry_for=(DatabaseError,),
    retry_backoff=1,
    retry_kwargs={"max_retries": 2},
)
def refresh_job_links_task(job_ids: list[int] | None = None, fabric_id: int | None = None) -> dict:
    """Update the job→links index (``scheduler.services.joblinks.refresh``): queued when routes
    changed, a discovery committed, or a job was placed, moved or ended (``scheduler.receivers``)."""
    return refresh(job_ids, fabric_id)
