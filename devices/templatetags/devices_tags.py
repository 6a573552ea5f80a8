"""Template tags of the devices app: the dashboard's Ethernet health tiles
(``devices/_dashboard_health.html``, which the events dashboard includes when it exists)."""

from __future__ import annotations

from django import template
from django.db.models import Count, Max, Q

from events.policies import policy_for

from ..models import Device, Sensor

register = template.Library()


@register.inclusion_tag("devices/_health_tiles.html")
def device_health() -> dict:
    """Devices answering / all enabled; fans and PSUs ok / failed (sensors of those components,
    ENTITY-SENSOR-MIB status); temperature sensors above the ``device.temperature_high``
    threshold and the hottest reading. Empty (no tiles) when no device is configured."""
    devices = Device.objects.filter(enabled=True).aggregate(
        n=Count("id"), up=Count("id", filter=Q(status="ok"))
    )
    if not devices["n"]:
        return {"show": False}
    threshold = policy_for("device.temperature_high").threshold or 80.0
    parts = {}
    for comp in ("fan", "psu"):
        qs = Sensor.objects.filter(device__enabled=True).filter(Q(component=comp) | Q(kind=comp))
        parts[comp] = qs.aggregate(n=Count("id"), failed=Count("id", filter=Q(status="nonoperational")))
    temps = Sensor.objects.filter(device__enabled=True, kind="temperature", status="ok").aggregate(
        n=Count("id"), hot=Count("id", filter=Q(value__gt=threshold)), max=Max("value")
    )
    return {"show": True, "devices": devices, "fans": parts["fan"], "psus": parts["psu"], "temps": temps,
            "threshold": threshold}  # fmt: skip
