"""Writing events. Callers run inside their own transaction; the rules engine (alarms) reads
events after commit."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from .models import Category, Event, Severity


@dataclass
class EventSpec:
    """An event to write; see :class:`events.models.Event` for the fields."""

    code: str
    message: str
    severity: str = Severity.INFO
    category: str = Category.SYSTEM
    object_type: str = ""
    object_key: str = ""
    object_repr: str = ""
    node_id: int | None = None
    port_id: int | None = None
    details: dict[str, Any] = field(default_factory=dict)


def record_events(fabric, specs: list[EventSpec], at: datetime | None = None) -> list[Event]:
    """Bulk-create events for ``fabric`` (may be None for system events) and return them."""
    at = at or timezone.now()
    rows = [
        Event(
            fabric=fabric,
            at=at,
            code=s.code,
            severity=s.severity,
            category=s.category,
            object_type=s.object_type,
            object_key=s.object_key[:120],
            object_repr=s.object_repr[:300],
            node_id=s.node_id,
            port_id=s.port_id,
            message=s.message,
            details=s.details,
        )
        for s in specs
    ]
    return Event.objects.bulk_create(rows, batch_size=1000)


def prune(now: datetime | None = None) -> dict[str, int]:
    """Delete what is older than its retention (days, from settings): events
    (``WEFT_EVENT_RETENTION_DAYS``, default 365), cleared alarms (``WEFT_ALARM_RETENTION_DAYS``,
    default 365), mail outbox rows no longer pending (``WEFT_NOTIFICATION_RETENTION_DAYS``,
    default 30) and health reports (``WEFT_HEALTH_RETENTION_DAYS``, default 90). Open alarms and
    pending mail are never deleted. Returns ``{"events": n, "alarms": n, "notifications": n,
    "health_reports": n}``.
    """
    from datetime import timedelta

    from django.conf import settings

    from .models import Alarm, HealthReport, Notification

    now = now or timezone.now()

    def cutoff(days: float):
        return now - timedelta(days=days)

    out = {}
    out["alarms"] = (
        Alarm.objects.filter(state="cleared", cleared_at__lt=cutoff(settings.WEFT_ALARM_RETENTION_DAYS))
        .delete()[1]
        .get("events.Alarm", 0)
    )
    out["events"] = (
        Event.objects.filter(at__lt=cutoff(settings.WEFT_EVENT_RETENTION_DAYS), evaluated=True)
        .delete()[1]
        .get("events.Event", 0)
    )
    out["notifications"] = (
        Notification.objects.exclude(status="pending")
        .filter(created__lt=cutoff(settings.WEFT_NOTIFICATION_RETENTION_DAYS))
        .delete()[1]
        .get("events.Notification", 0)
    )
    out["health_reports"] = (
        HealthReport.objects.filter(created__lt=cutoff(settings.WEFT_HEALTH_RETENTION_DAYS))
        .delete()[1]
        .get("events.HealthReport", 0)
    )
    return out
