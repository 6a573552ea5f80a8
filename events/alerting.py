"""Alarms into the tools on-call watches (issue 26 §2): the payload formats of an
:class:`~events.models.AlertTarget` and their sending through ``outbound`` (the one sender:
HMAC-SHA256 signing, retries with back-off, the delivery log per target).

Who gets what:

* alarm raises and clears go to every enabled HTTP target (``webhook``, ``slack``,
  ``alertmanager``) whose ``min_severity`` the alarm reaches. The alarm engine queues them as
  ``Notification`` rows (``target`` set) in its transaction; :func:`send_pending_targets` sends
  them with the storm control and rate limit of mail (``events.notify.storm_reason``, the same
  ``WEFT_MAIL_*`` settings, per target and per urgency class): a burst or held rows go as one
  summary message (for Alertmanager: one POST with all the alerts). A clear is sent whatever the
  policy's ``notify_clear`` (Alertmanager needs it to resolve the alert).
* syslog targets get every evaluated event (not only alarms) and every alarm clear at or over
  their ``min_severity``, as RFC 5424 messages, one ``outbound`` delivery per target and
  evaluation (:func:`queue_syslog`); no storm control (a log collector takes the volume).
* Alertmanager forgets an alert that is not sent again (its ``resolve_timeout``; clients "are
  expected to continuously re-send alerts as long as they are still active", Alertmanager's
  alerts API doc). Firing alerts carry ``endsAt`` = now + 4 × ``WEFT_ALERTMANAGER_RESEND_S`` (as
  Prometheus does) and :func:`resend_firing` re-posts the open alarms every minute (the mail
  flush task).

Formats (each a pure function of :func:`alarm_record` dicts):

* ``webhook``: ``outbound``'s envelope ``{"event", "timestamp", "delivery", "data"}`` with
  ``event`` ``alarm.raised`` / ``alarm.cleared`` / ``alarm.summary`` / ``alarm.test`` and
  ``data`` ``{"alarm": record}`` or ``{"alarms": [record…], "reason": text}``;
* ``slack``: ``{"text", "blocks"}`` (Slack Block Kit: a section with mrkdwn, a context line;
  ``text`` is the fallback shown in notifications);
* ``alertmanager``: the body of ``POST /api/v2/alerts``, a list of ``postableAlert``
  (``labels``, ``annotations``, ``startsAt``, ``endsAt``, ``generatorURL``; Alertmanager's
  ``api/v2/openapi.yaml``), labels ``alertname`` (the event type, e.g. ``link.down``),
  ``fabric``, ``node``, ``port`` (a link: ``peer_node``, ``peer_port`` too), ``severity``, ``object`` (the natural key: one alert per
  object), ``source="weft"``;
* ``syslog``: ``outbound.syslog.format_message`` with MSGID the event code and the SD-ELEMENT
  ``[weft@32473 fabric= node= port= severity= code= object=]`` (``WEFT_SYSLOG_SD_ID``).
"""

from __future__ import annotations

import json
import logging
import socket
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import prefetch_related_objects
from django.utils import timezone

from accounts import audit
from core.locks import single_instance
from fabric.keys import split_link_key, split_port_key
from fabric.models import Node
from outbound import syslog
from outbound.models import WebhookDelivery
from outbound.services import deliver, queue_message, queue_webhook

from . import registry
from .choices import Severity
from .models import (
    Alarm,
    AlertTarget,
    AlertTargetKind,
    Event,
    Notification,
    NotificationKind,
    NotificationStatus,
)
from .notify import CRITICAL_Q, base_url, describe_object, is_critical, storm_reason, summary_reason

log = logging.getLogger(__name__)

#: Weft severity → syslog severity (RFC 5424 table 2)
SYSLOG_SEVERITY = {
    Severity.CRITICAL: syslog.CRITICAL,
    Severity.MINOR: syslog.ERROR,
    Severity.WARNING: syslog.WARNING,
    Severity.INFO: syslog.INFORMATIONAL,
}
HTTP_KINDS = (AlertTargetKind.WEBHOOK, AlertTargetKind.SLACK, AlertTargetKind.ALERTMANAGER)
ALERTMANAGER_PATH = "/api/v2/alerts"
#: at most this many alarms are listed in one Slack message (the rest counted)
SLACK_LINES = 20


def alarm_record(alarm: Alarm, kind: str) -> dict[str, Any]:
    """An alarm as the targets see it (JSON-able): ``kind`` ``raised``/``cleared``, ``id``,
    ``code``, ``name``, ``severity``, ``state``, ``fabric`` (name, ``system`` without one),
    ``node`` (name or GUID, ``""``), ``port`` (number or None), ``peer_node``/``peer_port`` (a
    link's other end, else ``""``/None; :func:`where`), ``object_type``, ``object_key``,
    ``object`` (human name), ``message``, ``count``, ``first_seen``/``last_seen``/``cleared_at``
    (ISO 8601 UTC), ``url`` (the alarm page under ``WEFT_BASE_URL``)."""
    node, port, peer_node, peer_port = where(alarm)
    return {
        "kind": kind,
        "id": alarm.pk,
        "code": alarm.code,
        "name": registry.get(alarm.code).name,
        "severity": alarm.severity,
        "state": alarm.state,
        "fabric": alarm.fabric.name if alarm.fabric_id else "system",
        "node": node,
        "port": port,
        "peer_node": peer_node,
        "peer_port": peer_port,
        "object_type": alarm.object_type,
        "object_key": alarm.object_key,
        "object": describe_object(alarm),
        "message": alarm.message,
        "count": alarm.count,
        "first_seen": alarm.first_seen.isoformat(),
        "last_seen": alarm.last_seen.isoformat(),
        "cleared_at": alarm.cleared_at.isoformat() if alarm.cleared_at else None,
        "url": f"{base_url()}{alarm.get_absolute_url()}",
    }


def _node_name(node) -> str:
    return node.name or node.description or node.node_guid


def where(alarm: Alarm) -> tuple[str, int | None, str, int | None]:
    """``(node, port, peer node, peer port)`` of an alarm: its node and port when it names them,
    else from its natural key (``fabric.keys``): a link's lower end then its other end, a port's
    node and number, a node's GUID; nodes by name (``Node.name``, else the description, else the
    GUID). Unknown parts are ``""``/None."""
    if alarm.node_id or alarm.port_id:
        port = alarm.port if alarm.port_id else None
        node = alarm.node if alarm.node_id else (port.node if port else None)
        return (_node_name(node) if node else "", port.port_num if port else None, "", None)
    try:
        if alarm.object_type == "link":
            (ga, pa), (gb, pb) = split_link_key(alarm.object_key)
        elif alarm.object_type == "port":
            (ga, pa), (gb, pb) = split_port_key(alarm.object_key), ("", None)
        elif alarm.object_type == "node":
            (ga, pa), (gb, pb) = (alarm.object_key, None), ("", None)
        else:
            return "", None, "", None
    except ValueError:
        return "", None, "", None
    names = {}
    if alarm.fabric_id:
        names = {n.node_guid: _node_name(n) for n in Node.objects.filter(fabric_id=alarm.fabric_id,
                                                                         node_guid__in=[ga, gb])}  # fmt: skip
    return names.get(ga, ga), pa, names.get(gb, gb), pb


def title(record: dict[str, Any]) -> str:
    """``[Weft CRITICAL] Link down: leaf01 [3] <-> spine02 [1] (fabric lab)`` (as the mail subject)."""
    tag = "CLEARED" if record["kind"] == "cleared" else record["severity"].upper()
    return f"[Weft {tag}] {record['name']}: {record['object']} (fabric {record['fabric']})"


# -- formats ---------------------------------------------------------------------------------
def slack_body(records: list[dict[str, Any]], reason: str = "") -> dict[str, Any]:
    """A Slack-compatible incoming-webhook message for one alarm or a summary of several."""
    if len(records) == 1 and not reason:
        r = records[0]
        text = title(r)
        lines = [f"*<{r['url']}|{text}>*", r["message"]] if r["message"] else [f"*<{r['url']}|{text}>*"]
        context = f"severity {r['severity']} · fabric {r['fabric']} · first seen {r['first_seen']}"
    else:
        raised = sum(1 for r in records if r["kind"] != "cleared")
        text = f"[Weft] {raised} alarm(s), {len(records) - raised} cleared"
        lines = [f"*{text}*"] + [f"• <{r['url']}|{title(r)}>" for r in records[:SLACK_LINES]]
        if len(records) > SLACK_LINES:
            lines.append(f"… and {len(records) - SLACK_LINES} more")
        context = reason or "summary"
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)[:3000]}},
            {"type": "context", "elements": [{"type": "mrkdwn", "text": context[:3000]}]},
        ],
    }


def alertmanager_alerts(records: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """The ``POST /api/v2/alerts`` body (a list of ``postableAlert``) for ``records``: a raised
    alarm fires until now + 4 × ``WEFT_ALERTMANAGER_RESEND_S`` (re-sent by
    :func:`resend_firing`); a cleared one ends at its ``cleared_at`` (Alertmanager resolves it)."""
    until = now + timedelta(seconds=4 * settings.WEFT_ALERTMANAGER_RESEND_S)
    out = []
    for r in records:
        labels = {
            "alertname": r["code"], "fabric": r["fabric"], "node": r["node"],
            "port": "" if r["port"] is None else str(r["port"]), "peer_node": r["peer_node"],
            "peer_port": "" if r["peer_port"] is None else str(r["peer_port"]), "severity": r["severity"],
            "object": r["object_key"], "source": "weft",
        }  # fmt: skip
        ends = r["cleared_at"] if r["kind"] == "cleared" and r["cleared_at"] else until.isoformat()
        out.append({
            "labels": {k: v for k, v in labels.items() if v},
            "annotations": {"summary": title(r), "description": r["message"] or r["name"],
                            "object": r["object"]},
            "startsAt": r["first_seen"],
            "endsAt": ends,
            "generatorURL": r["url"],
        })  # fmt: skip
    return out


def alertmanager_url(url: str) -> str:
    """The alerts endpoint of an Alertmanager base URL (``/api/v2/alerts`` added unless there)."""
    url = url.rstrip("/")
    return url if url.endswith(ALERTMANAGER_PATH) else url + ALERTMANAGER_PATH


def syslog_url(url: str) -> str:
    """A target's ``udp://host:port`` / ``tcp://host:port`` as ``outbound``'s syslog address."""
    return url if url.startswith(syslog.SCHEMES) else f"syslog+{url}"


def syslog_line(
    *, code: str, severity: str, at: datetime, message: str, fabric: str, node: str = "", port=None,
    object_key: str = "",
) -> str:  # fmt: skip
    """One RFC 5424 message for an event or an alarm notice (module docstring)."""
    return syslog.format_message(
        severity=SYSLOG_SEVERITY.get(severity, syslog.NOTICE), facility=settings.WEFT_SYSLOG_FACILITY,
        at=at, hostname=settings.WEFT_SYSLOG_HOSTNAME or socket.gethostname(), app_name="weft",
        msgid=code, sd_id=settings.WEFT_SYSLOG_SD_ID, msg=message,
        params={"fabric": fabric, "node": node, "port": port, "severity": severity, "code": code,
                "object": object_key},
    )  # fmt: skip


def _queue_http(target: AlertTarget, records: list[dict[str, Any]], *, reason: str, event: str,
                source: str, now: datetime, send_on_commit: bool = True) -> WebhookDelivery | None:  # fmt: skip
    """Queue one delivery of ``records`` to an HTTP target in its format."""
    key = target.delivery_key
    if target.kind == AlertTargetKind.WEBHOOK:
        data = (
            {"alarm": records[0]}
            if len(records) == 1 and not reason
            else {"alarms": records, "reason": reason}
        )
        return queue_webhook(target.url, target.secret, event, data, source=source, target=key, now=now,
                             send_on_commit=send_on_commit)  # fmt: skip
    if target.kind == AlertTargetKind.SLACK:
        body = slack_body(records, reason)
        url = target.url
    else:
        body = alertmanager_alerts(records, now)
        url = alertmanager_url(target.url)
    text = json.dumps(body, cls=DjangoJSONEncoder, separators=(",", ":"))
    return queue_message(url, target.secret, event, text, source=source, target=key, now=now,
                         send_on_commit=send_on_commit)  # fmt: skip


# -- the engine's side -------------------------------------------------------------------------
def enabled_targets() -> list[AlertTarget]:
    """The enabled targets (one query; the engine reads them once per evaluation)."""
    return list(AlertTarget.objects.filter(enabled=True))


def notifications_for(targets: list[AlertTarget], kind: str, alarm: Alarm) -> list[Notification]:
    """Outbox rows of an alarm raise or clear for the HTTP targets it reaches."""
    return [
        Notification(target=t, kind=kind, alarm=alarm)
        for t in targets
        if t.kind in HTTP_KINDS and t.accepts(alarm.severity)
    ]


def queue_syslog(targets: list[AlertTarget], events: list[Event], cleared: list[Alarm], fabric) -> int:
    """Queue, in the caller's transaction, one delivery per syslog target with a line for each of
    ``events`` and each of the ``cleared`` alarms that reach its severity. Returns the deliveries."""
    targets = [t for t in targets if t.kind == AlertTargetKind.SYSLOG]
    if not targets or not (events or cleared):
        return 0
    fabric_name = fabric.name if fabric is not None else "system"
    prefetch_related_objects(events, "node", "port")
    items: list[tuple[str, str]] = []  # (severity, line)
    for e in events:
        node = e.node if e.node_id else None
        items.append((e.severity, syslog_line(
            code=e.code, severity=e.severity, at=e.at, message=e.message or registry.get(e.code).name,
            fabric=fabric_name, node=(node.name or node.description) if node else "",
            port=e.port.port_num if e.port_id else None, object_key=e.object_key,
        )))  # fmt: skip
    for a in cleared:
        r = alarm_record(a, "cleared")
        items.append((a.severity, syslog_line(
            code="alarm.cleared", severity=Severity.INFO, at=a.cleared_at or timezone.now(),
            message=f"{title(r)}: {a.clear_reason}", fabric=fabric_name, node=r["node"], port=r["port"],
            object_key=a.object_key,
        )))  # fmt: skip
    n = 0
    for t in targets:
        lines = [line for sev, line in items if t.accepts(sev)]
        if lines:
            queue_message(syslog_url(t.url), "", "events", "\n".join(lines), target=t.delivery_key,
                          source=f"fabric:{fabric.pk}" if fabric is not None else "",
                          content_type="text/syslog")  # fmt: skip
            n += 1
    return n


# -- sending ------------------------------------------------------------------------------------
def send_pending_targets(now: datetime | None = None) -> dict[str, int]:
    """Send the pending target rows of the outbox, per target and urgency class with the storm
    control and rate limit of mail (``events.notify``). Returns ``{"messages", "single",
    "summaries", "held", "dropped"}`` (dropped: rows of a target disabled since they were queued)."""
    now = now or timezone.now()
    result = {"messages": 0, "single": 0, "summaries": 0, "held": 0, "dropped": 0}
    with single_instance("events.alerting", 300) as mine:
        if not mine:
            return result
        pending = list(
            Notification.objects.filter(status=NotificationStatus.PENDING, target__isnull=False)
            .select_related("target", "alarm__fabric", "alarm__node", "alarm__port")
            .order_by("id")
        )
        by_target: dict[int, list[Notification]] = defaultdict(list)
        for n in pending:
            by_target[n.target_id].append(n)
        storm = settings.WEFT_MAIL_STORM_THRESHOLD
        window = timedelta(seconds=settings.WEFT_MAIL_RATE_WINDOW_S)
        for rows in by_target.values():
            target = rows[0].target
            if not target.enabled or target.kind not in HTTP_KINDS:
                Notification.objects.filter(pk__in=[n.pk for n in rows]).update(
                    status=NotificationStatus.FAILED, error="target disabled"
                )
                result["dropped"] += len(rows)
                continue
            for critical in (True, False):
                items = [n for n in rows if n.alarm_id and is_critical(n) == critical]
                if not items:
                    continue
                limit = settings.WEFT_MAIL_CRITICAL_RATE_LIMIT if critical else settings.WEFT_MAIL_RATE_LIMIT
                sent = (
                    Notification.objects.filter(target=target, sent_at__gte=now - window)
                    .filter(CRITICAL_Q if critical else ~CRITICAL_Q)
                    .exclude(mail_id="")
                    .values("mail_id")
                    .distinct()
                    .count()
                )
                budget = limit - sent
                if budget <= 0:
                    result["held"] += len(items)
                    continue
                reason = storm_reason(items, budget, storm, now)
                if reason:
                    reason.update(
                        limit=limit, window_s=window.total_seconds(), critical=critical, storm=storm
                    )
                    _send(target, items, _target_words(summary_reason(reason)), now)
                    result["summaries"] += 1
                    result["messages"] += 1
                else:
                    for n in items:
                        _send(target, [n], "", now)
                        result["single"] += 1
                        result["messages"] += 1
    return result


def _target_words(text: str) -> str:
    """Mail's summary reason in a target's words (one rule, ``events.notify.summary_reason``)."""
    for old, new in (("mail rate limit", "rate limit"), ("mails per", "messages per"),
                     ("to one recipient", "to one target"), ("mail(s)", "message(s)")):  # fmt: skip
        text = text.replace(old, new)
    return text


def _send(target: AlertTarget, items: list[Notification], reason: str, now: datetime) -> None:
    records = [
        alarm_record(n.alarm, "cleared" if n.kind == NotificationKind.CLEARED else "raised") for n in items
    ]
    event = "alarm.summary" if reason else f"alarm.{records[0]['kind']}"
    source = f"alarm:{items[0].alarm_id}" if len(items) == 1 else ""
    with transaction.atomic():
        row = _queue_http(target, records, reason=reason, event=event, source=source, now=now)
        Notification.objects.filter(pk__in=[n.pk for n in items]).update(
            status=NotificationStatus.SUMMARISED if reason else NotificationStatus.SENT,
            sent_at=now, mail_id=str(row.pk), subject=(reason or title(records[0]))[:300],
        )  # fmt: skip


def resend_firing(now: datetime | None = None) -> int:
    """Re-post every open alarm to each enabled Alertmanager target it reaches (one delivery per
    target, ``event`` ``alarm.resend``), so Alertmanager keeps them firing. Returns deliveries."""
    now = now or timezone.now()
    targets = [t for t in enabled_targets() if t.kind == AlertTargetKind.ALERTMANAGER]
    if not targets:
        return 0
    alarms = list(Alarm.objects.open().select_related("fabric", "node", "port"))
    n = 0
    for t in targets:
        records = [alarm_record(a, "raised") for a in alarms if t.accepts(a.severity)]
        if records:
            body = json.dumps(alertmanager_alerts(records, now), separators=(",", ":"))
            queue_message(
                alertmanager_url(t.url), t.secret, "alarm.resend", body, target=t.delivery_key, now=now
            )
            n += 1
    return n


def test_record(now: datetime) -> dict[str, Any]:
    """The made-up alarm a "send test" carries (Info, fabric ``test``, alertname ``weft.test``)."""
    return {
        "kind": "raised", "id": 0, "code": "weft.test", "name": "Test message from Weft",
        "severity": Severity.INFO, "state": "active", "fabric": "test", "node": "", "port": None,
        "peer_node": "", "peer_port": None,
        "object_type": "", "object_key": "test", "object": "alert target test",
        "message": "A test of this alert target, sent from Weft's alert targets page or API.",
        "count": 1, "first_seen": now.isoformat(), "last_seen": now.isoformat(), "cleared_at": None,
        "url": f"{base_url()}/alert-targets/",
    }  # fmt: skip


def send_test(target: AlertTarget, now: datetime | None = None, *, user=None) -> WebhookDelivery:
    """Send a test message to ``target`` now (one attempt, in this process, whether enabled or
    not) and return its delivery row (``status``, ``response_code``, ``last_error``); a failed
    attempt is retried by ``outbound`` like any other. Audited (``alert_target.test``, ``user``)
    in the transaction that queues it: no audit entry, nothing sent."""
    now = now or timezone.now()
    record = test_record(now)
    with transaction.atomic():
        audit.record("alert_target.test", target, {"kind": target.kind}, user=user)
        if target.kind == AlertTargetKind.SYSLOG:
            line = syslog_line(code="weft.test", severity=Severity.INFO, at=now, message=record["message"],
                               fabric="test", object_key="test")  # fmt: skip
            row = queue_message(syslog_url(target.url), "", "alarm.test", line, target=target.delivery_key,
                                content_type="text/syslog", now=now, send_on_commit=False)  # fmt: skip
        else:
            row = _queue_http(target, [record], reason="", event="alarm.test", source="test", now=now,
                              send_on_commit=False)  # fmt: skip
    deliver(row.pk, now=now)  # here, not by a worker: the page and the API show the answer
    row.refresh_from_db()
    return row


def deliveries(target: AlertTarget, limit: int = 50):
    """The target's delivery log, newest first (``outbound.models.WebhookDelivery``)."""
    return WebhookDelivery.objects.filter(target=target.delivery_key).order_by("-id")[:limit]
