"""Celery tasks of the telemetry app: thin wrappers around ``telemetry.services`` (STYLE.md).

* ``poll_all_task`` (beat, every ``WEFT_POLL_INTERVAL_S``, default 10 s): one sweep per fabric with
  ``polling_enabled`` and live access; with ``WEFT_POLL_GROUPS`` = n > 1 it fans out n
  ``poll_fabric_task(fabric_id, group, n)`` calls per fabric so several workers share a large fabric.
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
ends in a failed Sweep row, never in ``SoftTimeLimitExceeded``; ``poll_all_task`` queues the
fabrics it has no time left for as their own ``poll_fabric_task``.
"""

from __future__ import annotations

import logging
import time

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
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
    """Beat task: sweep every fabric with ``polling_enabled`` and live access (``Fabric.has_live_access``).

    Runs the sweeps in this worker, one after the other, when ``WEFT_POLL_GROUPS`` is 1 (default)
    and a whole sweep budget (+ store margin) is left before this task's soft limit (always for the
    first); a fabric with no time left is queued as its own ``poll_fabric_task`` (``{"fabric", "queued": True}``). With
    groups it fans out one ``poll_fabric_task`` per switch group. Never overlaps itself (lock
    ``telemetry.poll_all``)."""
    from fabric.models import Fabric

    groups = settings.WEFT_POLL_GROUPS
    out: list[dict] = []
    t_end = time.monotonic() + POLL_SOFT_LIMIT_S
    inline = 0
    with single_instance("telemetry.poll_all", POLL_HARD_LIMIT_S) as mine:
        if not mine:
            return [{"skipped": "poll_all is already running"}]
        for fabric in Fabric.objects.filter(polling_enabled=True).order_by("name"):
            if not fabric.has_live_access:
                continue
            if groups == 1 and inline and t_end - time.monotonic() < SWEEP_BUDGET_S + STORE_MARGIN_S:
                poll_fabric_task.delay(fabric.pk)  # the soft limit leaves no whole budget for it here
                out.append({"fabric": fabric.name, "queued": True})
            elif groups == 1:
                inline += 1  # the first always fits: the soft limit is one budget + the store margin
                try:
                    out.append(poll_fabric_task(fabric.pk))
                except SoftTimeLimitExceeded:
                    raise
                except Exception as exc:  # one fabric's bug or bad setting: the next ones are swept
                    log.error(
                        "sweep of %s failed: %s: %s", fabric.name, type(exc).__name__, exc, exc_info=exc
                    )
                    out.append({"fabric": fabric.name, "error": f"{type(exc).__name__}: {exc}"})
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
