"""Celery tasks of the routing app: thin wrappers around ``routing.services.collect``."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from core.locks import single_instance

log = logging.getLogger(__name__)


@shared_task(name="routing.tasks.collect_routes_task")
def collect_routes_task(fabric_id: int, reason: str = "interval") -> dict:
    """Read one fabric's forwarding tables (lock ``routing.collect.<id>``: one read at a time;
    a read asked for while one runs is skipped, the running one sees the same tables or the
    next trigger does). Returns a JSON summary, ``{"skipped": ...}`` or ``{"error": ...}``."""
    from fabric.models import Fabric

    from .services.collect import RoutesError, collect_routes, summary
    from .services.current import routing_report_for

    fabric = Fabric.objects.filter(pk=fabric_id).first()
    if fabric is None:
        return {"skipped": f"no fabric {fabric_id}"}
    # the SMP read (two runs at most, within one WEFT_TOOL_TIMEOUT_S), dump_lfts, store, the report
    with single_instance(f"routing.collect.{fabric_id}", 2 * settings.WEFT_TOOL_TIMEOUT_S + 120) as mine:
        if not mine:
            return {"fabric": fabric.name, "skipped": "a routes read of this fabric is running"}
        try:
            snap = collect_routes(fabric, reason=reason)
        except RoutesError as exc:
            log.warning("routes of %s not read: %s", fabric.name, exc)
            return {"fabric": fabric.name, "error": str(exc)}
        routing_report_for(fabric)  # computed and stored now, not in the first request that asks
        return summary(snap)


@shared_task(name="routing.tasks.collect_all_task")
def collect_all_task() -> list[dict]:
    """Beat task (every ``WEFT_ROUTING_INTERVAL_S``, queue ``control``): one
    :func:`collect_routes_task` per live fabric, at its site (``core.sites.fan_out``)."""
    from core.sites import fan_out
    from fabric.collectors.tools import is_live
    from fabric.models import Fabric

    fabrics = [f for f in Fabric.objects.order_by("name") if is_live(f)]
    return fan_out(collect_routes_task, fabrics, args=lambda f: (f.pk, "interval"), log=log)
