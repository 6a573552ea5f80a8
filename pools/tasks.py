"""Celery tasks of the pools app: thin wrappers around the services (STYLE.md)."""

from __future__ import annotations

from celery import shared_task

from .services.allocation import expire_leases


@shared_task(name="pools.tasks.expire_leases_task")
def expire_leases_task() -> dict:
    """End allocations whose lease ran out (``pools.services.allocation.expire_leases``);
    beat runs it every ``WEFT_LEASE_CHECK_INTERVAL_S``."""
    return expire_leases()
