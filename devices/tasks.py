"""Celery tasks of the devices app: thin wrappers around ``devices.services.poll`` (STYLE.md).

* ``poll_devices_task(group=None, groups=None, site=None)`` (beat, every ``WEFT_SNMP_TICK_S``):
  polls the enabled devices whose ``poll_interval_s`` has passed since their last poll, all at
  once (``WEFT_SNMP_CONCURRENCY`` in flight; each device within its own budget, so a dead one
  delays nobody). The beat's call (on ``control``) fans out ``WEFT_SNMP_GROUPS`` = n tasks per
  collector site (a device's site is its fabric's, ``Fabric.site``; issue 25 §2), each on that
  site's queue, group i polling the site's devices with ``id % n == i``: the workers of a site
  share its devices, and only they reach them.

* ``rollup_history_task()`` (beat, every ``WEFT_ROLLUP_INTERVAL_S``): the devices' history
  rollups and retention (``devices.services.history``).

No group overlaps itself (``core.locks.single_instance``, key ``devices.poll.<site>.<group>``) and
no device is polled twice at once (key ``devices.poll.device.<id>``, held for the poll: two calls
whose groups overlap, after ``WEFT_SNMP_GROUPS`` changed or a device moved to another site, never
both poll it); the time limits follow from the devices' budgets (:data:`SOFT_LIMIT_S`).
"""

from __future__ import annotations

import contextlib

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
def poll_devices_task(group: int | None = None, groups: int | None = None, site: str | None = None) -> dict:
    """Poll the devices due (see the module docstring).

    Without ``site`` (the beat's call, queue ``control``): queue ``groups`` calls per site that has
    enabled devices and a live worker (``core.sites``), each to that site's queue; returns
    ``{"queued": n, "sites": [...], "skipped_sites": [...]}`` (where no worker runs, the calls ran
    at once: ``"polled"`` holds their summaries; ``"still_queued"``: the ``site/group`` calls not
    queued again because the previous one has not started yet). With ``site``: poll group ``group`` of that
    site's devices (lock ``devices.poll.<site>.<group>``), each device under its own lock
    (``devices.poll.device.<id>``: a device is never polled twice at once, whatever the groups of
    two overlapping calls); a device whose poll is still running elsewhere is left out of this
    one. Returns ``{"site", "group", "polled": [summaries], "busy": [names]}`` or
    ``{"skipped": reason}``."""
    from celery.result import EagerResult

    from core.sites import live_sites, mark_pending

    from .models import Device
    from .services.poll import poll_devices
    from .services.schedule import due_devices

    groups = groups or settings.WEFT_SNMP_GROUPS
    if site is None:
        sites = sorted(set(Device.objects.filter(enabled=True).values_list("fabric__site", flat=True)))
        live = live_sites(sites)
        out: dict = {
            "queued": 0,
            "sites": [s for s in sites if s in live],
            "skipped_sites": [s for s in sites if s not in live],
        }
        polled: list[dict] = []
        for s in out["sites"]:
            for i in range(groups):
                # at most one call of a group waiting in its queue (core.sites.fan_out's rule)
                if not mark_pending(poll_devices_task.name, (i, groups, s), HARD_LIMIT_S):
                    out.setdefault("still_queued", []).append(f"{s}/{i}")
                    continue
                result = poll_devices_task.delay(i, groups, site=s)
                out["queued"] += 1
                value = result.result if isinstance(result, EagerResult) else result  # ran at once
                if isinstance(value, dict):
                    polled.extend(value.get("polled", []))
        if polled:
            out["polled"] = polled
        return out
    group = group or 0
    with single_instance(f"devices.poll.{site}.{group}", HARD_LIMIT_S) as mine:
        if not mine:
            return {"site": site, "group": group, "skipped": "this group's poll is still running"}
        with contextlib.ExitStack() as held:
            devices, busy = [], []
            for d in due_devices(group, groups, site=site):
                if held.enter_context(single_instance(f"devices.poll.device.{d.pk}", HARD_LIMIT_S)):
                    devices.append(d)
                else:
                    busy.append(d.name)
            polled = poll_devices(devices) if devices else []
        return {"site": site, "group": group, "polled": polled, "busy": busy}


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
