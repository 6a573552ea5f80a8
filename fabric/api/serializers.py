"""Serializers of the fabric REST API.

Every model has a full form and a brief form (``Meta.brief_fields``: id, url, display and the
natural key; ``XSerializer(nested=True)``, ``core.api.serializers``) used when nested in another
object and for ``?brief=1`` lists, so a 5,000-node list stays small (NetBox ``brief_fields``).
GUIDs are the canonical ``0x`` + 16 hex digits (``fabric.guid``); LIDs are integers; ``rate_gbps``
is the data rate in Gb/s after line encoding.
"""

from __future__ import annotations

from datetime import UTC, datetime

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounts.scoping import scope_rows, visible_tenant_ids
from core.api.serializers import BaseModelSerializer, declare_field
from core.fields import FiniteFloatField, IdentityUrlField

from ..choices import FabricRole, PortState
from ..guid import normalize_guid
from ..models import (
    CableInfo,
    Discovery,
    Fabric,
    Host,
    Link,
    Node,
    Partition,
    PartitionApply,
    PartitionMember,
    Port,
    SubnetManager,
)
from ..querysets import topology_counts
from ..services.notice_status import notice_status


class ChoiceDisplayField(serializers.Field):
    """An integer/text choice rendered as ``{"value": 4, "label": "Active"}`` (read-only)."""

    def __init__(self, **kwargs):
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def get_attribute(self, instance):
        return instance

    def to_representation(self, instance):
        value = getattr(instance, self.source)
        label = getattr(instance, f"get_{self.source}_display")()
        return {"value": value, "label": label}


@extend_schema_field({"anyOf": [{"type": "integer"}, {"type": "string"}]})
class _IntOrStrField(serializers.Field):
    """Schema only: a choice value is an integer (PortState 4) or a string (node type "switch")."""


class _ChoiceDisplaySchema(serializers.Serializer):
    value = _IntOrStrField()
    label = serializers.CharField()


extend_schema_field(_ChoiceDisplaySchema)(ChoiceDisplayField)


# --- the model serializers (each with its brief form: Meta.brief_fields) ---------------------


class FabricSerializer(BaseModelSerializer):
    """A fabric (IB subnet). ``counts`` come from the viewset's annotations (read-only)."""

    url = IdentityUrlField(view_name="fabric-api:fabric-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    # last_discovery: DiscoverySerializer's brief form, declared below it (the two nest each other)
    counts = serializers.SerializerMethodField()
    notices = serializers.SerializerMethodField()

    class Meta:
        model = Fabric
        fields = [
            "id",
            "url",
            "display",
            "name",
            "description",
            "subnet_prefix",
            "role",
            "site",
            "local_hca",
            "ca_name",
            "ca_port",
            "tool_env",
            "discovery_timeout_s",
            "discovery_enabled",
            "polling_enabled",
            "switch_info_tool",
            "cable_info_tool",
            "master_sm_guid",
            "master_sm_lid",
            "node_name_map_source",
            "node_name_map_path",
            "last_discovery",
            "counts",
            "notices",
            "created",
        ]
        brief_fields = ["id", "url", "display", "name"]
        # the map is changed through the audited ``node-name-map`` action, which renames the nodes
        read_only_fields = ["master_sm_guid", "master_sm_lid", "node_name_map_path", "created"]

    node_name_map_source = serializers.SerializerMethodField(
        help_text="where the node-name map comes from: upload, path or none (see the node-name-map action)"
    )

    def get_node_name_map_source(self, obj) -> str:
        return "upload" if obj.node_name_map else "path" if obj.node_name_map_path else "none"

    @extend_schema_field(
        {
            "type": "object",
            "nullable": True,
            "description": "the SM-notice listener of this fabric (fabric.services.notices), null when "
            "none runs: state starting|subscribed|unsubscribed|down, times ISO 8601 (as the API's others)",
            "properties": {
                "state": {"type": "string"},
                "sm_lid": {"type": "integer", "nullable": True},
                "subscribed_at": {"type": "string", "format": "date-time", "nullable": True},
                "last_notice_at": {"type": "string", "format": "date-time", "nullable": True},
                "notices": {"type": "integer"},
                "refreshes": {"type": "integer"},
                "discoveries": {"type": "integer"},
                "fallback_reads": {"type": "integer"},
                "fallback_mads": {"type": "integer"},
                "error": {"type": "string"},
            },
        }
    )
    def get_notices(self, obj: Fabric) -> dict | None:
        status = notice_status(obj.pk)
        if status is None:
            return None
        keys = ("state", "sm_lid", "subscribed_at", "last_notice_at", "notices", "refreshes", "discoveries",
                "fallback_reads", "fallback_mads", "error")  # fmt: skip
        out = {k: status.get(k) for k in keys}
        # the listener keeps epoch seconds (its cache entry); the API's times are ISO 8601, as
        # DRF's DateTimeField writes them (the current time zone, "Z" for UTC)
        as_iso = serializers.DateTimeField().to_representation
        for k in ("subscribed_at", "last_notice_at"):
            if isinstance(out[k], int | float):
                out[k] = as_iso(datetime.fromtimestamp(out[k], tz=UTC))
        return out

    @extend_schema_field(
        {
            "type": "object",
            "properties": {k: {"type": "integer"} for k in ("switches", "cas", "routers", "links")},
        }
    )
    def get_counts(self, obj: Fabric) -> dict[str, int]:
        if hasattr(obj, "n_switches"):
            return {
                "switches": obj.n_switches,
                "cas": obj.n_cas,
                "routers": obj.n_routers,
                "links": obj.n_links,
            }
        return topology_counts(obj)

    def validate_subnet_prefix(self, value: str) -> str:
        if not value:
            return value
        try:
            return normalize_guid(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc))

    def validate_tool_env(self, value):
        from ..collectors.tools import check_tool_env

        try:
            return check_tool_env(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc))


class HostSerializer(BaseModelSerializer):
    url = IdentityUrlField(view_name="fabric-api:host-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    fabric = FabricSerializer(nested=True, read_only=True)
    # nodes: NodeSerializer's brief form, declared below it (the two nest each other)

    class Meta:
        model = Host
        fields = ["id", "url", "display", "fabric", "name", "nodes"]
        brief_fields = ["id", "url", "display", "name"]


class NodeSerializer(BaseModelSerializer):
    """A node; the detail form (``retrieve``) adds its ports with links and remote ends."""

    url = IdentityUrlField(view_name="fabric-api:node-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    fabric = FabricSerializer(nested=True, read_only=True)
    host = HostSerializer(nested=True, read_only=True, allow_null=True)
    tier = ChoiceDisplayField()

    class Meta:
        model = Node
        fields = [
            "id",
            "url",
            "display",
            "fabric",
            "node_guid",
            "node_type",
            "system_image_guid",
            "vendor_id",
            "device_id",
            "name",
            "description",
            "num_ports",
            "enhanced_port0",
            "lid",
            "lmc",
            "tier",
            "role",
            "host",
            "aggregation_node",
            "aggregation_switch_guid",
            "first_seen",
            "last_seen",
            "unreachable_since",
        ]
        brief_fields = ["id", "url", "display", "node_guid", "node_type", "name", "description", "lid"]
        # SHARP Aggregation Node and its switch: the ingest's (fabric.services.derive.aggregation_nodes)
        read_only_fields = ["aggregation_node", "aggregation_switch_guid"]


class RemoteEndField(serializers.Field):
    """The port at the other end of a port's link, in brief form, or null."""

    def __init__(self, **kwargs):
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def get_attribute(self, instance):
        return instance

    def to_representation(self, port: Port):
        remote = port.remote
        if remote is None:
            return None
        if "_brief" not in self.__dict__:  # built once per request, not per row
            self._brief = PortSerializer(nested=True, context=self.context)
        return self._brief.to_representation(remote)


class PortSerializer(BaseModelSerializer):
    """A port with its link and the remote end (read it through ``Port.objects.with_link()``)."""

    url = IdentityUrlField(view_name="fabric-api:port-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    node = NodeSerializer(nested=True, read_only=True)
    state = ChoiceDisplayField()
    phys_state = ChoiceDisplayField()
    link = serializers.SerializerMethodField()
    remote = RemoteEndField()

    class Meta:
        model = Port
        fields = [
            "id",
            "url",
            "display",
            "node",
            "port_num",
            "port_guid",
            "lid",
            "lmc",
            "state",
            "phys_state",
            "width",
            "speed",
            "rate_gbps",
            "label",
            "link",
            "remote",
        ]
        # the brief form names its node in brief form (read ports with ``select_related("node")``)
        brief_fields = ["id", "url", "display", "node", "port_num", "port_guid", "lid"]

    # schema: LinkSerializer's brief form, annotated below it (the two nest each other)
    def get_link(self, port: Port):
        link = port.link
        if link is None:
            return None
        if "_brief_link" not in self.__dict__:  # built once per request, not per row
            self._brief_link = LinkSerializer(nested=True, context=self.context)
        return self._brief_link.to_representation(link)


class NodePortSerializer(PortSerializer):
    """A port nested in its node (the node itself is not repeated)."""

    class Meta(PortSerializer.Meta):
        fields = [f for f in PortSerializer.Meta.fields if f != "node"]


class NodeDetailSerializer(NodeSerializer):
    ports = NodePortSerializer(many=True, read_only=True)

    class Meta(NodeSerializer.Meta):
        fields = [*NodeSerializer.Meta.fields, "ports"]


class LinkSerializer(BaseModelSerializer):
    """A link with both ends in brief form and its state (the lower of its ports' states)."""

    url = IdentityUrlField(view_name="fabric-api:link-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    fabric = FabricSerializer(nested=True, read_only=True)
    port_a = PortSerializer(nested=True, read_only=True)
    port_b = PortSerializer(nested=True, read_only=True)
    state = serializers.SerializerMethodField()
    #: the brief form names its ports by id (the full form nests them)
    brief_overrides = {
        "port_a": serializers.PrimaryKeyRelatedField(read_only=True),
        "port_b": serializers.PrimaryKeyRelatedField(read_only=True),
    }

    class Meta:
        model = Link
        fields = [
            "id",
            "url",
            "display",
            "fabric",
            "port_a",
            "port_b",
            "width",
            "speed",
            "rate_gbps",
            "state",
            "first_seen",
        ]
        brief_fields = ["id", "url", "port_a", "port_b", "width", "speed", "rate_gbps"]

    @extend_schema_field(_ChoiceDisplaySchema)
    def get_state(self, link: Link) -> dict:
        value = link_state(link.port_a.state, link.port_b.state)
        return {"value": value, "label": PortState(value).label}


def link_state(a: int, b: int) -> int:
    """The state of a link from its ports' PortState values: the lower known one.

    Unknown (0, e.g. from an ibnetdiscover file, which prints no state) counts only when both are.
    """
    known = [s for s in (a, b) if s != PortState.UNKNOWN]
    return min(known) if known else PortState.UNKNOWN


class SubnetManagerSerializer(BaseModelSerializer):
    url = IdentityUrlField(view_name="fabric-api:subnetmanager-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    fabric = FabricSerializer(nested=True, read_only=True)
    state = ChoiceDisplayField()

    class Meta:
        model = SubnetManager
        fields = [
            "id",
            "url",
            "display",
            "fabric",
            "guid",
            "lid",
            "priority",
            "state",
            "activity_count",
            "last_seen",
        ]
        brief_fields = ["id", "url", "display", "guid", "lid"]


class DiscoverySerializer(BaseModelSerializer):
    """A discovery or import with its counts, diff (natural keys) and warnings (with line numbers)."""

    url = IdentityUrlField(view_name="fabric-api:discovery-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    fabric = FabricSerializer(nested=True, read_only=True)

    class Meta:
        model = Discovery
        fields = [
            "id",
            "url",
            "display",
            "fabric",
            "started",
            "duration_s",
            "source",
            "filename",
            "status",
            "counts",
            "added",
            "removed",
            "changed",
            "diff",
            "warnings",
            "error",
            "rows_written",
            "worker",
        ]
        brief_fields = ["id", "url", "display", "started", "source", "status"]


class DiscoveryListSerializer(DiscoverySerializer):
    """A discovery without its ``diff`` (lists and import results: the first import of a
    5,000-node fabric lists ~18k added keys); the detail form has it."""

    class Meta(DiscoverySerializer.Meta):
        fields = [f for f in DiscoverySerializer.Meta.fields if f != "diff"]


# The serializers that nest each other's brief form get those fields once both exist.
declare_field(HostSerializer, "nodes", NodeSerializer(nested=True, many=True, read_only=True))
declare_field(
    FabricSerializer, "last_discovery", DiscoverySerializer(nested=True, read_only=True, allow_null=True)
)
extend_schema_field(PortSerializer(nested=True, allow_null=True))(RemoteEndField)
extend_schema_field(LinkSerializer(nested=True, allow_null=True))(PortSerializer.get_link)


# --- action payloads ---------------------------------------------------------------------------


class ImportRequestSerializer(serializers.Serializer):
    """Upload of a topology file: multipart ``file`` (plain or gzip), or ``text``."""

    fabric = serializers.SlugField(
        max_length=64, required=False, help_text="fabric name (created when missing)"
    )
    file = serializers.FileField(required=False)
    text = serializers.CharField(required=False, trim_whitespace=False)
    filename = serializers.CharField(required=False, max_length=255)
    replace = serializers.BooleanField(
        required=False,
        help_text="the file is the whole fabric: accept removing more than WEFT_IMPORT_MAX_REMOVE_SHARE of it",
    )


class ImportWouldRemoveSerializer(serializers.Serializer):
    """409: the import would remove too much of the stored fabric (``replace`` not set)."""

    error = serializers.CharField()
    would_remove = serializers.DictField(help_text="nodes, links, share, limit, examples")


class ImportResultSerializer(serializers.Serializer):
    fabric = FabricSerializer(nested=True)
    discovery = DiscoveryListSerializer()
    summary = serializers.DictField()


class ImportErrorSerializer(serializers.Serializer):
    """400: a located parse error (``error``, ``source`` = file name, ``line`` 1-based), or a
    request error keyed by field (``{"text": ["..."]}``, as every DRF validation error)."""

    error = serializers.CharField(required=False)
    source = serializers.CharField(allow_null=True, required=False)
    line = serializers.IntegerField(allow_null=True, required=False)


class NodeNameMapSerializer(serializers.Serializer):
    """A fabric's node-name map (``fabric.parsers.node_name_map`` format): GET shows it; PUT sets
    it from ``text`` (or a multipart ``file``, or a ``text/plain`` body) or from ``path`` (a file
    on the server, read again at every discovery); DELETE (or PUT with neither) removes it.
    ``error`` (GET only): empty, or why the stored map's path can no longer be read or parsed."""

    source = serializers.CharField(read_only=True, help_text="upload, path or none")
    text = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    path = serializers.CharField(required=False, allow_blank=True, max_length=1024)
    filename = serializers.CharField(required=False, max_length=255, write_only=True)
    file = serializers.FileField(required=False, write_only=True)
    entries = serializers.IntegerField(read_only=True)
    error = serializers.CharField(read_only=True, help_text="empty, or why the map path cannot be used now")


class NodeNameMapResultSerializer(NodeNameMapSerializer):
    """The map after a PUT/DELETE, with what changed on the stored nodes."""

    error = None
    renamed = serializers.IntegerField(read_only=True, help_text="nodes whose name changed")
    rehosted = serializers.IntegerField(read_only=True, help_text="nodes whose host changed")
    hosts_created = serializers.IntegerField(read_only=True)


class NodeNameMapErrorSerializer(serializers.Serializer):
    """400: the map was refused, nothing changed: ``error`` (all of it), ``errors`` one per bad
    line ``{"source", "line", "message", "text"}`` (``total`` counts them); or a request error
    (``{"detail": ...}``, ``{"text": [...]}``, as every DRF validation error)."""

    error = serializers.CharField(required=False)
    errors = serializers.ListField(child=serializers.DictField(), required=False)
    total = serializers.IntegerField(required=False)


class DiscoverQueuedSerializer(serializers.Serializer):
    fabric = FabricSerializer(nested=True)
    queued = serializers.BooleanField()
    task_id = serializers.CharField(allow_null=True)


# --- partitions -------------------------------------------------------------------------------


@extend_schema_field(
    {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": "^0[xX][0-9a-fA-F]{1,4}$"}]}
)
class PKeyField(serializers.Field):
    """A PKey in: an integer or ``"0x0123"`` (the membership bit 0x8000 is refused: membership is
    per member). Out: the integer (``pkey_hex`` gives the text)."""

    def to_internal_value(self, data):
        if isinstance(data, float) and not data.is_integer():  # int() would truncate it
            raise serializers.ValidationError("a PKey: an integer or 0x hex")
        try:
            value = int(data, 16) if isinstance(data, str) and data.lower().startswith("0x") else int(data)
        except (TypeError, ValueError, OverflowError):
            raise serializers.ValidationError("a PKey: an integer or 0x hex") from None
        if isinstance(data, bool) or not 0x0001 <= value <= 0x7FFE:
            raise serializers.ValidationError(
                "PKey must be 0x0001-0x7ffe (0x7fff is the default partition; the high bit is membership)"
            )
        return value

    def to_representation(self, value):
        return value


class PartitionMemberSerializer(serializers.ModelSerializer):
    """A member: ``port_guid`` (canonical) or an OpenSM keyword (ALL, ALL_CAS, ALL_SWITCHES,
    ALL_ROUTERS, SELF); ``port`` when the topology knows the GUID."""

    port = PortSerializer(nested=True, read_only=True, allow_null=True)
    verification = serializers.SerializerMethodField()

    class Meta:
        model = PartitionMember
        fields = ["port_guid", "membership", "reason", "port", "verification"]

    def get_verification(self, obj) -> str:
        """``"in fabric"`` (a port of the fabric: its P_Key table is read), ``"unverified: not in
        fabric"`` (a GUID no port has: an SR-IOV virtual function's, a host not discovered), or
        ``"keyword"``. ``context["in_fabric"]``: the member GUIDs that are ports of the fabric."""
        from ..parsers.partitions import KEYWORDS

        if obj.port_guid in KEYWORDS:
            return "keyword"
        known = self.context.get("in_fabric")
        on = obj.port_guid in known if known is not None else obj.port_id is not None
        return "in fabric" if on else "unverified: not in fabric"


class PartitionSerializer(BaseModelSerializer):
    """A partition (PKey) with its OpenSM flags (IBTA codes: ``mtu`` 1-5, ``rate`` e.g. 7 = 40
    Gb/s, ``sl`` 0-15, ``scope`` MGID scope nibbles) and what its last apply found
    (``applied_state``, ``applied_status`` in words: "applied to N of M members, K not verifiable"
    while members are not in the fabric, ``applied_members`` its counts, ``applied_at``,
    ``drift``). ``member_count``: members; the list itself is
    ``GET .../members/``."""

    url = IdentityUrlField(view_name="fabric-api:partition-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    fabric = serializers.PrimaryKeyRelatedField(queryset=Fabric.objects.all())
    pkey = PKeyField()
    member_count = serializers.IntegerField(read_only=True, default=None)
    applied_status = serializers.CharField(read_only=True)
    scope = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=15), required=False)

    class Meta:
        model = Partition
        fields = [
            "id", "url", "display", "fabric", "name", "pkey", "pkey_hex", "description", "ipoib",
            "mtu", "rate", "sl", "scope", "is_default", "source", "member_count", "applied_state",
            "applied_status", "applied_members", "applied_at", "applied_hash", "drift", "apply_error",
            "created", "updated",
        ]  # fmt: skip
        brief_fields = ["id", "url", "display", "name", "pkey", "pkey_hex", "applied_state"]
        read_only_fields = [
            "is_default", "source", "applied_state", "applied_members", "applied_at", "applied_hash",
            "drift", "apply_error", "created", "updated",
        ]  # fmt: skip

    def get_unique_together_validators(self):
        # the (fabric, name) constraint is judged by the service (``_check_name``: 400 on ``name``
        # naming the PKey that has it, and the owner-reserved names), not DRF's generic message
        return [v for v in super().get_unique_together_validators() if set(v.fields) != {"fabric", "name"}]

    def validate_mtu(self, value):
        from ..parsers.partitions import MTU_CODES

        if value is not None and value not in MTU_CODES:
            raise serializers.ValidationError(f"an IBTA MTU code: {sorted(MTU_CODES)} (4 = 2048 bytes)")
        return value

    def validate_rate(self, value):
        from ..parsers.partitions import RATE_CODES

        if value is not None and value not in RATE_CODES:
            raise serializers.ValidationError(f"an IBTA rate code: {sorted(RATE_CODES)} (7 = 40 Gb/s)")
        return value

    def validate_sl(self, value):
        if value is not None and value > 15:
            raise serializers.ValidationError("0-15")
        return value

    def validate_fabric(self, value):
        if self.instance is not None and value.pk != self.instance.fabric_id:
            raise serializers.ValidationError("a partition cannot move to another fabric")
        return value

    def validate(self, attrs):
        if self.instance is not None and self.instance.is_default and "pkey" in attrs:
            raise serializers.ValidationError({"pkey": ["the default partition keeps 0x7fff"]})
        return attrs


class MemberInputSerializer(serializers.Serializer):
    guid = serializers.CharField(max_length=20)
    membership = serializers.ChoiceField(
        choices=PartitionMember._meta.get_field("membership").choices, default="full"
    )


class SetMembersSerializer(serializers.Serializer):
    """``PUT .../members/``: the new member set (replace). With ``reason``, only the members of
    that reason are replaced (others stay)."""

    members = MemberInputSerializer(many=True, max_length=100_000)
    reason = serializers.ChoiceField(
        choices=PartitionMember._meta.get_field("reason").choices, required=False, allow_null=True
    )


class MemberChangeSerializer(serializers.Serializer):
    added = serializers.IntegerField()
    removed = serializers.IntegerField()
    changed = serializers.IntegerField()
    kept = serializers.IntegerField()


class ApplyRequestSerializer(serializers.Serializer):
    fabric = serializers.PrimaryKeyRelatedField(queryset=Fabric.objects.all())
    timeout = FiniteFloatField(min_value=1, max_value=300, required=False)


class PartitionApplySerializer(BaseModelSerializer):
    """A requested apply of a fabric's partitions (``fabric.PartitionApply``): ``state`` queued,
    running, coalesced (joined the apply running), done or failed; ``ok``; ``result`` the
    coalesced apply path's summary (``applies``, ``state``, ``error``, ``signalled``,
    ``checked_ports``, ``drift``/``unverified`` rows, ``seconds``)."""

    url = IdentityUrlField(view_name="fabric-api:partitionapply-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = PartitionApply
        fields = ["id", "url", "display", "fabric", "state", "source", "force", "timeout_s", "requested_by",
                  "created", "started", "finished", "ok", "result"]  # fmt: skip
        brief_fields = ["id", "url", "display", "state", "ok"]
        read_only_fields = fields

    #: result keys holding rows that name a partition (``{"partition", "pkey", "guid", …}``)
    PARTITION_ROWS = ("drift", "unverified")

    def to_representation(self, instance):
        """The record; for a tenant-scoped reader (``accounts.scoping``) its ``drift``/``unverified``
        rows keep only the partitions that reader sees (another tenant's pool or job partition
        does not exist for them: issue 22)."""
        data = super().to_representation(instance)
        result = data.get("result")
        request = self.context.get("request")
        if not isinstance(result, dict) or request is None or visible_tenant_ids(request.user) is None:
            return data
        seen = self.context.setdefault("_visible_pkeys", {})
        if instance.fabric_id not in seen:
            rows = scope_rows(Partition.objects.filter(fabric_id=instance.fabric_id), request.user)
            seen[instance.fabric_id] = {f"0x{pkey:04x}" for pkey in rows.values_list("pkey", flat=True)}
        visible = seen[instance.fabric_id]
        data["result"] = result = dict(result)
        for key in self.PARTITION_ROWS:
            if isinstance(result.get(key), list):
                result[key] = [r for r in result[key] if isinstance(r, dict) and r.get("pkey") in visible]
        return data


class PartitionImportSerializer(serializers.Serializer):
    fabric = serializers.PrimaryKeyRelatedField(queryset=Fabric.objects.all())
    text = serializers.CharField(trim_whitespace=False, max_length=16 * 1024 * 1024)
    filename = serializers.CharField(max_length=255, required=False, default="partitions.conf")
    mode = serializers.ChoiceField(choices=["merge", "replace"], default="merge")


class PartitionsConfSerializer(serializers.Serializer):
    fabric = serializers.CharField()
    text = serializers.CharField()
    sha256 = serializers.CharField()
    lines = serializers.IntegerField()
    longest_line = serializers.IntegerField()


class SwitchRolesSerializer(serializers.Serializer):
    """``POST fabrics/{id}/switch-roles/``: give ``role`` to the ``switches`` (GUIDs, LIDs or names)."""

    role = serializers.ChoiceField(choices=FabricRole.choices)
    switches = serializers.ListField(
        child=serializers.CharField(max_length=128), min_length=1, max_length=10000,
        help_text="switches by GUID, LID or name",
    )  # fmt: skip


class SwitchRolesResultSerializer(serializers.Serializer):
    fabric = serializers.CharField()
    role = serializers.ChoiceField(choices=FabricRole.choices)
    switches = serializers.IntegerField(help_text="switches named")
    changed = serializers.IntegerField(help_text="switches whose role changed")


class CableReadingSerializer(serializers.Serializer):
    """One reading of a port's module (``fabric.parsers.cablerecord.CableReading``): units in the
    names (°C, m, nm, mV, mA, dBm); None / [] when the tool did not give the value."""

    identifier = serializers.CharField(allow_null=True, help_text="form factor, e.g. QSFP56")
    technology = serializers.CharField(
        allow_null=True, help_text="e.g. 850 nm VCSEL, Copper cable unequalized"
    )
    cable_type = serializers.CharField(allow_null=True)
    vendor = serializers.CharField(allow_null=True)
    part_number = serializers.CharField(allow_null=True)
    serial_number = serializers.CharField(allow_null=True)
    revision = serializers.CharField(allow_null=True)
    length_m = serializers.FloatField(allow_null=True)
    wavelength_nm = serializers.IntegerField(allow_null=True)
    firmware = serializers.CharField(allow_null=True, help_text="the module's own firmware")
    supported_speeds = serializers.CharField(allow_null=True)
    temperature_c = serializers.FloatField(allow_null=True)
    temperature_low_c = serializers.FloatField(allow_null=True, help_text="the module's low alarm threshold")
    temperature_high_c = serializers.FloatField(
        allow_null=True, help_text="the module's high alarm threshold"
    )
    voltage_mv = serializers.FloatField(allow_null=True)
    bias_ma = serializers.ListField(child=serializers.FloatField(), help_text="per lane")
    rx_power_dbm = serializers.ListField(child=serializers.FloatField(), help_text="per lane")
    rx_power_low_dbm = serializers.FloatField(allow_null=True)
    rx_power_high_dbm = serializers.FloatField(allow_null=True)
    tx_power_dbm = serializers.ListField(child=serializers.FloatField(), help_text="per lane")
    tx_power_low_dbm = serializers.FloatField(allow_null=True)
    tx_power_high_dbm = serializers.FloatField(allow_null=True)
    alarms = serializers.ListField(child=serializers.CharField(), help_text="module alarm flags that are set")
    state = serializers.CharField(allow_null=True, help_text="mlxlink: the link's state")
    speed = serializers.CharField(allow_null=True)
    width = serializers.CharField(allow_null=True)
    fec = serializers.CharField(allow_null=True, help_text="mlxlink: the active FEC mode")
    recommendation = serializers.CharField(allow_null=True, help_text="mlxlink Troubleshooting Info")
    effective_ber = serializers.FloatField(allow_null=True)
    raw_ber = serializers.FloatField(allow_null=True)
    symbol_ber = serializers.FloatField(allow_null=True)
    effective_errors = serializers.IntegerField(allow_null=True)
    symbol_errors = serializers.IntegerField(allow_null=True)
    raw_errors_per_lane = serializers.ListField(child=serializers.IntegerField())
    raw_ber_per_lane = serializers.ListField(child=serializers.FloatField())
    raw = serializers.DictField(
        child=serializers.CharField(), help_text="values kept as printed (unit not established)"
    )
    problems = serializers.ListField(
        child=serializers.CharField(), help_text="fields the tool gave unreadable, located"
    )


class CableInfoSerializer(serializers.ModelSerializer):
    """A port's cable/transceiver reading (``fabric.CableInfo``; read with ``select_related("port__node")``)."""

    url = IdentityUrlField(view_name="fabric-api:cableinfo-detail")
    port = PortSerializer(nested=True, read_only=True)
    reading = CableReadingSerializer(source="data", read_only=True)

    class Meta:
        model = CableInfo
        fields = ["id", "url", "port", "taken", "source", "reading"]
