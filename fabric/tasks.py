"""Celery tasks of the fabric app: thin wrappers around ``fabric.services`` (STYLE.md).

A fabric is *live-discoverable* when ``discovery_enabled`` is on and it has live access configured:
a non-empty ``tool_env`` (e.g. a lab's ``LD_PRELOAD``/``IBSIM_SOCKNAME``) or ``ca_name`` (the local
HCA the diags use); see ``fabric.collectors.tools.is_live``. Fabrics created by a file import have
neither and are skipped by the beat schedule.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from weft.locks import single_instance

log = logging.getLogger(__name__)


def _lock_ttl(fabric) -> float:
    return float(fabric.discovery_timeout_s) + 120.0


@shared_task(name="fabric.tasks.discover_fabric_task")
def discover_fabric_task(fabric_id: int) -> dict:
    """Discover one fabric live (``fabric.services.discovery.discover``) unless a discovery of it is
    already running (lock ``fabric.discover.<id>``). Returns the command's JSON summary, or
    ``{"skipped": reason}`` / ``{"error": reason}``."""
    from .collectors.ibnetdiscover import DiscoveryError
    from .models import Fabric
    from .services.discovery import discover
    from .services.ingest import summary

    fabric = Fabric.objects.filter(pk=fabric_id).first()
    if fabric is None:
        return {"skipped": f"no fabric {fabric_id}"}
    with single_instance(f"fabric.discover.{fabric_id}", _lock_ttl(fabric)) as mine:
        if not mine:
            return {"fabric": fabric.name, "skipped": "a discovery of this fabric is already running"}
        try:
            return summary(discover(fabric))
        except DiscoveryError as exc:
            log.warning("discovery of %s failed: %s", fabric.name, exc.reason)
            return {"fabric": fabric.name, "error": exc.reason}


@shared_task(name="fabric.tasks.discover_all_task")
def discover_all_task() -> list[dict]:
    """Beat task (every ``settings.WEFT_DISCOVERY_INTERVAL_S``): discover every live-discoverable fabric
    in turn; never overlaps itself (lock ``fabric.discover_all``)."""
    from .collectors.tools import is_live
    from .models import Fabric

    out: list[dict] = []
    ttl = max(float(settings.WEFT_DISCOVERY_INTERVAL_S), 60.0) * 4
    with single_instance("fabric.discover_all", ttl) as mine:
        if not mine:
            return [{"skipped": "discover_all is already running"}]
        for fabric in Fabric.objects.filter(discovery_enabled=True).order_by("name"):
            if not is_live(fabric):
                continue
            out.append(discover_fabric_task(fabric.pk))
    return out


@shared_task(name="fabric.tasks.sm_watch_task")
def sm_watch_task() -> list[dict]:
    """Beat task (every ``WEFT_SM_WATCH_INTERVAL_S``): read the master SM (``sminfo``) and the other
    SMs (``saquery -s``) of every live fabric (``fabric.services.sm.watch``).
    Never overlaps itself (lock ``fabric.sm_watch``). Returns one summary per fabric."""
    from .collectors.tools import is_live
    from .models import Fabric
    from .services.sm import watch

    out: list[dict] = []
    with single_instance("fabric.sm_watch", 120) as mine:
        if not mine:
            return out
        for fabric in Fabric.objects.filter(discovery_enabled=True).order_by("name"):
            if not is_live(fabric):  # same rule as live discovery: imported fabrics are not polled
                continue
            out.append(watch(fabric).as_dict())
    return out
