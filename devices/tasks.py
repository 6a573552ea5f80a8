"""Celery tasks of the devices app: thin wrappers around ``devices.services.poll`` (STYLE.md).

* ``poll_devices_task(group=None, groups=None)`` (beat, every ``WEFT_SNMP_TICK_S``): polls the
  enabled devices whose ``poll_interval_s`` has passed since their last poll, all at once
  (``WEFT_SNMP_CONCURRENCY`` in flight; each device within its own budget, so a dead one delays
  nobody). With ``WEFT_SNMP_GROUPS`` = n > 1 the beat call fans out n tasks, group i polling the
  devices with ``id % n == i``, so several workers share many devices (as ``WEFT_POLL_GROUPS``
  spreads an IB fabric's switches).

* ``rollup_history_task()`` (beat, every ``WEFT_ROLLUP_INTERVAL_S``): the devices' history
  rollups and retention (``devices.services.history``).

No group overlaps itself (``core.locks.single_instance``, key ``devices.poll.<group>``); the time
limits follow from the devices' budgets (:data:`SOFT_LIMIT_S`).
"""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.db import DatabaseError

from core.locks import single_instance

#: the longest a device may take (``Device.budget_s`` is capped there) + storing a few hundred
SOFT_LIMIT_S = 300 + 120
HARD_LIMIT_S = SOFT_LIMIT_S + 30


@shared_task(
    name="devices.tasks.poll_devices_task",
    soft_time_limit=SOFT_LIMIT_S,
    time_limit=HARD_LIMIT_S,
    autoretry_for=(DatabaseError,),
    retry_backoff=2,
    retry_kwargs={"max_retries": 2},
)
def poll_devices_task(group: int | None = None, groups: int | None = None) -> dict:
    """Poll the devices due (see the module docstring). Returns ``{"group", "polled": [summaries]}``,
    ``{"queued": n}`` when it fanned out, or ``{"skipped": reason}``."""
    from .services.poll import poll_devices
    from .services.schedule import due_devices

    groups = groups or settings.WEFT_SNMP_GROUPS
    if group is None and groups > 1:
        for i in range(groups):
            poll_devices_task.delay(i, groups)
        return {"queued": groups}
    group = group or 0
    with single_instance(f"devices.poll.{group}", HARD_LIMIT_S) as mine:
        if not mine:
            return {"group": group, "skipped": "this group's poll is still running"}
        devices = due_devices(group, groups)
        return {"group": group, "polled": poll_devices(devices) if devices else []}


@shared_task(
    name="devices.tasks.rollup_history_task",
    soft_time_limit=SOFT_LIMIT_S,
    time_limit=HARD_LIMIT_S,
    autoretry_for=(DatabaseError,),
    retry_backoff=2,
    retry_kwargs={"max_retries": 2},
)
def rollup_history_task() -> dict:
    """Beat task (every ``WEFT_ROLLUP_INTERVAL_S``, as the IB counter history's): the devices'
    per-minute/per-hour rollups and retention (``devices.services.history.rollup``; lock
    ``devices.rollup``)."""
    from .services.history import rollup

    with single_instance("devices.rollup", HARD_LIMIT_S) as mine:
        if not mine:
            return {"skipped": "a rollup is already running"}
        return rollup()
