"""Alert mail: sending the ``Notification`` outbox with storm control, rate limits and digests.

Mail goes through Django's email backend (``settings.EMAIL_*`` from ``EMAIL_URL``), as text
with an HTML alternative. Subjects name severity, alarm type, object and fabric:
``[Weft CRITICAL] Link down: leaf01 [3] <-> spine02 [1] (fabric lab)``; bodies link to the
alarm page under ``settings.WEFT_BASE_URL``.

Storm control and rate limit, per recipient, over the pending rows of one send:

* ``WEFT_MAIL_STORM_THRESHOLD`` (default 5) or more pending notifications → one summary mail
  grouping them by fabric and severity (a dead leaf switch: one mail for all its links);
* at most ``WEFT_MAIL_RATE_LIMIT`` (default 10) mails per ``WEFT_MAIL_RATE_WINDOW_S`` (default
  600 s); when the budget is spent, rows stay pending and go out as one summary once the window
  allows (``flush_notifications_task`` runs every minute); with one mail of budget left and
  several rows pending, they go as one summary.

A daily digest (policies with ``digest``) lists the day's events and alarms of those types.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.template.loader import render_to_string
from django.utils import timezone

from fabric.models import Node
from weft.locks import single_instance

from . import registry
from .keys import split_link_key
from .models import Alarm, Event, EventPolicy, Notification, NotificationKind, NotificationStatus
from .policies import policy_recipients

log = logging.getLogger(__name__)


def base_url() -> str:
    return settings.WEFT_BASE_URL.rstrip("/")


def _fabric_name(obj) -> str:
    return obj.fabric.name if obj.fabric_id else "system"


def describe_object(obj: Alarm | Event) -> str:
    """A human name for the object of an alarm/event; for links, both ends by node name
    (``Node.name``: node-name map, else description) and port number looked up from the key when the stored text does not have them."""

    text = obj.object_repr or obj.object_key
    if obj.object_type == "link" and obj.fabric_id and "<->" not in text:
        try:
            (ga, pa), (gb, pb) = split_link_key(obj.object_key)
        except ValueError:
            return text

        names = dict(
            Node.objects.filter(fabric_id=obj.fabric_id, node_guid__in=[ga, gb]).values_list(
                "node_guid", "name"
            )
        )
        return f"{names.get(ga) or ga} [{pa}] <-> {names.get(gb) or gb} [{pb}]"
    return text


def subject_for(notification: Notification) -> str:
    """Subject line of a single-alarm/event mail."""
    if notification.alarm_id:
        alarm = notification.alarm
        name = registry.get(alarm.code).name
        tag = "CLEARED" if notification.kind == NotificationKind.CLEARED else alarm.severity.upper()
        return f"[Weft {tag}] {name}: {describe_object(alarm)} (fabric {_fabric_name(alarm)})"[:300]
    event = notification.event
    return (
        f"[Weft {event.severity.upper()}] {registry.get(event.code).name}: {describe_object(event)} "
        f"(fabric {_fabric_name(event)})"
    )[:300]


def _item_context(n: Notification) -> dict[str, Any]:
    obj = n.alarm if n.alarm_id else n.event
    url = (
        f"{base_url()}{n.alarm.get_absolute_url()}" if n.alarm_id else f"{base_url()}/events/?code={obj.code}"
    )
    return {
        "kind": n.kind,
        "name": registry.get(obj.code).name,
        "code": obj.code,
        "severity": obj.severity,
        "object": describe_object(obj),
        "fabric": _fabric_name(obj),
        "message": obj.message,
        "url": url,
        "alarm": n.alarm if n.alarm_id else None,
        "event": n.event if n.event_id else None,
        "details": obj.details,
    }


def _message(to: str, subject: str, template: str, context: dict, connection) -> EmailMultiAlternatives:
    context = {**context, "base_url": base_url(), "alarms_url": f"{base_url()}/alarms/"}
    text = render_to_string(f"events/email/{template}.txt", context)
    html = render_to_string(f"events/email/{template}.html", context)
    mail = EmailMultiAlternatives(subject, text, settings.DEFAULT_FROM_EMAIL, [to], connection=connection)
    mail.attach_alternative(html, "text/html")
    return mail


def send_pending(now: datetime | None = None) -> dict[str, int]:
    """Send the pending outbox rows (storm control and rate limit as in the module doc).

    Returns ``{"mails": n, "single": n, "summaries": n, "held": n, "failed": n}``. A failure of
    the mail server marks the rows ``failed`` with the error (they are not retried, to avoid
    duplicates; the alarm page stays the truth).
    """
    now = now or timezone.now()
    result = {"mails": 0, "single": 0, "summaries": 0, "held": 0, "failed": 0}
    with single_instance("events.notify", 300) as mine:
        if not mine:
            return result
        pending = list(
            Notification.objects.filter(status=NotificationStatus.PENDING)
            .select_related("alarm__fabric", "event__fabric")
            .order_by("id")
        )
        if not pending:
            return result
        storm = settings.WEFT_MAIL_STORM_THRESHOLD
        limit = settings.WEFT_MAIL_RATE_LIMIT
        window = timedelta(seconds=settings.WEFT_MAIL_RATE_WINDOW_S)
        by_recipient: dict[str, list[Notification]] = defaultdict(list)
        for n in pending:
            by_recipient[n.recipient.lower()].append(n)
        connection = get_connection()
        for recipient, items in by_recipient.items():
            sent_recently = (
                Notification.objects.filter(recipient__iexact=recipient, sent_at__gte=now - window)
                .exclude(mail_id="")
                .values("mail_id")
                .distinct()
                .count()
            )
            budget = limit - sent_recently
            if budget <= 0:
                result["held"] += len(items)
                continue
            to = items[0].recipient
            # Rows older than a minute were held by the rate limit: they go out together.
            held = len(items) > 1 and any(n.created < now - timedelta(seconds=60) for n in items)
            if len(items) >= storm or len(items) > budget or held:
                _send(connection, to, items, summary=True, now=now, result=result)
            else:
                for n in items:
                    _send(connection, to, [n], summary=False, now=now, result=result)
    return result


def _send(connection, to: str, items: list[Notification], *, summary: bool, now, result) -> None:
    mail_id = uuid.uuid4().hex
    if summary:
        ctx = [_item_context(n) for n in items]
        raised = [c for c in ctx if c["kind"] != NotificationKind.CLEARED]
        cleared = [c for c in ctx if c["kind"] == NotificationKind.CLEARED]
        severities = Counter(c["severity"] for c in raised)
        fabrics = sorted({c["fabric"] for c in ctx})
        parts = [f"{severities[s]} {s}" for s in ("critical", "minor", "warning", "info") if severities[s]]
        subject = (
            f"[Weft] {len(raised)} alarm(s) on fabric {', '.join(fabrics)}"
            + (f": {', '.join(parts)}" if parts else "")
            + (f"; {len(cleared)} cleared" if cleared else "")
        )[:300]
        groups: dict[str, list[dict]] = defaultdict(list)
        for c in raised:
            groups[c["name"]].append(c)
        context = {"items": ctx, "raised": raised, "cleared": cleared, "groups": dict(groups),
                   "fabrics": fabrics, "severities": dict(severities)}  # fmt: skip
        template = "summary"
    else:
        n = items[0]
        subject = subject_for(n)
        context = _item_context(n)
        template = "cleared" if n.kind == NotificationKind.CLEARED else "alarm"
    try:
        _message(to, subject, template, context, connection).send()
    except Exception as exc:  # SMTP down, refused recipient...
        log.warning("alert mail to %s failed: %s", to, exc)
        Notification.objects.filter(pk__in=[n.pk for n in items]).update(
            status=NotificationStatus.FAILED, error=str(exc)[:1000], subject=subject
        )
        result["failed"] += len(items)
        return
    status = NotificationStatus.SUMMARISED if summary else NotificationStatus.SENT
    Notification.objects.filter(pk__in=[n.pk for n in items]).update(
        status=status, sent_at=now, mail_id=mail_id, subject=subject
    )
    result["mails"] += 1
    result["summaries" if summary else "single"] += 1


def send_digest(now: datetime | None = None, period: timedelta = timedelta(days=1)) -> dict[str, int]:
    """Mail each recipient of a ``digest`` policy one digest of the period's events and alarms of
    those types. A recipient who got a digest less than 23 hours ago is skipped (so restarts of
    the embedded beat do not resend). Returns ``{"mails": n, "events": n}``."""

    now = now or timezone.now()
    since = now - period
    per_recipient: dict[str, set[str]] = defaultdict(set)
    fallback = list(settings.WEFT_ALERT_EMAILS)
    for policy in EventPolicy.objects.filter(digest=True, enabled=True).prefetch_related(
        "recipient_users", "recipient_groups__user_set"
    ):
        for address in policy_recipients(policy) or fallback:
            per_recipient[address].add(policy.code)
    result = {"mails": 0, "events": 0}
    connection = get_connection()
    for address, codes in per_recipient.items():
        recent = Notification.objects.filter(
            recipient__iexact=address,
            subject__startswith="[Weft digest]",
            sent_at__gte=now - timedelta(hours=23),
        ).exists()
        if recent:
            continue
        events = list(Event.objects.filter(code__in=codes, at__gte=since).select_related("fabric")[:500])
        alarms = list(
            Alarm.objects.filter(code__in=codes, first_seen__gte=since).select_related("fabric")[:500]
        )
        counts = Counter(registry.get(e.code).name for e in events)
        subject = (
            f"[Weft digest] {len(events)} event(s), {len(alarms)} alarm(s) since {since:%Y-%m-%d %H:%M} UTC"
        )
        context = {"events": events, "alarms": alarms, "counts": dict(counts), "since": since, "now": now}
        try:
            _message(address, subject, "digest", context, connection).send()
        except Exception as exc:
            log.warning("digest mail to %s failed: %s", address, exc)
            continue
        Notification.objects.create(
            recipient=address, kind=NotificationKind.EVENT, status=NotificationStatus.SENT, sent_at=now,
            mail_id=uuid.uuid4().hex, subject=subject,
        )  # fmt: skip
        result["mails"] += 1
        result["events"] += len(events)
    return result
