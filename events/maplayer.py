"""What the events app adds to a fabric's network map (``fabric.api.maplayout.register_overlay``,
from ``EventsConfig.ready``): cables kept Down while their ``link.down`` alarm is open, and the
open alarms on the drawn edges and on one edge's cables."""

from __future__ import annotations

from django.db.models import Count, Max, Q

from fabric.api.maplayout import register_overlay

from .models import Alarm


def down_link_keys(fabric):
    """Object keys (``"<guid>/<port>-<guid>/<port>"``) of the open ``link.down`` alarms of ``fabric``."""
    return Alarm.objects.open().filter(fabric=fabric, code="link.down").values_list("object_key", flat=True)


def down_links_stamp(fabric) -> str:
    """``"<count>:<highest id>"`` of those alarms: changes whenever one opens or clears."""
    down = (
        Alarm.objects.open().filter(fabric=fabric, code="link.down").aggregate(n=Count("id"), last=Max("id"))
    )
    return f"{down['n']}:{down['last']}"


def alarm_ports(fabric):
    """``(port_id, object_key)`` of every open alarm of ``fabric``."""
    return Alarm.objects.open().filter(fabric=fabric).values_list("port_id", "object_key")


def edge_alarms(fabric, ports: list[int], keys: list[str]):
    """The open alarms of ``fabric`` on ``ports`` or keyed by ``keys`` (link keys), newest first,
    at most 50: ``{"id", "code", "severity", "message", "object_repr"}``."""
    return (
        Alarm.objects.open()
        .filter(fabric=fabric)
        .filter(Q(port_id__in=ports) | Q(object_key__in=keys))
        .order_by("-last_seen")
        .values("id", "code", "severity", "message", "object_repr")[:50]
    )


def register() -> None:
    """Register the overlays above on the map (idempotent)."""
    for name in ("down_link_keys", "down_links_stamp", "alarm_ports", "edge_alarms"):
        register_overlay(name, globals()[name])
