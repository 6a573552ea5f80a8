"""JSON forms of events-app objects for the live pages and commands (no writes)."""

from __future__ import annotations

from typing import Any

from .models import Alarm


def alarm_payload(alarm: Alarm) -> dict[str, Any]:
    """The JSON form of an alarm for the live page and the ``alarms`` command."""
    return {
        "id": alarm.pk,
        "fabric": alarm.fabric_id,
        "fabric_name": alarm.fabric.name if alarm.fabric_id else "",
        "type": alarm.code,
        "name": alarm.name,
        "severity": alarm.severity,
        "category": alarm.category,
        "state": alarm.state,
        "state_text": alarm.state_text,
        "object_type": alarm.object_type,
        "object_key": alarm.object_key,
        "object": alarm.object_repr,
        "message": alarm.message,
        "first_seen": alarm.first_seen.isoformat(),
        "last_seen": alarm.last_seen.isoformat(),
        "count": alarm.count,
        "acknowledged_by": alarm.acknowledged_by.username if alarm.acknowledged_by_id else None,
        "acknowledged_at": alarm.acknowledged_at.isoformat() if alarm.acknowledged_at else None,
        "cleared_at": alarm.cleared_at.isoformat() if alarm.cleared_at else None,
        "clear_reason": alarm.clear_reason,
        "url": alarm.get_absolute_url(),
        "tenant": alarm.tenant_id,  # whose data it carries (events.scoping; ws/alarms/ filters by it)
    }
