"""Choices shared by events, alarms and the event-type registry (no model imports: importing this
module never loads Django models, so an app's ``event_types`` module can use it anywhere)."""

from __future__ import annotations

from django.db import models


class Severity(models.TextChoices):
    """Event and alarm severities, lowest first (as UFM: Info, Warning, Minor, Critical)."""

    INFO = "info", "Info"
    WARNING = "warning", "Warning"
    MINOR = "minor", "Minor"
    CRITICAL = "critical", "Critical"


#: Severity → rank (0 lowest), for sorting and "at least" filters.
SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.MINOR: 2, Severity.CRITICAL: 3}


class Category(models.TextChoices):
    """What an event type concerns; each app's types use its own category."""

    TOPOLOGY = "topology", "Topology"
    COUNTERS = "counters", "Port counters"
    SM = "sm", "Subnet manager"
    HEALTH = "health", "Health"
    POOLS = "pools", "Pools"
    SCHEDULER = "scheduler", "Scheduler"
    DEVICES = "devices", "Ethernet devices"
    SYSTEM = "system", "System"


class AlarmState(models.TextChoices):
    """Life of an alarm: active → acknowledged (by an Operator) → cleared (by an event, a
    condition rule, its TTL or an Operator)."""

    ACTIVE = "active", "Active"
    ACKNOWLEDGED = "acknowledged", "Acknowledged"
    CLEARED = "cleared", "Cleared"


class ClearScope(models.TextChoices):
    """Which open alarms an event of a type that ``clears`` other codes closes."""

    KEY = "key", "Same object key"
    FABRIC = "fabric", "Whole fabric"
