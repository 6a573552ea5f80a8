"""Events: things that happened on a fabric (topology changes, counter thresholds, SM moves...).

An event names the object it concerns both by foreign key (while the object exists) and by a
natural key and text (kept after the object is deleted, e.g. a removed node).
Alarms are open conditions raised by events (``Alarm``); what each event type does is set by
its ``EventPolicy`` (defaults in ``events.registry``). The alarm engine (``events.engine``) keeps
per-object streaks in ``ConditionState`` and queues mails in ``Notification`` (the outbox that
storm control and rate limits work on). Health reports are stored as ``HealthReport``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from . import registry
from .choices import SEVERITY_RANK, AlarmState, Category, Severity

__all__ = ["SEVERITY_RANK", "AlarmState", "Category", "Severity"]  # re-exported for existing imports


class Event(models.Model):
    """One occurrence.

    ``code`` is a stable dotted identifier (``link.down``, ``node.added``, ``sm.master_changed``);
    ``object_type`` is one of ``fabric``, ``node``, ``port``, ``link``, ``sm``, ``gpu``, ``pool``, ``job``;
    ``object_key`` its natural key (node GUID, ``"<node guid>/<port>"``, a link as
    ``"<guid>/<port>-<guid>/<port>"``), ``object_repr`` a human description; ``tenant_id`` the
    tenant whose data it carries (None: fabric-wide).
    """

    fabric = models.ForeignKey(
        "fabric.Fabric", null=True, blank=True, on_delete=models.CASCADE, related_name="events"
    )
    at = models.DateTimeField(db_index=True)
    code = models.CharField(max_length=64, db_index=True)
    severity = models.CharField(max_length=8, choices=Severity.choices, default=Severity.INFO, db_index=True)
    category = models.CharField(
        max_length=12, choices=Category.choices, default=Category.SYSTEM, db_index=True
    )
    object_type = models.CharField(max_length=16, blank=True, db_index=True)
    object_key = models.CharField(max_length=120, blank=True, db_index=True)
    object_repr = models.CharField(max_length=300, blank=True)
    node = models.ForeignKey(
        "fabric.Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
    )
    port = models.ForeignKey(
        "fabric.Port", null=True, blank=True, on_delete=models.SET_NULL, related_name="events"
    )
    message = models.TextField()
    details = models.JSONField(default=dict, blank=True)
    #: Set once the rules engine has applied the policy of this event (raise/clear alarms, mail).
    evaluated = models.BooleanField(default=False)
    #: The tenant (``pools.Tenant`` id) whose data the event carries (a job's, an allocation's),
    #: written by the service that records it; NULL for a fabric-wide event. Tenant users see
    #: the fabric-wide events and their tenants' only (``events.scoping``). A plain id, not a
    #: foreign key: the events app sits below pools, and an event outlives its tenant.
    tenant_id = models.BigIntegerField(null=True, blank=True, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["fabric", "-at"]),
            models.Index(fields=["fabric", "id"], condition=models.Q(evaluated=False), name="event_pending"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.severity} {self.code} {self.object_repr}"


def severity_rank() -> models.Case:
    """SQL expression of a row's ``severity`` rank (Info 0 … Critical 3, :data:`SEVERITY_RANK`;
    -1 for an unknown value), for sorting by severity instead of the stored strings' order."""
    return models.Case(
        *(models.When(severity=s.value, then=models.Value(k)) for s, k in SEVERITY_RANK.items()),
        default=models.Value(-1),
        output_field=models.IntegerField(),
    )


class AlarmQuerySet(models.QuerySet):
    def open(self):
        """Alarms not cleared yet (active or acknowledged)."""
        return self.exclude(state=AlarmState.CLEARED)

    def active(self):
        return self.filter(state=AlarmState.ACTIVE)

    def by_severity(self):
        """Most severe first (Critical, Minor, Warning, Info: ``Severity`` order, not the
        alphabetical order of the stored values), then most recent (``last_seen``, then id)."""
        return self.alias(severity_rank=severity_rank()).order_by("-severity_rank", "-last_seen", "-id")

    def counts_by_severity(self) -> dict[str, int]:
        """``{severity: count}`` over this queryset, every severity present (0 when none)."""
        out = {s.value: 0 for s in Severity}
        for row in self.values("severity").annotate(n=models.Count("id")):
            out[row["severity"]] = row["n"]
        return out


class Alarm(models.Model):
    """An open (or past) condition of one event type on one object.

    Keyed by ``(fabric, code, object_key)``: raising the same condition again updates the open
    alarm (``last_seen``, ``count``, severity) instead of adding one; at most one alarm per key
    is open (a partial unique constraint). ``ttl_s`` = 0 keeps the alarm until a clearing event
    or the rules engine clears it; otherwise it clears itself ``ttl_s`` seconds after
    ``last_seen``. ``count`` is the number of raising events.
    """

    fabric = models.ForeignKey(
        "fabric.Fabric", null=True, blank=True, on_delete=models.CASCADE, related_name="alarms"
    )
    code = models.CharField(max_length=64, db_index=True)
    severity = models.CharField(max_length=8, choices=Severity.choices, db_index=True)
    category = models.CharField(max_length=12, choices=Category.choices, default=Category.SYSTEM)
    state = models.CharField(
        max_length=12, choices=AlarmState.choices, default=AlarmState.ACTIVE, db_index=True
    )
    object_type = models.CharField(max_length=16, blank=True)
    object_key = models.CharField(max_length=120, blank=True, db_index=True)
    object_repr = models.CharField(max_length=300, blank=True)
    node = models.ForeignKey(
        "fabric.Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="alarms"
    )
    port = models.ForeignKey(
        "fabric.Port", null=True, blank=True, on_delete=models.SET_NULL, related_name="alarms"
    )
    message = models.TextField(blank=True)
    details = models.JSONField(default=dict, blank=True)
    first_seen = models.DateTimeField(db_index=True)
    last_seen = models.DateTimeField()
    count = models.PositiveIntegerField(default=1)
    ttl_s = models.PositiveIntegerField(default=0, help_text="0 = until cleared")
    raised_event = models.ForeignKey(
        Event, null=True, blank=True, on_delete=models.SET_NULL, related_name="raised_alarms"
    )
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    cleared_at = models.DateTimeField(null=True, blank=True)
    cleared_event = models.ForeignKey(
        Event, null=True, blank=True, on_delete=models.SET_NULL, related_name="cleared_alarms"
    )
    cleared_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    clear_reason = models.CharField(max_length=200, blank=True)
    #: the tenant whose data the alarm's message and object carry: its raising event's
    #: ``tenant_id`` (a ``partition.drift`` of a tenant's pool; ``accounts.scoping.STAFF_ONLY`` when
    #: several tenants' data meet in it); None: fabric-wide. Read through ``events.scoping``.
    tenant_id = models.BigIntegerField(null=True, blank=True, db_index=True)

    objects = AlarmQuerySet.as_manager()

    class Meta:
        ordering = ["-last_seen", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["fabric", "code", "object_key"],
                condition=~models.Q(state="cleared"),
                name="alarm_open_unique_per_object",
            )
        ]
        indexes = [models.Index(fields=["fabric", "state"])]

    def __str__(self) -> str:
        return f"{self.get_severity_display()} {self.code} {self.object_repr} ({self.state})"

    def get_absolute_url(self) -> str:
        return reverse("events:alarm", args=[self.pk])

    @property
    def name(self) -> str:
        return registry.get(self.code).name

    @property
    def is_open(self) -> bool:
        return self.state != AlarmState.CLEARED

    @property
    def state_text(self) -> str:
        """The state as the pages show it, with who did it: "Acknowledged by olga"; "Cleared by
        olga" only when a user cleared it; cleared by an event, a rule or its TTL after an
        acknowledgement: "Cleared (acknowledged by olga)" (it read "Cleared by olga")."""
        label = self.get_state_display()
        if self.state == AlarmState.ACKNOWLEDGED and self.acknowledged_by_id:
            return f"{label} by {self.acknowledged_by.username}"
        if self.state == AlarmState.CLEARED:
            if self.cleared_by_id:
                return f"{label} by {self.cleared_by.username}"
            if self.acknowledged_by_id:
                return f"{label} (acknowledged by {self.acknowledged_by.username})"
        return label


class EventPolicy(models.Model):
    """What Weft does with events of one type (one row per catalogue code, editable by Admins).

    ``threshold`` (unit per type, see ``events.registry``) and ``consecutive`` (sweeps over the
    threshold before raising) apply to condition types. ``email`` mails recipients when an
    alarm opens (or, for event-only types, for each event); ``notify_clear`` also mails when it
    clears; ``digest`` lists the type in the daily digest. Recipients: explicit addresses,
    users, and groups (e.g. the ``Operator`` role group); with none, ``settings.WEFT_ALERT_EMAILS``.
    """

    code = models.CharField(max_length=64, unique=True)
    enabled = models.BooleanField(default=True)
    severity = models.CharField(max_length=8, choices=Severity.choices, default=Severity.INFO)
    threshold = models.FloatField(null=True, blank=True)
    consecutive = models.PositiveSmallIntegerField(default=1)
    #: clear hysteresis of a condition rule (``events.registry.EventType``): the alarm clears after
    #: this many evaluations in a row at or below ``threshold × clear_factor``
    clear_consecutive = models.PositiveSmallIntegerField(default=1)
    clear_factor = models.FloatField(default=1.0)
    ttl_s = models.PositiveIntegerField(
        default=0, help_text="alarm lifetime after last raise; 0 = until cleared"
    )
    raise_alarm = models.BooleanField(default=False)
    email = models.BooleanField(default=False)
    notify_clear = models.BooleanField(default=True)
    digest = models.BooleanField(default=False)
    recipient_emails = models.TextField(blank=True, help_text="addresses, comma or newline separated")
    recipient_users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="+")
    recipient_groups = models.ManyToManyField("auth.Group", blank=True, related_name="+")
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["code"]
        verbose_name_plural = "event policies"

    def __str__(self) -> str:
        return self.code

    def get_absolute_url(self) -> str:
        return reverse("events:eventpolicy", args=[self.pk])

    @property
    def name(self) -> str:
        return registry.get(self.code).name

    @property
    def category(self) -> str:
        return registry.get(self.code).category


class ConditionState(models.Model):
    """Per-object streak of a condition rule (e.g. congestion over threshold for N sweeps).

    ``over``/``under`` count consecutive evaluations with the condition true/false; ``value``
    is the last measured value (unit of the rule's threshold).
    """

    fabric = models.ForeignKey("fabric.Fabric", on_delete=models.CASCADE, related_name="+")
    code = models.CharField(max_length=64)
    object_key = models.CharField(max_length=120)
    over = models.PositiveIntegerField(default=0)
    under = models.PositiveIntegerField(default=0)
    value = models.FloatField(null=True, blank=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["fabric", "code", "object_key"], name="condition_state_unique")
        ]

    def __str__(self) -> str:
        return f"{self.code} {self.object_key} over={self.over} under={self.under}"


class NotificationKind(models.TextChoices):
    RAISED = "raised", "Alarm raised"
    CLEARED = "cleared", "Alarm cleared"
    EVENT = "event", "Event"


class NotificationStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SENT = "sent", "Sent"
    SUMMARISED = "summarised", "Sent in a summary"
    FAILED = "failed", "Failed"


class AlertTargetKind(models.TextChoices):
    """Payload formats of an alert target (``events.alerting``)."""

    WEBHOOK = "webhook", "Signed JSON webhook"
    SLACK = "slack", "Slack-compatible incoming webhook"
    ALERTMANAGER = "alertmanager", "Prometheus Alertmanager (/api/v2/alerts)"
    SYSLOG = "syslog", "Syslog (RFC 5424, UDP or TCP)"


def target_url_error(kind: str, url: str) -> str | None:
    """Why ``url`` is not a receiver address for a target of ``kind`` (None when it is): HTTP
    kinds need an ``http://`` or ``https://`` URL with a host; syslog ``udp://host:port`` or
    ``tcp://host:port``."""
    from urllib.parse import urlsplit

    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url.strip()):
        # urlsplit drops tabs and line breaks silently: the check passed a URL that every send
        # then failed on (http.client refuses control characters), retried until given up
        return "a URL without spaces or control characters (encode a space as %20)"
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        return f"not a URL: {exc}"
    if kind == AlertTargetKind.SYSLOG:
        if parts.scheme not in ("udp", "tcp") or not parts.hostname or not port:
            return "a syslog receiver is udp://host:port or tcp://host:port"
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "an http:// or https:// URL with a host"
    return None


class AlertTarget(models.Model):
    """A receiver of alarms beside mail (issue 26), managed by Admins.

    ``kind``: the payload format (:class:`AlertTargetKind`); ``url``: for the HTTP kinds the
    receiver's URL (Alertmanager: its base URL, ``/api/v2/alerts`` is added), for syslog
    ``udp://host:port`` or ``tcp://host:port``; ``secret``: the HMAC-SHA256 key of
    ``X-Weft-Signature`` (HTTP kinds); ``min_severity``: alarms (syslog: events) below it are not
    sent; ``enabled``. Alarm raises and clears are queued as :class:`Notification` rows (storm
    control as mail) and sent through ``outbound``; syslog gets every event
    (``events.alerting``).
    """

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=12, choices=AlertTargetKind.choices)
    url = models.CharField(
        max_length=500, help_text="http(s)://… ; syslog: udp://host:port or tcp://host:port"
    )
    secret = models.CharField(max_length=200, blank=True, help_text="HMAC-SHA256 key of X-Weft-Signature")
    min_severity = models.CharField(max_length=8, choices=Severity.choices, default=Severity.WARNING)
    enabled = models.BooleanField(default=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"

    def get_absolute_url(self) -> str:
        return reverse("events:alerttarget", args=[self.pk])

    @property
    def delivery_key(self) -> str:
        """The ``target`` of its rows in ``outbound``'s delivery log."""
        return f"alert-target:{self.pk}"

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        error = target_url_error(self.kind, self.url or "")
        if error:
            raise ValidationError({"url": error})

    def accepts(self, severity: str) -> bool:
        """Whether an alarm or event of ``severity`` reaches this target."""
        return SEVERITY_RANK.get(severity, 0) >= SEVERITY_RANK.get(self.min_severity, 0)


class Notification(models.Model):
    """Outbox of alert mails and alert-target messages, one row per (recipient or target, alarm
    or event, kind).

    Rows are written in the rules engine's transaction, so a notification is never lost when
    the mail server or a receiver is down; ``events.notify.send_pending`` sends the mail and
    ``events.alerting.send_pending_targets`` the targets' messages, with the same storm control
    and rate limit per recipient or target. ``mail_id`` groups the rows sent in one message (for
    a target: the ``outbound`` delivery id).
    """

    created = models.DateTimeField(auto_now_add=True, db_index=True)
    recipient = models.EmailField(blank=True)
    target = models.ForeignKey(
        AlertTarget, null=True, blank=True, on_delete=models.CASCADE, related_name="notifications"
    )
    kind = models.CharField(max_length=8, choices=NotificationKind.choices)
    alarm = models.ForeignKey(Alarm, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    event = models.ForeignKey(Event, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(
        max_length=10, choices=NotificationStatus.choices, default=NotificationStatus.PENDING, db_index=True
    )
    sent_at = models.DateTimeField(null=True, blank=True, db_index=True)
    mail_id = models.CharField(max_length=32, blank=True, db_index=True)
    subject = models.CharField(max_length=300, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["created", "id"]

    def __str__(self) -> str:
        return f"{self.kind} to {self.recipient} ({self.status})"


class HealthReport(models.Model):
    """One run of the fabric health check (``events.health``).

    ``findings`` = list of ``{"check", "severity", "object_type", "object_key", "object_repr",
    "message", "details"}``; ``summary`` = ``{check: count}``; ``status`` the worst severity
    found (``ok`` when nothing was found).
    """

    fabric = models.ForeignKey("fabric.Fabric", on_delete=models.CASCADE, related_name="health_reports")
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    trigger = models.CharField(max_length=10, default="manual")  # manual | scheduled
    status = models.CharField(max_length=8, default="ok")
    duration_s = models.FloatField(default=0)
    summary = models.JSONField(default=dict, blank=True)
    findings = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"Health {self.fabric} {self.created:%Y-%m-%d %H:%M} {self.status}"

    def get_absolute_url(self) -> str:
        return reverse("events:healthreport", args=[self.pk])
