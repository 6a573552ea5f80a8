"""Celery tasks of the telemetry app: thin wrappers around ``telemetry.services`` (STYLE.md).

* ``poll_all_task`` (beat, every ``WEFT_POLL_INTERVAL_S``, default 10 s; queue ``control``): queues
  one sweep per fabric with ``polling_enabled`` and live access, at the fabric's site (issue 25
  §2: the site's workers sweep its fabrics in parallel); with ``WEFT_POLL_GROUPS`` = n > 1 it fans
  out n ``poll_fabric_task(fabric_id, group, n)`` calls per fabric so several workers share a
  large fabric.
* ``poll_fabric_task(fabric_id, group=None, groups=1)``: one sweep (or one switch group of it).
* ``rollup_task`` (beat, ``WEFT_ROLLUP_INTERVAL_S``): per-minute/per-hour rollups and retention.
* ``poller_watchdog_task`` (beat, ``WEFT_WATCHDOG_INTERVAL_S``): ``system.poller_stalled`` when a
  fabric's sweeps stopped (``telemetry.services.watchdog``).

None overlaps itself (``core.locks.single_instance``, keys ``telemetry.poll.<id>[.<group>]``,
``telemetry.poll_all``, ``telemetry.rollup``: leases renewed while the task runs, so a killed worker
frees them within ``WEFT_LOCK_TTL_S``); time limits and retries are on the decorators. A sweep that
finds the fabric unreachable records a failed Sweep instead of raising, so retries are only for
database errors (e.g. a PostgreSQL failover).

One time budget: a sweep's collector gets ``WEFT_TOOL_TIMEOUT_S`` in total (:data:`SWEEP_BUDGET_S`),
and the soft time limit is that plus :data:`STORE_MARGIN_S` to store the sweep, so a hung fabric
ends in a failed Sweep row, never in ``SoftTimeLimitExceeded``.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db import DatabaseError

from core.locks import single_instance

log = logging.getLogger(__name__)

#: Seconds a sweep's collector may take, every attempt together (``WEFT_TOOL_TIMEOUT_S``).
SWEEP_BUDGET_S = float(settings.WEFT_TOOL_TIMEOUT_S)
#: Seconds to compute and store a sweep after its collector (Selene, 25,704 ports: about 2 s).
STORE_MARGIN_S = 60.0
#: Soft time limit of a sweep task: the collector budget + the store margin (derived, not set).
POLL_SOFT_LIMIT_S = int(SWEEP_BUDGET_S + STORE_MARGIN_S)
#: Hard limit: 30 s after the soft one for the failed Sweep row to be written.
POLL_HARD_LIMIT_S = POLL_SOFT_LIMIT_S + 30


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
        return poll_fabric(fabric, group=group, groups=groups, timeout=SWEEP_BUDGET_S).summary()


@shared_task(
    name="telemetry.tasks.poll_all_task", soft_time_limit=POLL_SOFT_LIMIT_S, time_limit=POLL_HARD_LIMIT_S
)
def poll_all_task() -> list[dict]:
    """Beat task (queue ``control``): one :func:`poll_fabric_task` per fabric with
    ``polling_enabled`` and live access (``Fabric.has_live_access``), each to its site's queue
    (``core.sites.fan_out``), so the workers of a site sweep its fabrics in parallel and a fabric
    whose site has no live worker is skipped; with ``WEFT_POLL_GROUPS`` = n > 1, n calls per fabric
    (one per switch group). Never overlaps itself (lock ``telemetry.poll_all``). Where no worker
    runs (eager runs) the sweeps run in here and their summaries are returned."""
    from core.sites import fan_out
    from fabric.models import Fabric

    groups = settings.WEFT_POLL_GROUPS
    with single_instance("telemetry.poll_all", POLL_HARD_LIMIT_S) as mine:
        if not mine:
            return [{"skipped": "poll_all is already running"}]
        fabrics = [
            f for f in Fabric.objects.filter(polling_enabled=True).order_by("name") if f.has_live_access
        ]
        if groups == 1:
            return fan_out(poll_fabric_task, fabrics, log=log)
        out: list[dict] = []
        for g in range(groups):
            out.extend(fan_out(poll_fabric_task, fabrics, args=lambda f, g=g: (f.pk, g, groups), log=log))
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


@shared_task(name="telemetry.tasks.poller_watchdog_task", soft_time_limit=60, time_limit=90)
def poller_watchdog_task() -> list[dict]:
    """Beat task (every ``WEFT_WATCHDOG_INTERVAL_S``): ``system.poller_stalled`` for every polled
    fabric without a finished sweep for too long, ``system.poller_resumed`` when sweeps are back
    (``telemetry.services.watchdog.check_poller``). Returns one summary per fabric."""
    from .services.watchdog import check_poller

    with single_instance("telemetry.poller_watchdog", 90) as mine:
        if not mine:
            return []
        return [c.as_dict() for c in check_poller()]
