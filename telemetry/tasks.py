"""Celery tasks of the telemetry app: thin wrappers around ``telemetry.services`` (STYLE.md).

* ``poll_all_task`` (beat, every ``WEFT_POLL_INTERVAL_S``, default 10 s): one sweep per fabric with
  ``polling_enabled`` and live access; with ``WEFT_POLL_GROUPS`` = n > 1 it fans out n
  ``poll_fabric_task(fabric_id, group, n)`` calls per fabric so several workers share a large fabric.
* ``poll_fabric_task(fabric_id, group=None, groups=1)``: one sweep (or one switch group of it).
* ``rollup_task`` (beat, ``WEFT_ROLLUP_INTERVAL_S``): per-minute/per-hour rollups and retention.

None overlaps itself (``weft.locks.single_instance``, keys ``telemetry.poll.<id>[.<group>]``,
``telemetry.poll_all``, ``telemetry.rollup``); time limits and retries are on the decorators. A sweep
that finds the fabric unreachable records a failed Sweep instead of raising, so retries are only for
database errors (e.g. a PostgreSQL failover).
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db import DatabaseError

from weft.locks import single_instance

log = logging.getLogger(__name__)

POLL_SOFT_LIMIT_S = 240
POLL_HARD_LIMIT_S = 300


@shared_task(
    name="telemetry.tasks.poll_fabric_task",
    soft_time_limit=POLL_SOFT_LIMIT_S,
    time_limit=POLL_HARD_LIMIT_S,
    autoretry_for=(DatabaseError,),
    retry_backoff=2,
    retry_kwargs={"max_retries": 2},
)
def poll_fabric_task(fabric_id: int, group: int | None = None, groups: int = 1) -> dict:
    """Sweep one fabric (or one switch group of it) unless that sweep is already running.

    Returns the sweep summary (as ``poll_counters`` prints) or ``{"skipped": reason}``.
    """
    from fabric.models import Fabric

    from .services.sweep import poll_fabric

    fabric = Fabric.objects.filter(pk=fabric_id).first()
    if fabric is None:
        return {"skipped": f"no fabric {fabric_id}"}
    key = f"telemetry.poll.{fabric_id}" + (f".{group}" if group is not None else "")
    with single_instance(key, POLL_HARD_LIMIT_S) as mine:
        if not mine:
            return {"fabric": fabric.name, "skipped": "a sweep of this fabric is already running"}
        return poll_fabric(fabric, group=group, groups=groups).summary()


@shared_task(
    name="telemetry.tasks.poll_all_task", soft_time_limit=POLL_SOFT_LIMIT_S, time_limit=POLL_HARD_LIMIT_S
)
def poll_all_task() -> list[dict]:
    """Beat task: sweep every fabric with ``polling_enabled`` and live access (``Fabric.has_live_access``). Runs the sweeps in this worker when ``WEFT_POLL_GROUPS`` is 1 (default), else fans
    out one ``poll_fabric_task`` per switch group. Never overlaps itself (lock ``telemetry.poll_all``)."""
    from fabric.models import Fabric

    groups = settings.WEFT_POLL_GROUPS
    out: list[dict] = []
    with single_instance("telemetry.poll_all", POLL_HARD_LIMIT_S) as mine:
        if not mine:
            return [{"skipped": "poll_all is already running"}]
        for fabric in Fabric.objects.filter(polling_enabled=True).order_by("name"):
            if not fabric.has_live_access:
                continue
            if groups == 1:
                out.append(poll_fabric_task(fabric.pk))
            else:
                for g in range(groups):
                    poll_fabric_task.delay(fabric.pk, g, groups)
                out.append({"fabric": fabric.name, "queued_groups": groups})
    return out


@shared_task(
    name="telemetry.tasks.rollup_task",
    soft_time_limit=POLL_SOFT_LIMIT_S,
    time_limit=POLL_HARD_LIMIT_S,
    autoretry_for=(DatabaseError,),
    retry_backoff=2,
    retry_kwargs={"max_retries": 2},
)
def rollup_task() -> dict:
    """Beat task: history rollups (per-minute, per-hour) and retention (lock ``telemetry.rollup``)."""
    from .services.history import rollup

    with single_instance("telemetry.rollup", POLL_HARD_LIMIT_S) as mine:
        if not mine:
            return {"skipped": "a rollup is already running"}
        return rollup()
