"""The fabric model: one IB subnet, its nodes, ports, links, SMs and discoveries.

Semantics follow the IBTA spec, Vol 1 ch. 14 (NodeInfo, PortInfo, SMInfo), and what
``ibnetdiscover(8)`` reports. GUIDs are stored canonical (``fabric.guid.normalize_guid``).
Hosts group the CAs of one machine (by the host name in the CA's NodeDescription, e.g.
``"host017 mlx5_3"``); GPU pools and tenants (``pools`` app) attach to hosts.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.urls import reverse
from django.utils import timezone

from core.procs import worker_name
from core.sites import DEFAULT_SITE, validate_site
from core.validators import printable_text

from .choices import (
    ApplyRunState,
    ApplyState,
    DiscoverySource,
    DiscoveryStatus,
    FabricRole,
    MemberReason,
    Membership,
    NodeType,
    PartitionSource,
    PhysState,
    PortState,
    SMState,
    Tier,
)
from .keys import link_name, port_key, port_name
from .querysets import (
    FabricQuerySet,
    FabricScopedQuerySet,
    HostQuerySet,
    LinkQuerySet,
    NodeQuerySet,
    PortQuerySet,
)
from .services.derive import display_name
from .vendors import device_name, vendor_name

#: Why a fabric without live access is not discovered or polled from this host (``.format(name=...)``);
#: the API answers it with a 409, the pages and commands show it.
NO_LIVE_ACCESS = (
    "Fabric {name} has no live access configured (set local_hca, ca_name, or tool_env for a lab): it was "
    "imported from a file, and a live discovery from this host would describe another fabric."
)


#: Bounds of a fabric's numeric settings (validators and database checks of :class:`Fabric`):
#: the local HCA port the diags use (``-P``): an HCA's physical ports are numbered 1..254 (IBTA
#: vol. 1, 14.2.5.1, PortInfo:LocalPortNum; 0 is a switch's management port, 255 reserved);
#: ``ibnetdiscover``'s timeout: at least 1 s, at most a day (a discovery of the largest fabrics
#: takes minutes; the periodic run's lock and watchdog add this to their own budgets).
CA_PORT_MIN, CA_PORT_MAX = 1, 254
DISCOVERY_TIMEOUT_MIN_S, DISCOVERY_TIMEOUT_MAX_S = 1.0, 86400.0


class Fabric(models.Model):
    """One IB subnet and how to reach it for live discovery and polling.

    ``ca_name``/``ca_port`` select the local HCA port the tools use (``-C``/``-P`` of the diags);
    empty means the tools' default. ``tool_env`` holds extra environment variables for the tools
    (e.g. ``{"LD_PRELOAD": ".../libumad2sim.so", "SIM_HOST": "..."}`` for a lab fabric).
    """

    name = models.SlugField(max_length=64, unique=True)
    description = models.CharField(max_length=200, blank=True, validators=[printable_text])
    subnet_prefix = models.CharField(max_length=18, blank=True, help_text="e.g. 0xfe80000000000000")
    ca_name = models.CharField(max_length=64, blank=True, help_text="local HCA for the diags (-C)")
    ca_port = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(CA_PORT_MIN), MaxValueValidator(CA_PORT_MAX)],
        help_text=f"local HCA port (-P), {CA_PORT_MIN}..{CA_PORT_MAX}",
    )
    tool_env = models.JSONField(default=dict, blank=True)
    local_hca = models.BooleanField(
        default=False,
        help_text="reach this fabric with the diags through this host's default HCA port",
    )
    partitions_path = models.CharField(
        max_length=512,
        blank=True,
        help_text="OpenSM's partitions file Weft writes (opensm -P / partition_config_file); "
        "empty: WEFT_PARTITIONS_PATH",
    )
    sm_pid_file = models.CharField(
        max_length=512,
        blank=True,
        help_text="pid file of the OpenSM to SIGHUP after writing the partitions file",
    )
    sm_reload_command = models.JSONField(
        default=list,
        blank=True,
        help_text="argv run instead of SIGHUP to make OpenSM re-read its partitions (e.g. a remote reload)",
    )
    sm_pid_files = models.JSONField(
        default=dict,
        blank=True,
        help_text="pid file of each OpenSM by its port GUID ({'0x...': '/run/opensm.pid'}): the apply "
        "signals the one sminfo names master (an SM fail-over moves it)",
    )
    #: how its switches' health (PSUs, fans, temperature, inventory) is read: "" none, "ibswinfo"
    #: (``ibswinfo.sh -d lid-<LID>`` per switch, the script at ``WEFT_IBSWINFO``; needs MFT)
    switch_info_tool = models.CharField(
        max_length=16,
        choices=[("", "none"), ("ibswinfo", "ibswinfo.sh (MFT, unmanaged switches)")],
        default="",
        blank=True,
        help_text="read every switch's PSUs, fans, temperature and inventory with this tool (fabric.services.switchhealth)",
    )
    #: how its ports' cables and transceivers are read (``fabric.services.cables``): "" none,
    #: "ibdiagnet" (one ``ibdiagnet --get_cable_info`` run for the fabric, its ``db_csv`` read),
    #: "mlxlink" (``mlxlink -d lid-<LID> -p <port> -m -c`` per linked switch port; needs MFT)
    cable_info_tool = models.CharField(
        max_length=16,
        choices=[
            ("", "none"),
            ("ibdiagnet", "ibdiagnet --get_cable_info (one run per fabric)"),
            ("mlxlink", "mlxlink -m -c per switch port (MFT)"),
        ],
        default="",
        blank=True,
        help_text="read every port's cable and transceiver (vendor, part, serial, length, temperature, "
        "power, BER) with this tool (fabric.services.cables)",
    )
    #: what the fabric carries: only compute fabrics place GPU jobs (``scheduler.topology``)
    role = models.CharField(
        max_length=10,
        choices=FabricRole.choices,
        default=FabricRole.COMPUTE,
        help_text="compute fabrics make the scheduler's locality tree; storage/management fabrics are skipped",
    )
    #: the collector site that can reach this fabric (``core.sites``): its I/O goes to that
    #: site's Celery queue only (``fabric`` for the default site, ``fabric.<site>`` otherwise)
    site = models.CharField(
        max_length=32,
        default=DEFAULT_SITE,
        validators=[validate_site],
        help_text="collector site whose workers reach this fabric (Celery queue fabric.<site>; "
        f"'{DEFAULT_SITE}': the queue fabric)",
    )
    discovery_timeout_s = models.FloatField(
        default=300.0,
        validators=[MinValueValidator(DISCOVERY_TIMEOUT_MIN_S), MaxValueValidator(DISCOVERY_TIMEOUT_MAX_S)],
        help_text=f"ibnetdiscover's timeout, seconds ({DISCOVERY_TIMEOUT_MIN_S:g}..{DISCOVERY_TIMEOUT_MAX_S:g})",
    )
    discovery_enabled = models.BooleanField(default=True, help_text="periodic live discovery")
    polling_enabled = models.BooleanField(default=True, help_text="periodic counter sweeps")
    master_sm_guid = models.CharField(max_length=18, blank=True)
    master_sm_lid = models.PositiveIntegerField(null=True, blank=True)
    #: consecutive SM polls without a master answer (``fabric.services.sm``; 0 when one answers)
    master_sm_missed = models.PositiveIntegerField(default=0, editable=False)
    #: the site's node-name map (``fabric.parsers.node_name_map`` format) as uploaded; or, in
    #: ``node_name_map_path``, a file on this server read at every discovery and import (at most
    #: one of the two is set; ``fabric.services.names``)
    node_name_map = models.TextField(blank=True)
    node_name_map_path = models.CharField(max_length=1024, blank=True)
    #: when the map was last set or cleared (part of the network map's cache key)
    node_name_map_changed = models.DateTimeField(null=True, blank=True, editable=False)
    last_discovery = models.ForeignKey(
        "Discovery", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)

    objects = models.Manager.from_queryset(FabricQuerySet)()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ca_port__isnull=True)
                | models.Q(ca_port__gte=CA_PORT_MIN, ca_port__lte=CA_PORT_MAX),
                name="fabric_ca_port_range",
                violation_error_message=f"ca_port must be {CA_PORT_MIN}..{CA_PORT_MAX}",
            ),
            models.CheckConstraint(
                condition=models.Q(
                    discovery_timeout_s__gte=DISCOVERY_TIMEOUT_MIN_S,
                    discovery_timeout_s__lte=DISCOVERY_TIMEOUT_MAX_S,
                ),
                name="fabric_discovery_timeout_range",
                violation_error_message=(
                    f"discovery_timeout_s must be {DISCOVERY_TIMEOUT_MIN_S:g}..{DISCOVERY_TIMEOUT_MAX_S:g} s"
                ),
            ),
        ]

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
    """A switch, CA or router (IBTA NodeInfo). ``lid`` is the switch's port-0 LID (switches only).

    ``description`` is the NodeDescription exactly as the tool printed it (leading/trailing spaces
    kept; IBTA Vol 1 14.2.5.2: 64 bytes, so 128 characters hold any); ``name`` is what admins see
    everywhere (pages, map, heatmap, events, mails, exports, API ``display``): the fabric's
    node-name map entry for the GUID, else the trimmed description
    (``fabric.services.derive.display_name``; written by ingest and ``fabric.services.names``).
    """

    # indexes: plain B-trees in Meta (no ``varchar_pattern_ops`` twins: nothing here filters by
    # prefix, and every index is upkeep on the bulk ingest); ``fabric`` is the leading column of
    # the GUID constraint's index, so it needs none of its own
    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="nodes", db_index=False)
    node_guid = models.CharField(max_length=18)
    node_type = models.CharField(max_length=8, choices=NodeType.choices)
    system_image_guid = models.CharField(max_length=18, blank=True)
    vendor_id = models.PositiveIntegerField(null=True, blank=True)
    device_id = models.PositiveIntegerField(null=True, blank=True)
    description = models.CharField(max_length=128, blank=True)
    name = models.CharField(max_length=128, blank=True)
    num_ports = models.PositiveSmallIntegerField(default=0)
    enhanced_port0 = models.BooleanField(default=False)
    lid = models.PositiveIntegerField(null=True, blank=True, db_index=True)
    lmc = models.PositiveSmallIntegerField(default=0)
    tier = models.PositiveSmallIntegerField(choices=Tier.choices, default=Tier.UNKNOWN)
    #: switches only: what the switch carries (a site's choice, kept across rediscoveries; set with
    #: ``fabric.services.roles.set_switch_roles``); a storage or management switch is no leaf or
    #: spine of the scheduler's locality tree. A database default too: the ingest inserts nodes
    #: with its own column list (``core.bulk.insert_rows``)
    role = models.CharField(
        max_length=10, choices=FabricRole.choices, default=FabricRole.COMPUTE, db_default=FabricRole.COMPUTE
    )
    host = models.ForeignKey(Host, null=True, blank=True, on_delete=models.SET_NULL, related_name="nodes")
    #: CAs only: True for a SHARP Aggregation Node (the CA inside a SHARP-capable switch; no host,
    #: no leaf: ``fabric.services.derive.aggregation_nodes``); written by the ingest only
    aggregation_node = models.BooleanField(default=False, db_default=False)
    #: an Aggregation Node's switch: the node GUID of the switch it hangs off (``""`` for any other
    #: node, or an AN cabled to no switch). A GUID, not a key: the ingest writes nodes in one bulk
    #: insert, before the switch's row id is known
    aggregation_switch_guid = models.CharField(max_length=18, blank=True, default="", db_default="")
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
        ordering = ["fabric", "node_type", "name"]
        constraints = [
            models.UniqueConstraint(fields=["fabric", "node_guid"], name="node_guid_unique_per_fabric")
        ]
        indexes = [
            models.Index(fields=["node_guid"], name="node_guid_idx"),
            models.Index(fields=["description"], name="node_description_idx"),
            models.Index(fields=["name"], name="node_name_idx"),
        ]

    def __str__(self) -> str:
        return self.name or self.node_guid

    def save(self, *args, **kwargs) -> None:
        # rows made one by one (admin, tests) get the no-map name; ingest writes ``name`` itself
        if not self.name and self.description:
            self.name = display_name(self.node_guid, self.description, None)
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("fabric:node", args=[self.pk])

    @property
    def vendor_name(self) -> str:
        """The IEEE OUI organisation of ``vendor_id``, else its hex (``fabric.vendors``)."""
        return vendor_name(self.vendor_id)

    @property
    def device_name(self) -> str:
        """The ``pci.ids`` name of ``device_id`` under the vendor, else its hex (``fabric.vendors``)."""
        return device_name(self.vendor_id, self.device_id)

    @property
    def aggregation_switch(self) -> Node | None:
        """The switch this SHARP Aggregation Node hangs off (None for other nodes)."""
        if not self.aggregation_switch_guid:
            return None
        return Node.objects.filter(fabric_id=self.fabric_id, node_guid=self.aggregation_switch_guid).first()

    @property
    def sharp_aggregation_nodes(self) -> models.QuerySet[Node]:
        """The SHARP Aggregation Nodes of this switch (empty for a switch without SHARP, and for
        CAs and routers)."""
        return Node.objects.filter(fabric_id=self.fabric_id, aggregation_switch_guid=self.node_guid,
                                   aggregation_node=True)  # fmt: skip

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

    # ``node`` leads the (node, port_num) constraint's index: no index of its own; ``port_guid`` a
    # plain B-tree (Meta), no pattern-ops twin (see Node)
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="ports", db_index=False)
    port_num = models.PositiveSmallIntegerField()
    port_guid = models.CharField(max_length=18, blank=True)
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
        indexes = [models.Index(fields=["port_guid"], name="port_guid_idx")]

    def __str__(self) -> str:
        return port_name(str(self.node), self.port_num)

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
        return link_name(
            (str(self.port_a.node), self.port_a.port_num), (str(self.port_b.node), self.port_b.port_num)
        )


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
    #: who ran it: the Celery worker's nodename, or ``<program>@<host>`` (``core.procs.worker_name``)
    worker = models.CharField(max_length=100, blank=True, default=worker_name, editable=False)
    #: digest of the topology this discovery stored (16 hex digits, ``fabric.services.ingest``):
    #: two discoveries with the same digest found the same nodes, ports and links; blank when not
    #: computed (notice refreshes, failed runs)
    digest = models.CharField(max_length=16, blank=True, editable=False)
    #: ``fabric.services.ingest.source_digest`` of the text a complete discovery stored (32 hex
    #: digits; blank for partial, failed and notice runs): the same text next time is recognised
    #: before parsing (``ingest_unchanged``)
    source_digest = models.CharField(max_length=32, blank=True, editable=False)

    objects = models.Manager.from_queryset(FabricScopedQuerySet)()

    class Meta:
        ordering = ["-started", "-id"]
        verbose_name_plural = "discoveries"

    def __str__(self) -> str:
        return f"{self.fabric} {self.source} {self.started:%Y-%m-%d %H:%M:%S} {self.status}"

    def _nodes_links(self, section: str) -> tuple[int, int]:
        """(nodes, links) behind ``added``/``removed`` (which count both together). The diff's
        lists are cut at ``DIFF_LIST_LIMIT``: a first discovery takes its numbers from ``counts``,
        a cut list of another gives its nodes and the rest of the total as links."""
        total = getattr(self, section)
        diff = self.diff or {}
        if section == "added" and diff.get("initial"):
            c = self.counts or {}
            nodes = int(c.get("switches", 0)) + int(c.get("cas", 0)) + int(c.get("routers", 0))
            return nodes, max(total - nodes, 0)
        nodes = min(len((diff.get(section) or {}).get("nodes", [])), total)
        return nodes, total - nodes

    @property
    def added_text(self) -> str:
        """``added`` split as the page shows it: ``"42 nodes, 624 links"``."""
        nodes, links = self._nodes_links("added")
        return f"{nodes} node{'s' * (nodes != 1)}, {links} link{'s' * (links != 1)}"

    @property
    def removed_text(self) -> str:
        """``removed`` split: ``"1 node, 2 links"``."""
        nodes, links = self._nodes_links("removed")
        return f"{nodes} node{'s' * (nodes != 1)}, {links} link{'s' * (links != 1)}"

    @property
    def first_label(self) -> str:
        """The badge of a fabric's first discovery: "first discovery" when live (it read "first
        import"), "first import" from a file or an upload."""
        return "first discovery" if self.source in ("live", "notice") else "first import"


class Partition(models.Model):
    """An IB partition (PKey) of a fabric, as OpenSM's ``partitions.conf`` defines it.

    ``pkey`` is the 15-bit PKey (0x0001-0x7ffe for Weft's own; 0x7fff is the default partition,
    ``is_default``); ``pkey`` and ``name`` are each unique per fabric (database constraints);
    membership (the PKey's high bit) is per member. ``mtu``/``rate``/``sl``/
    ``scope`` are IBTA codes as OpenSM's partition flags take them (``mtu=4`` = 2048 bytes,
    ``rate=7`` = 40 Gb/s; ``scope`` a list of MGID scope nibbles), None/empty = OpenSM's default;
    ``q_key``/``tclass``/``flow_label``/``indx0``/``mcast_groups`` (``[{"mgid", "flags"}]``) keep
    what an imported file said. ``applied_*`` is written by ``fabric.services.partitions.apply``:
    state, when, the file's hash, and ``drift`` (``[{"guid", "expected", "seen"}]``).
    Semantics: ``man opensm`` "PARTITION CONFIGURATION" (``fabric.parsers.partitions``).
    """

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="partitions")
    name = models.CharField(
        max_length=64,
        validators=[
            RegexValidator(r"^[A-Za-z_][A-Za-z0-9_.\-]*$", "letters, digits, _ . - (not first a digit)")
        ],
    )
    pkey = models.PositiveIntegerField(validators=[MinValueValidator(0x0001), MaxValueValidator(0x7FFF)])
    description = models.CharField(max_length=200, blank=True, validators=[printable_text])
    ipoib = models.BooleanField(default=False, help_text="create the IPoIB broadcast group")
    mtu = models.PositiveSmallIntegerField(null=True, blank=True, help_text="IBTA MTU code 1-5 (4 = 2048)")
    rate = models.PositiveSmallIntegerField(null=True, blank=True, help_text="IBTA rate code (7 = 40 Gb/s)")
    sl = models.PositiveSmallIntegerField(null=True, blank=True, validators=[MaxValueValidator(15)])
    scope = models.JSONField(default=list, blank=True, help_text="MGID scope nibbles, e.g. [2]")
    q_key = models.BigIntegerField(null=True, blank=True)
    tclass = models.PositiveSmallIntegerField(null=True, blank=True)
    flow_label = models.PositiveIntegerField(null=True, blank=True)
    indx0 = models.BooleanField(default=False)
    mcast_groups = models.JSONField(default=list, blank=True)
    is_default = models.BooleanField(default=False, editable=False)
    source = models.CharField(max_length=8, choices=PartitionSource.choices, default=PartitionSource.WEFT)
    applied_state = models.CharField(max_length=8, choices=ApplyState.choices, default=ApplyState.PENDING)
    applied_at = models.DateTimeField(null=True, blank=True)
    applied_hash = models.CharField(max_length=64, blank=True)
    drift = models.JSONField(default=list, blank=True)
    #: what the last apply or reconcile found of the GUID members: ``{"members": M, "applied": N,
    #: "unverifiable": K}`` (K: GUIDs not in the fabric, e.g. SR-IOV virtual functions)
    applied_members = models.JSONField(default=dict, blank=True)
    apply_error = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = models.Manager.from_queryset(FabricScopedQuerySet)()

    class Meta:
        ordering = ["fabric", "pkey"]
        constraints = [
            models.UniqueConstraint(fields=["fabric", "pkey"], name="partition_pkey_unique_per_fabric"),
            # a name is required (no blank), so every row is under it; duplicates stored before were
            # renamed by migration 0013 (``<name>-0x<pkey>``)
            models.UniqueConstraint(fields=["fabric", "name"], name="partition_name_unique_per_fabric"),
            models.CheckConstraint(
                condition=models.Q(pkey__gte=1, pkey__lte=0x7FFF), name="partition_pkey_range"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} (0x{self.pkey:04x})"

    def get_absolute_url(self) -> str:
        return reverse("fabric:partition", args=[self.pk])

    @property
    def pkey_hex(self) -> str:
        return f"0x{self.pkey:04x}"

    @property
    def applied_status(self) -> str:
        """The applied state in words: ``"applied to 3 of 4 members, 1 not verifiable"`` for a
        partial apply (never plain "applied" while members cannot be verified), ``"applied to 4
        of 4 members"``, ``"drift on 2 port(s)"``, ``"pending"``, ``"failed"``."""
        counts = self.applied_members or {}
        if self.applied_state in (ApplyState.APPLIED, ApplyState.PARTIAL) and counts.get("members"):
            text = f"applied to {counts.get('applied', 0)} of {counts['members']} members"
            if counts.get("unverifiable"):
                text += f", {counts['unverifiable']} not verifiable"
            return text
        if self.applied_state == ApplyState.DRIFT:
            return f"drift on {len(self.drift or [])} port(s)"
        return str(self.applied_state)


class PartitionMember(models.Model):
    """A member of a partition: a port GUID (canonical) or one of OpenSM's keywords (``ALL``,
    ``ALL_CAS``, ``ALL_SWITCHES``, ``ALL_ROUTERS``, ``SELF``), its ``membership`` and why it is
    there (``reason``). ``port`` is the fabric's Port with that GUID when the topology knows it."""

    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, related_name="members")
    port_guid = models.CharField(max_length=18, db_index=True)
    membership = models.CharField(max_length=8, choices=Membership.choices, default=Membership.FULL)
    reason = models.CharField(max_length=8, choices=MemberReason.choices, default=MemberReason.EXTRA)
    port = models.ForeignKey(Port, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["partition", "port_guid"]
        constraints = [
            models.UniqueConstraint(fields=["partition", "port_guid"], name="partition_member_unique")
        ]

    def __str__(self) -> str:
        return f"{self.port_guid}={self.membership}"


class PartitionApply(models.Model):
    """One requested apply of a fabric's partitions (``POST /api/fabric/partitions/apply/``, the
    ``partitions --apply`` command): the client gets its id at once (202) and reads it back.
    Written only by ``fabric.services.partitions.coalesce``: ``queued`` → ``running`` → ``done``
    or ``failed`` with ``result`` (``apply_pending``'s summary: ``applies``, ``ok``, ``state``,
    ``error``, ``seconds``); ``coalesced`` while another apply of the fabric runs, which covers
    this request and writes its result here when it ends."""

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="partition_applies")
    state = models.CharField(max_length=9, choices=ApplyRunState.choices, default=ApplyRunState.QUEUED)
    source = models.CharField(max_length=12, default="api")
    force = models.BooleanField(default=False)
    timeout_s = models.FloatField(null=True, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(default=timezone.now, db_index=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    ok = models.BooleanField(null=True)
    result = models.JSONField(default=dict, blank=True)

    objects = models.Manager.from_queryset(FabricScopedQuerySet)()

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"apply {self.pk} of {self.fabric_id}: {self.state}"


class TopologyReference(models.Model):
    """The topology a fabric should have (UFM's "topology compare" reference): a snapshot
    (``fabric.compare`` format: nodes by GUID, links by ``(guid, port)`` ends with width/speed)
    taken from the fabric's latest discovery or from an imported file (e.g. the cabling plan as
    ``ibnetdiscover`` output), set by an Admin (``fabric.services.reference``). ``raise_events``:
    compare after every discovery and record ``topology.mismatch``/``topology.matches`` events."""

    fabric = models.OneToOneField(Fabric, on_delete=models.CASCADE, related_name="reference")
    snapshot = models.JSONField(default=dict)
    discovery = models.ForeignKey(
        Discovery, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    filename = models.CharField(max_length=255, blank=True)
    raise_events = models.BooleanField(
        default=False, help_text="compare after each discovery and raise events"
    )
    created = models.DateTimeField(auto_now=True)
    created_by = models.CharField(max_length=150, blank=True)
    #: ``counts`` of the last compare that raised events (``fabric.compare.compare``), so a
    #: rediscovery that finds the same differences raises nothing new
    last_counts = models.JSONField(default=dict, blank=True, editable=False)

    def __str__(self) -> str:
        return f"reference of {self.fabric}: {self.source_label}"

    @property
    def source_label(self) -> str:
        if self.filename:
            return f"file {self.filename}"
        return f"discovery #{self.discovery_id}" if self.discovery_id else "a discovery (since deleted)"

    @property
    def counts(self) -> dict[str, int]:
        return {"nodes": len(self.snapshot.get("nodes", {})), "links": len(self.snapshot.get("links", []))}


class IsolatedPort(models.Model):
    """A switch port isolated on purpose: disabled with ``ibportstate`` from the port page
    (Disable) or through the UFM-compatible API (``PUT /app/unhealthy_ports`` ``UNHEALTHY``,
    ``mark_device_unhealthy``), until it is enabled again (the row is then deleted). Its link's
    loss is expected: no ``link.down`` while the row exists. One writer:
    ``fabric.services.isolation``. The table keeps its first name, ``ufm_unhealthyport``. Keyed by the switch's node GUID and
    the port number, so it outlives rediscoveries (the port row itself may lose its link)."""

    fabric = models.ForeignKey(Fabric, on_delete=models.CASCADE, related_name="isolated_ports")
    node_guid = models.CharField(max_length=18)
    port_num = models.PositiveSmallIntegerField()
    #: the node's name when it was isolated (shown when the node is gone)
    node_name = models.CharField(max_length=128, blank=True)
    #: the peer of the port when it was isolated, ``"<name> <port>"`` (its link is down since)
    peer = models.CharField(max_length=200, blank=True)
    #: the peer port's node GUID and port number when it was isolated (UFM's ``UnhealthyGUID``,
    #: ``UnhealthyPortNumber`` of ``GET /app/unhealthy_ports``); empty when it had no link
    peer_guid = models.CharField(max_length=18, blank=True)
    peer_port_num = models.PositiveSmallIntegerField(null=True, blank=True)
    since = models.DateTimeField(auto_now_add=True)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    #: where it was isolated: ``page`` (the port page's Disable) or ``ufm`` (the UFM API)
    via = models.CharField(max_length=8, default="ufm")

    class Meta:
        db_table = "ufm_unhealthyport"
        ordering = ["fabric", "node_guid", "port_num"]
        constraints = [
            models.UniqueConstraint(fields=["fabric", "node_guid", "port_num"], name="unhealthy_port_unique")
        ]

    def __str__(self) -> str:
        return f"{self.node_name or self.node_guid} port {self.port_num}"

    @property
    def key(self) -> str:
        """The port's natural key ``"<node guid>/<port>"`` (``fabric.keys``)."""
        return port_key(self.node_guid, self.port_num)


class SwitchHealth(models.Model):
    """One reading of a switch's health: its PSUs, fans, temperature, part/serial numbers and
    firmware (``fabric.parsers.ibswinfo.SwitchInfo.as_dict()`` in ``data``), collected with
    ``ibswinfo.sh`` or imported from a file. The history is kept (``WEFT_SWITCH_HEALTH_KEEP``
    readings per switch); the latest is what the switch page and ``/metrics`` show. One writer:
    ``fabric.services.switchhealth``."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="health_readings")
    taken = models.DateTimeField(default=timezone.now)
    #: ``ibswinfo`` (collected) or ``file`` (imported with ``manage.py switch_health --file``)
    source = models.CharField(max_length=16)
    data = models.JSONField()

    class Meta:
        ordering = ["-taken", "-pk"]
        indexes = [models.Index(fields=["node", "-taken"], name="switchhealth_node_taken")]

    def __str__(self) -> str:
        return f"{self.node} health at {self.taken:%Y-%m-%d %H:%M:%S}"


class CableInfo(models.Model):
    """One reading of the cable or transceiver in a port: vendor, part and serial number, length,
    type, module temperature with its alarm thresholds, per-lane Rx/Tx power and bias, voltage,
    and (mlxlink) the link's FEC and BER figures (``fabric.parsers.cablerecord.CableReading.as_dict()``
    in ``data``), read with ``ibdiagnet --get_cable_info`` or ``mlxlink``, or imported from a saved
    output. The last ``WEFT_CABLE_INFO_KEEP`` readings per port are kept; the latest is what the
    port page, the API and ``/metrics`` show. One writer: ``fabric.services.cables``."""

    port = models.ForeignKey(Port, on_delete=models.CASCADE, related_name="cable_readings")
    taken = models.DateTimeField(default=timezone.now)
    #: ``ibdiagnet`` or ``mlxlink`` (collected), ``file`` (``manage.py cable_info --file``)
    source = models.CharField(max_length=16)
    data = models.JSONField()

    class Meta:
        ordering = ["-taken", "-pk"]
        indexes = [models.Index(fields=["port", "-taken"], name="cableinfo_port_taken")]

    def __str__(self) -> str:
        return f"{self.port} cable at {self.taken:%Y-%m-%d %H:%M:%S}"
