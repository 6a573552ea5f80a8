"""Celery tasks of the outbound webhooks: thin wrappers around ``outbound.services``."""

from __future__ import annotations

from celery import shared_task

from .services import deliver, prune, retry_due


@shared_task(name="outbound.tasks.deliver_task", ignore_result=True)
def deliver_task(delivery_id: int) -> str:
    """The first attempt of a delivery, queued on commit by ``queue_webhook``."""
    return deliver(delivery_id)


@shared_task(name="outbound.tasks.retry_due_task", ignore_result=True)
def retry_due_task() -> dict:
    """Deliveries due for another attempt (back-off), by beat every ``WEFT_WEBHOOK_RETRY_INTERVAL_S``."""
    return retry_due()


@shared_task(name="outbound.tasks.prune_task", ignore_result=True)
def prune_task() -> int:
    """Daily: delivered and given-up deliveries past ``WEFT_WEBHOOK_RETENTION_DAYS``."""
    return prune()
