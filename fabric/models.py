"""The fabric model: one IB subnet, its nodes, ports, links, SMs and discoveries.

Semantics follow the IBTA spec, Vol 1 ch. 14 (NodeInfo, PortInfo, SMInfo), and what
``ibnetdiscover(8)`` reports. GUIDs are stored canonical (``fabric.guid.normalize_guid``).
Hosts group the CAs of one machine (by the host name in the CA's NodeDescription, e.g.
``"host017 mlx5_3"``); GPU pools and tenants (``pools`` app) attach to hosts.
"""

from __future__ import annotations

from django.db import models
from django.urls import reverse
from django.utils import timezone

from .choices import DiscoverySource, DiscoveryStatus, NodeType, PhysState, PortState, SMState, Tier
from .querysets import (
    FabricQuerySet,
    FabricScopedQuerySet,
    HostQuerySet,
    LinkQuerySet,
    NodeQuerySet,
    PortQuerySet,
)

#: Why a fabric without live access is not discovered or polled from this host (``.format(name=...)``);
#: the API answers it with a 409, the pages and commands show it.
NO_LIVE_ACCESS = (
    "Fabric {name} has no live access configured (set local_hca, ca_name, or tool_env for a lab): it was "
    "imported from a file, and a live discovery from this host would describe another fabric."
)


class Fabric(models.Model):
    """One IB subnet and how to reach it for live discovery and polling.

    ``ca_name``/``ca_port`` select the local HCA port the tools use (``-C``/``-P`` of the diags);
    empty means the tools' default. ``tool_env`` holds extra environment variables for the tools
    (e.g. ``{"LD_PRELOAD": ".../libumad2sim.so", "SIM_HOST": "..."}`` for a lab fabric).
    """

    name = models.SlugField(max_length=64, unique=True)
    description = models.CharField(max_length=200, blank=True)
    subnet_prefix = models.CharField(max_length=18, blank=True, help_text="e.g. 0xfe80000000000000")
    ca_name = models.CharField(max_length=64, blank=True, help_text="local HCA for the diags (-C)")
    ca_port = models.PositiveSmallIntegerField(null=True, blank=True, help_text="local HCA port (-P)")
    tool_env = models.JSONField(default=dict, blank=True)
    local_hca = models.BooleanField(
        default=False,
        help_text="reach this fabric with the diags through this host's default HCA port",
    )
    discovery_timeout_s = models.FloatField(default=300.0)
    discovery_enabled = models.BooleanField(default=True, help_text="periodic live discovery")
    polling_enabled = models.BooleanField(default=True, help_text="periodic counter sweeps")
    master_sm_guid = models.CharField(max_length=18, blank=True)
    master_sm_lid = models.PositiveIntegerField(null=True, blank=True)
    #: consecutive SM polls without a master answer (``fabric.services.sm``; 0 when one answers)
    master_sm_missed = models.PositiveIntegerField(default=0, editable=False)
    last_discovery = models.ForeignKey(
        "Discovery", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)

    objects = models.Manager.from_queryset(FabricQuerySet)()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("fabric:fabric", args=[self.pk])

    @property
    def has_live_access(self) -> bool:
        """True when the diags can reach this fabric from this host: the default HCA
        (``local_hca``), a named one (``ca_name``) or a lab's environment (``tool_env``).
        A fabric imported from a file has none: a live discovery from this host would describe
        another fabric."""
        return bool(self.local_hca or self.ca_name or self.tool_env)


class Host(models.Model):
    """A machine with one or more CAs on the fabric (from the CA NodeDescription host name)."""

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="hosts")
    name = models.CharField(max_length=128)

    objects = models.Manager.from_queryset(HostQuerySet)()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["fabric", "name"], name="host_unique_per_fabric")]

    def __str__(self) -> str:
        return self.name


class Node(models.Model):
    """A switch, CA or router (IBTA NodeInfo). ``lid`` is the switch's port-0 LID (switches only)."""

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="nodes")
    node_guid = models.CharField(max_length=18, db_index=True)
    node_type = models.CharField(max_length=8, choices=NodeType.choices)
    system_image_guid = models.CharField(max_length=18, blank=True)
    vendor_id = models.PositiveIntegerField(null=True, blank=True)
    device_id = models.PositiveIntegerField(null=True, blank=True)
    description = models.CharField(max_length=128, blank=True, db_index=True)
    num_ports = models.PositiveSmallIntegerField(default=0)
    enhanced_port0 = models.BooleanField(default=False)
    lid = models.PositiveIntegerField(null=True, blank=True, db_index=True)
    lmc = models.PositiveSmallIntegerField(default=0)
    tier = models.PositiveSmallIntegerField(choices=Tier.choices, default=Tier.UNKNOWN)
    host = models.ForeignKey(Host, null=True, blank=True, on_delete=models.SET_NULL, related_name="nodes")
    first_seen = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField(null=True, blank=True)
    #: set by a partial discovery that could not reach this node (a MAD behind it failed): the row
    #: is kept, not reported removed; cleared by the next discovery that reaches it
    unreachable_since = models.DateTimeField(null=True, blank=True, db_index=True)
    #: 64-bit digest of this node's rows as the last complete ingest left them (its own stored
    #: columns, its ports', the links at its ports): a rediscovery whose parse gives the same digest
    #: leaves them untouched without reading them (``fabric.services.ingest``). None: unknown (rows
    #: written by another writer since, e.g. a notice refresh), so the next discovery diffs them.
    digest = models.BigIntegerField(null=True, blank=True, editable=False)

    objects = models.Manager.from_queryset(NodeQuerySet)()

    class Meta:
        ordering = ["fabric", "node_type", "description"]
        constraints = [
            models.UniqueConstraint(fields=["fabric", "node_guid"], name="node_guid_unique_per_fabric")
        ]

    def __str__(self) -> str:
        return self.description or self.node_guid

    def get_absolute_url(self) -> str:
        return reverse("fabric:node", args=[self.pk])

    @property
    def reachable(self) -> bool:
        """False while the last discoveries could not reach this node (``unreachable_since`` set)."""
        return self.unreachable_since is None


class Port(models.Model):
    """A physical port of a node (port 0 of a switch is its management port).

    ``lid`` is the port's LID (for switches all ports share the port-0 LID, kept on the node).
    ``width`` is the active link width (``"4x"``), ``speed`` the active lane speed (``"HDR"``),
    ``rate_gbps`` the derived data rate in Gb/s after line encoding (e.g. 4x HDR = 200).
    """

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="ports")
    port_num = models.PositiveSmallIntegerField()
    port_guid = models.CharField(max_length=18, blank=True, db_index=True)
    lid = models.PositiveIntegerField(null=True, blank=True, db_index=True)
    lmc = models.PositiveSmallIntegerField(default=0)
    state = models.PositiveSmallIntegerField(choices=PortState.choices, default=PortState.UNKNOWN)
    phys_state = models.PositiveSmallIntegerField(choices=PhysState.choices, default=PhysState.UNKNOWN)
    width = models.CharField(max_length=4, blank=True)
    speed = models.CharField(max_length=8, blank=True)
    rate_gbps = models.FloatField(null=True, blank=True)
    label = models.CharField(max_length=32, blank=True, help_text="external/split port label, e.g. '1/2'")

    objects = models.Manager.from_queryset(PortQuerySet)()

    class Meta:
        ordering = ["node", "port_num"]
        constraints = [models.UniqueConstraint(fields=["node", "port_num"], name="port_unique_per_node")]

    def __str__(self) -> str:
        return f"{self.node} [{self.port_num}]"

    def get_absolute_url(self) -> str:
        return reverse("fabric:port", args=[self.pk])

    @property
    def link(self) -> Link | None:
        """The link (cable) of this port at either end, or None when unconnected.

        Reads the reverse one-to-one accessors, so a port loaded with
        ``Port.objects.with_link()`` (``querysets.PORT_LINK_RELATED``) costs no query."""
        for accessor in ("link_as_a", "link_as_b"):
            try:
                return getattr(self, accessor)
            except Link.DoesNotExist:
                continue
        return None

    @property
    def remote(self) -> Port | None:
        """The port at the other end of this port's link, or None when unconnected (a cable
        looping back to the same node gives a port of this node)."""
        link = self.link
        if link is None:
            return None
        return link.port_b if link.port_a_id == self.pk else link.port_a


class Link(models.Model):
    """A cable between two ports; unordered and unique (``port_a`` has the lower port id).

    A cable looping back to the same switch is one link whose two ports are on one node.
    """

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="links")
    port_a = models.OneToOneField(Port, on_delete=models.CASCADE, related_name="link_as_a")
    port_b = models.OneToOneField(Port, on_delete=models.CASCADE, related_name="link_as_b")
    width = models.CharField(max_length=4, blank=True)
    speed = models.CharField(max_length=8, blank=True)
    rate_gbps = models.FloatField(null=True, blank=True)
    first_seen = models.DateTimeField(auto_now_add=True)

    objects = models.Manager.from_queryset(LinkQuerySet)()

    class Meta:
        ordering = ["fabric", "port_a"]

    def __str__(self) -> str:
        return f"{self.port_a} <-> {self.port_b}"


class SubnetManager(models.Model):
    """An SM seen on the fabric (IBTA SMInfo): GUID, LID, priority and state."""

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="subnet_managers")
    guid = models.CharField(max_length=18)
    lid = models.PositiveIntegerField(null=True, blank=True)
    priority = models.PositiveSmallIntegerField(default=0)
    state = models.PositiveSmallIntegerField(choices=SMState.choices, default=SMState.NOT_ACTIVE)
    activity_count = models.BigIntegerField(null=True, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)

    objects = models.Manager.from_queryset(FabricScopedQuerySet)()

    class Meta:
        ordering = ["fabric", "-state", "-priority"]
        constraints = [models.UniqueConstraint(fields=["fabric", "guid"], name="sm_unique_per_fabric")]

    def __str__(self) -> str:
        return f"SM {self.guid} lid {self.lid} {self.get_state_display()}"


class Discovery(models.Model):
    """One discovery or import: when, from where, how long, what it found and what changed.

    ``counts`` = ``{"switches", "cas", "routers", "links", "ports"}``; ``diff`` =
    ``{"added": {...}, "removed": {...}, "changed": {...}}`` lists of natural keys;
    ``warnings`` = list of ``{"line": n, "message": "..."}``.
    """

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="discoveries")
    started = models.DateTimeField(default=timezone.now, db_index=True)
    duration_s = models.FloatField(null=True, blank=True)
    source = models.CharField(max_length=8, choices=DiscoverySource.choices)
    filename = models.CharField(max_length=255, blank=True)
    status = models.CharField(max_length=8, choices=DiscoveryStatus.choices, default=DiscoveryStatus.RUNNING)
    counts = models.JSONField(default=dict, blank=True)
    diff = models.JSONField(default=dict, blank=True)
    added = models.PositiveIntegerField(default=0)
    removed = models.PositiveIntegerField(default=0)
    changed = models.PositiveIntegerField(default=0)
    warnings = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    rows_written = models.PositiveIntegerField(default=0)
    #: digest of the topology this discovery stored (16 hex digits, ``fabric.services.ingest``):
    #: two discoveries with the same digest found the same nodes, ports and links; blank when not
    #: computed (notice refreshes, failed runs)
    digest = models.CharField(max_length=16, blank=True, editable=False)

    objects = models.Manager.from_queryset(FabricScopedQuerySet)()

    class Meta:
        ordering = ["-started", "-id"]
        verbose_name_plural = "discoveries"

    def __str__(self) -> str:
        return f"{self.fabric} {self.source} {self.started:%Y-%m-%d %H:%M:%S} {self.status}"
