"""Poller watchdog: a fabric whose counter sweeps stopped raises ``system.poller_stalled``.

Every fabric that the beat sweeps (``polling_enabled`` and live access, as ``poll_all_task``) must
have finished a sweep, ok or failed, within ``WEFT_STALL_INTERVALS`` × ``WEFT_POLL_INTERVAL_S`` plus
the collector budget (``WEFT_TOOL_TIMEOUT_S``: a sweep of a hung fabric takes that long and then
writes its failed row, which is the ``system.poller_failing`` alarm, not a stall). The mechanism
is ``fabric.services.watchdog.check_stalls``.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings

from fabric.models import Fabric
from fabric.services.watchdog import StallCheck, check_stalls, finished_at, stall_intervals

from ..models import Sweep


def poller_threshold_s() -> float:
    """Seconds without a finished sweep that make a stall (see the module docstring)."""
    return stall_intervals() * float(settings.WEFT_POLL_INTERVAL_S) + float(settings.WEFT_TOOL_TIMEOUT_S)


def check_poller(now: datetime | None = None) -> list[StallCheck]:
    """Check every polled fabric; write ``system.poller_stalled``/``system.poller_resumed``.
    Returns one :class:`fabric.services.watchdog.StallCheck` per fabric."""

    def last(fabric: Fabric) -> datetime | None:
        row = (
            Sweep.objects.filter(fabric=fabric)
            .order_by("-started", "-id")
            .values_list("started", "duration_s")
            .first()
        )
        return finished_at(*row) if row else None

    fabrics = [f for f in Fabric.objects.filter(polling_enabled=True).order_by("name") if f.has_live_access]
    threshold = poller_threshold_s()
    return check_stalls(
        fabrics,
        last_finished=last,
        threshold_s=lambda f: threshold,
        stalled_code="system.poller_stalled",
        resumed_code="system.poller_resumed",
        what="counter sweep",
        now=now,
    )
