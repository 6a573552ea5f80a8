"""Use cases of the events app that change stored state: an Operator acknowledges or clears an
alarm (audited in the same transaction), old rows are pruned. ``EventSpec``/``record_events``
(``events.recording``) are re-exported here: other apps write events through this module.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts import audit

from .engine import AlarmEngine, Outcome, send_alarms_changed
from .models import Alarm, AlarmState, Event, HealthReport, Notification
from .recording import EventSpec, record_events
from .signals import prune_due

log = logging.getLogger(__name__)

__all__ = [
    "EventSpec",
    "acknowledge",
    "acknowledge_many",
    "clear_alarm",
    "prune",
    "record_events",
]


def acknowledge(alarm_id: int, user) -> Alarm:
    """Acknowledge an open alarm (Operator). Idempotent for an acknowledged alarm.

    Raises:
        Alarm.DoesNotExist: unknown id.
        ValueError: the alarm is already cleared.
    """
    with transaction.atomic():
        alarm = Alarm.objects.select_for_update().get(pk=alarm_id)
        if alarm.state == AlarmState.CLEARED:
            raise ValueError(f"alarm {alarm_id} is cleared; only open alarms can be acknowledged")
        if alarm.state == AlarmState.ACTIVE:
            alarm.state = AlarmState.ACKNOWLEDGED
            alarm.acknowledged_by = user
            alarm.acknowledged_at = timezone.now()
            alarm.save(update_fields=["state", "acknowledged_by", "acknowledged_at"])
            audit.record("alarm.acknowledge", alarm, {"state": ["active", "acknowledged"]}, user=user)
            outcome = Outcome(fabric_id=alarm.fabric_id, updated=[alarm])
            transaction.on_commit(lambda: send_alarms_changed(outcome))
        return alarm


def acknowledge_many(alarm_ids, user) -> dict[str, int]:
    """Acknowledge the active alarms among ``alarm_ids`` (Operator; the alarm page's bulk
    acknowledge) in one transaction: each audited ``alarm.acknowledge`` as :func:`acknowledge`
    does, one live update for all after the commit. Acknowledged, cleared and unknown ids are
    skipped.

    Returns ``{"acknowledged": n, "skipped": m}``.
    """
    ids = sorted({int(i) for i in alarm_ids})
    with transaction.atomic():
        alarms = list(Alarm.objects.select_for_update().filter(pk__in=ids, state=AlarmState.ACTIVE))
        now = timezone.now()
        for alarm in alarms:
            alarm.state = AlarmState.ACKNOWLEDGED
            alarm.acknowledged_by = user
            alarm.acknowledged_at = now
            alarm.save(update_fields=["state", "acknowledged_by", "acknowledged_at"])
            audit.record(
                "alarm.acknowledge", alarm, {"state": ["active", "acknowledged"], "bulk": True}, user=user
            )
        by_fabric: dict = {}
        for alarm in alarms:
            by_fabric.setdefault(alarm.fabric_id, []).append(alarm)
        for fabric_id, changed in by_fabric.items():
            outcome = Outcome(fabric_id=fabric_id, updated=changed)
            transaction.on_commit(lambda outcome=outcome: send_alarms_changed(outcome))
    return {"acknowledged": len(alarms), "skipped": len(ids) - len(alarms)}


def clear_alarm(alarm_id: int, user, reason: str = "") -> Alarm:
    """Clear an open alarm by hand (Operator); the clear notice follows the policy.

    Raises:
        Alarm.DoesNotExist: unknown id.
        ValueError: the alarm is already cleared.
    """
    with transaction.atomic():
        alarm = Alarm.objects.select_for_update().get(pk=alarm_id)
        if alarm.state == AlarmState.CLEARED:
            raise ValueError(f"alarm {alarm_id} is already cleared")
        engine = AlarmEngine(alarm.fabric, open_alarms=[alarm])
        who = getattr(user, "username", "system")
        engine.clear(alarm, at=timezone.now(), reason=reason or f"cleared by {who}", user=user)
        audit.record("alarm.clear", alarm, {"state": ["open", "cleared"], "reason": reason}, user=user)
        engine.finish()
        return alarm


def prune(now: datetime | None = None) -> dict[str, int]:
    """Delete what is older than its retention (days, from settings): events
    (``WEFT_EVENT_RETENTION_DAYS``, default 365), cleared alarms (``WEFT_ALARM_RETENTION_DAYS``,
    default 365), mail outbox rows no longer pending (``WEFT_NOTIFICATION_RETENTION_DAYS``,
    default 30) and health reports (``WEFT_HEALTH_RETENTION_DAYS``, default 90). Open alarms and
    pending mail are never deleted. Then :data:`prune_due` lets other apps clear theirs (the
    scheduler's expired idempotency keys, ``WEFT_IDEMPOTENCY_TTL_S``). Returns ``{"events": n,
    "alarms": n, "notifications": n, "health_reports": n}`` plus the receivers' counts
    (``"idempotency_keys": n``).
    """

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
    for receiver, result in prune_due.send_robust(sender=prune, now=now):
        if isinstance(result, Exception):
            log.error("prune receiver %r failed: %s", receiver, result, exc_info=result)
        elif isinstance(result, dict):
            out.update(result)
    return out


class EventNotDeletable(ValueError):
    """The event cannot be deleted yet (the alarm engine has not evaluated it)."""


def delete_event(event_id: int, user, *, fabric=None) -> dict:
    """Delete one event from the log (UFM's ``DELETE /ufmRest/app/events/<id>``, as the UFM SDK's
    ``scripts/ufm_events/ufm_events.py --delete_event`` sends it), audited (``event.delete``, with
    its code, time and message) in the same transaction. The alarms it raised or cleared stay
    (their ``raised_event``/``cleared_event`` become empty, ``Alarm`` ``SET_NULL``). Returns
    ``{"id", "code"}``.

    Raises:
        Event.DoesNotExist: no event ``event_id`` (of ``fabric`` when given).
        EventNotDeletable: the alarm engine has not evaluated it yet (deleting it would lose the
            alarm or mail it is about to raise).
    """
    with transaction.atomic():
        rows = Event.objects.select_for_update()
        if fabric is not None:
            rows = rows.filter(fabric=fabric)
        event = rows.get(pk=event_id)
        if not event.evaluated:
            raise EventNotDeletable(f"event {event_id} is not evaluated yet; try again in a few seconds")
        details = {"code": event.code, "at": event.at.isoformat(), "message": event.message[:300]}
        audit.record("event.delete", event, details, user=user)
        event.delete()
    return {"id": event_id, "code": details["code"]}
