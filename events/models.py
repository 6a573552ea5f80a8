"""Events: things that happened on a fabric (topology changes, counter thresholds, SM moves...).

An event names the object it concerns both by foreign key (while the object exists) and by a
natural key and text (kept after the object is deleted, e.g. a removed node).
The alarms issue extends this app with Alarm and EventPolicy.
"""

from __future__ import annotations

from django.db import models


class Severity(models.TextChoices):
    """Event and alarm severities, lowest first (as UFM: Info, Warning, Minor, Critical)."""

    INFO = "info", "Info"
    WARNING = "warning", "Warning"
    MINOR = "minor", "Minor"
    CRITICAL = "critical", "Critical"


SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.MINOR: 2, Severity.CRITICAL: 3}


class Category(models.TextChoices):
    TOPOLOGY = "topology", "Topology"
    COUNTERS = "counters", "Port counters"
    SM = "sm", "Subnet manager"
    HEALTH = "health", "Health"
    POOLS = "pools", "Pools"
    SCHEDULER = "scheduler", "Scheduler"
    SYSTEM = "system", "System"


class Event(models.Model):
    """One occurrence.

    ``code`` is a stable dotted identifier (``link.down``, ``node.added``, ``sm.master_changed``);
    ``object_type`` is one of ``fabric``, ``node``, ``port``, ``link``, ``sm``, ``pool``, ``job``;
    ``object_key`` its natural key (node GUID, ``"<node guid>/<port>"``, a link as
    ``"<guid>/<port>-<guid>/<port>"``), ``object_repr`` a human description.
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

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["fabric", "-at"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.severity} {self.code} {self.object_repr}"
