"""Routing snapshots: the unicast LinearForwardingTables of a fabric's switches as read at one time.

One :class:`RoutingSnapshot` per distinct set of tables (a read that finds the same tables only
moves ``checked``), one :class:`SwitchRoute` row per switch with its table as bytes (one byte per
destination LID, IBTA Vol 1 14.2.5.10; 255 = unassigned) and a digest of it. The one writer is
``routing.services.collect.collect_routes``.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class RouteSource(models.TextChoices):
    """How the tables were read."""

    MAD = "mad", "SMPs (lftpoll)"
    DUMP_LFTS = "dump_lfts", "dump_lfts"


class RoutingSnapshot(models.Model):
    """The forwarding tables of ``fabric`` from ``taken`` (first read) to ``checked`` (last read
    that found them unchanged). ``digest``: of every switch's GUID and table digest (sorted);
    ``moved``: against the previous snapshot, ``{"lids": total moved entries, "switches":
    {node GUID: moved LIDs}}`` (empty for the first)."""

    fabric = models.ForeignKey("fabric.Fabric", on_delete=models.CASCADE, related_name="routing_snapshots")
    taken = models.DateTimeField(default=timezone.now, db_index=True)
    checked = models.DateTimeField(default=timezone.now)
    source = models.CharField(max_length=12, choices=RouteSource.choices)
    reason = models.CharField(max_length=16, blank=True)
    digest = models.CharField(max_length=32)
    switches = models.PositiveIntegerField(default=0)
    duration_s = models.FloatField(default=0.0)
    moved = models.JSONField(default=dict, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    #: ``routing.report.routing_report`` of these tables over the topology of discovery
    #: ``report_topology`` (written by ``routing.services.current.routing_report_for``; kept on the
    #: latest snapshot only: a few MB on a Selene-size fabric)
    report = models.JSONField(default=dict, blank=True)
    report_topology = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-taken", "-pk"]
        indexes = [models.Index(fields=["fabric", "-taken"], name="routing_snap_fabric_taken")]

    def __str__(self) -> str:
        return f"routes of {self.fabric_id} at {self.taken:%Y-%m-%d %H:%M:%S} ({self.switches} switches)"


class SwitchRoute(models.Model):
    """One switch's unicast LFT in a snapshot: ``lft[dlid]`` = out port (0: the switch itself,
    255: unassigned); ``lid`` the switch's LID when read; ``digest`` 16 hex digits (BLAKE2b-64)."""

    snapshot = models.ForeignKey(RoutingSnapshot, on_delete=models.CASCADE, related_name="switch_routes")
    node_guid = models.CharField(max_length=18)
    lid = models.PositiveIntegerField(null=True, blank=True)
    lft = models.BinaryField()
    digest = models.CharField(max_length=16)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["snapshot", "node_guid"], name="routing_switch_once")]

    def __str__(self) -> str:
        return f"LFT of {self.node_guid} ({len(self.lft)} entries)"
