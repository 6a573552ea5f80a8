"""What the telemetry app adds to a fabric's network map (``fabric.api.maplayout.register_overlay``,
from ``TelemetryConfig.ready``): the rates of the latest sweep on the drawn edges."""

from __future__ import annotations

from django.db.models import Q

from fabric.api.maplayout import register_overlay

from .models import PortCounters


def port_rates(fabric):
    """``(port_id, utilisation, congestion)`` (0..1, either may be None) of the ports of ``fabric``
    with a fresh rate (``PortCounters`` of the latest sweep, not stale)."""
    return (
        PortCounters.objects.filter(port__node__fabric=fabric, stale=False)
        .filter(Q(utilisation__isnull=False) | Q(congestion__isnull=False))
        .values_list("port_id", "utilisation", "congestion")
    )


def register() -> None:
    """Register the overlay above on the map (idempotent)."""
    register_overlay("port_rates", port_rates)
