"""Alert mail: sending the ``Notification`` outbox with storm control, rate limits and digests.

Mail goes through Django's email backend (``settings.EMAIL_*`` from ``EMAIL_URL``), as text
with an HTML alternative. Subjects name severity, alarm type, object and fabric:
``[Weft CRITICAL] Link down: leaf01 [3] <-> spine02 [1] (fabric lab)``; bodies link to the
alarm page under ``settings.WEFT_BASE_URL``.

Storm control and rate limit, per recipient and per urgency class, over the pending rows of one
send. Critical mail (a raised Critical alarm, a Critical event) is one class, everything else
(lower severities, clear notices, events) the other; the classes never share a mail or a budget,
so a flood of Minor alarms and clear notices cannot hold a Critical link-down back:

* ``WEFT_MAIL_STORM_THRESHOLD`` (default 5) or more pending notifications of a class → one summary
  mail grouping them by fabric and severity (a dead leaf switch: one mail for all its links);
* at most ``WEFT_MAIL_RATE_LIMIT`` (default 10) non-critical mails and at most
  ``WEFT_MAIL_CRITICAL_RATE_LIMIT`` (default 10) critical mails per ``WEFT_MAIL_RATE_WINDOW_S``
  (default 600 s); when a class's budget is spent, its rows stay pending and go out as one summary
  once the window allows (``flush_notifications_task`` runs every minute); with one mail of budget
  left and several rows pending, they go as one summary.

A summary says why it is one (``summary_reason``): a burst at or over the storm threshold, or the
rate limit that held N notifications since a time.

A daily digest (policies with ``digest``) lists the day's events and alarms of those types.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.db.models import Q
from django.template.loader import render_to_string
from django.utils import timezone

from core.locks import single_instance
from core.repeatlog import RepeatLog
from fabric.keys import link_name, split_link_key
from fabric.models import Node

from . import registry
from .choices import Severity
from .models import Alarm, Event, EventPolicy, Notification, NotificationKind, NotificationStatus
from .policies import default_recipients, policy_recipients

log = logging.getLogger(__name__)
#: "held by the rate limit" lines: once per distinct count, repeats summarised (a flush every minute)
_HELD_LOG = RepeatLog(log)


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
        return link_name((names.get(ga) or ga, pa), (names.get(gb) or gb, pb))
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


#: Notifications that need their own, never-delayed budget: raised Critical alarms, Critical events.
CRITICAL_Q = Q(kind=NotificationKind.RAISED, alarm__severity=Severity.CRITICAL) | Q(
    kind=NotificationKind.EVENT, event__severity=Severity.CRITICAL
)
#: A pending row older than this was held by the rate limit (``flush_notifications_task`` runs
#: every minute and every commit of the rules engine sends at once).
HELD_AFTER = timedelta(seconds=60)


def is_critical(n: Notification) -> bool:
    """Whether ``n`` is in the critical mail class (``CRITICAL_Q`` on a loaded row)."""
    if n.kind == NotificationKind.RAISED and n.alarm_id:
        return n.alarm.severity == Severity.CRITICAL
    if n.kind == NotificationKind.EVENT and n.event_id:
        return n.event.severity == Severity.CRITICAL
    return False


def summary_reason(reason: dict[str, Any]) -> str:
    """The sentence a summary mail gives for being one. ``reason`` is ``{"kind": "burst", "count"}``,
    ``{"kind": "rate_limit", "held", "since"}`` or ``{"kind": "budget", "held", "budget"}``, each
    with ``limit``, ``window_s``, ``critical`` and ``storm``."""

    what = "critical" if reason["critical"] else "non-critical"
    rate = f"{reason['limit']} {what} mails per {reason['window_s']:g} s to one recipient"
    if reason["kind"] == "burst":
        return (
            f"{reason['count']} notifications arrived together (the storm threshold is {reason['storm']}), "
            "so Weft sent this single summary instead of one mail each."
        )
    if reason["kind"] == "rate_limit":
        since = reason["since"].astimezone(UTC)
        return (
            f"The mail rate limit ({rate}) held {reason['held']} notification(s) since "
            f"{since:%Y-%m-%d %H:%M:%S} UTC; Weft sends them together in this summary."
        )
    return (
        f"The mail rate limit ({rate}) had {reason['budget']} mail(s) left for {reason['held']} "
        "notifications, so Weft sent them together in this summary."
    )


def storm_reason(items: list[Notification], budget: int, storm: int, now: datetime) -> dict[str, Any] | None:
    """Whether the pending ``items`` of one recipient (or alert target) and class go out as one
    summary, and why: rows held past a minute by the rate limit (``rate_limit``), more rows than
    mails left in the window (``budget``), or a burst at or over ``storm`` (``burst``); None: one
    message each. The same rule for mail and for alert targets (``events.alerting``)."""
    held = [n for n in items if n.created < now - HELD_AFTER]
    if len(items) > 1 and held:
        return {"kind": "rate_limit", "held": len(held), "since": min(n.created for n in held)}
    if len(items) > budget:
        return {"kind": "budget", "held": len(items), "budget": budget}
    if len(items) >= storm:
        return {"kind": "burst", "count": len(items)}
    return None


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
            Notification.objects.filter(status=NotificationStatus.PENDING, target__isnull=True)
            .select_related("alarm__fabric", "event__fabric")
            .order_by("id")
        )
        if not pending:
            return result
        storm = settings.WEFT_MAIL_STORM_THRESHOLD
        window = timedelta(seconds=settings.WEFT_MAIL_RATE_WINDOW_S)
        by_recipient: dict[str, list[Notification]] = defaultdict(list)
        for n in pending:
            by_recipient[n.recipient.lower()].append(n)
        connection = get_connection()
        for recipient, rows in by_recipient.items():
            for critical in (True, False):  # critical first: its mail never waits on the rest
                items = [n for n in rows if is_critical(n) == critical]
                if not items:
                    continue
                limit = settings.WEFT_MAIL_CRITICAL_RATE_LIMIT if critical else settings.WEFT_MAIL_RATE_LIMIT
                sent_recently = (
                    Notification.objects.filter(
                        recipient__iexact=recipient, target__isnull=True, sent_at__gte=now - window
                    )
                    .filter(CRITICAL_Q if critical else ~CRITICAL_Q)
                    .exclude(mail_id="")
                    .values("mail_id")
                    .distinct()
                    .count()
                )
                budget = limit - sent_recently
                if budget <= 0:
                    result["held"] += len(items)
                    cleared = sum(1 for n in items if n.kind == NotificationKind.CLEARED)
                    # said on the console/log (the demo's mail is the console): held mail was silent
                    _HELD_LOG.log(
                        logging.WARNING,
                        "mail to %s held by the rate limit (%d %s mail(s) per %.0f s): %d notification(s) "
                        "waiting, %d of them cleared-alarm notices; they go as one summary when the window allows",
                        items[0].recipient,
                        limit,
                        "critical" if critical else "non-critical",
                        window.total_seconds(),
                        len(items),
                        cleared,
                    )
                    continue
                to = items[0].recipient
                reason = storm_reason(items, budget, storm, now)
                if reason:
                    reason.update(
                        limit=limit, window_s=window.total_seconds(), critical=critical, storm=storm
                    )
                    _send(connection, to, items, summary=True, now=now, result=result, reason=reason)
                else:
                    for n in items:
                        _send(connection, to, [n], summary=False, now=now, result=result)
    return result


def _send(
    connection, to: str, items: list[Notification], *, summary: bool, now, result, reason: dict | None = None
) -> None:
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
                   "fabrics": fabrics, "severities": dict(severities), "reason": summary_reason(reason)}  # fmt: skip
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
    fallback = default_recipients()
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
