"""Thin viewsets of the fabric API (``/api/fabric/``).

Topology objects (nodes, ports, links, hosts, SMs, discoveries) are read-only: they come from
discovery and import. Fabrics are created and edited by Admins; ``discover`` (Operator) queues a
live discovery, ``import`` (Admin) ingests an uploaded ibnetdiscover file, ``map`` returns the
server-side layout the map page draws. Partitions (PKeys): Viewer reads, Admin writes, imports
a ``partitions.conf`` and applies them on OpenSM (``fabric.services.partitions``). Every change is audited (``accounts.audit.record``) in the
transaction of the change (``AuditedWritesMixin``, ``fabric.services.requests``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from django.db import transaction
from django.db.models import Count
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import parsers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from accounts.api.mixins import AuditedWritesMixin
from accounts.roles import Role
from accounts.scoping import scope_rows
from core.api.parsers import StrictJSONParser
from core.api.views import BRIEF_PARAM, BriefModeMixin, ReadOnlyViewSet
from core.cache import get_or_compute
from core.errors import Conflict

from .. import filtersets
from ..models import (
    CableInfo,
    Discovery,
    Fabric,
    Host,
    Link,
    Node,
    Partition,
    PartitionApply,
    Port,
    SubnetManager,
)
from ..parsers.node_name_map import NodeNameMapError
from ..services import partitions as partition_service
from ..services.ingest import summary as ingest_summary
from ..services.names import MapUnreadable, fabric_names
from ..services.portactions import ACTIONS as PORT_ACTIONS
from ..services.portactions import request_port_action
from ..services.reference import compare_fabric
from ..services.requests import (
    discover_new_fabric,
    import_upload,
    request_discovery,
    set_node_name_map,
)
from ..services.roles import set_switch_roles
from ..upload import GZIP_MAGIC, UploadError, read_limited, topology_text
from ..upload import max_bytes as max_upload_bytes
from . import serializers
from .maplayout import build_live, build_map, edges_part, map_cache_key, map_edge_detail

IMPORT_REQUEST = {
    "multipart/form-data": serializers.ImportRequestSerializer,
    "application/json": serializers.ImportRequestSerializer,
    "text/plain": OpenApiTypes.STR,
    "application/gzip": OpenApiTypes.BINARY,
}


#: the 503 of work for a fabric whose collector site has no live worker (``core.sites.SiteDown``)
SITE_DOWN_RESPONSE = OpenApiResponse(
    OpenApiTypes.OBJECT,
    description="the fabric's collector site has no live worker: {detail, site, queue, up, workers, "
    "down_since}; nothing was queued",
)


REPLACE_PARAM = OpenApiParameter(
    "replace", OpenApiTypes.BOOL, description="for raw bodies: the file is the whole fabric (see 409)"
)


class PlainTextParser(parsers.BaseParser):
    """Raw topology text (``Content-Type: text/plain``) as bytes."""

    media_type = "text/plain"

    def parse(self, stream, media_type=None, parser_context=None):
        return {"raw": stream.read(max_upload_bytes() + 1)}  # more is refused


class GzipParser(PlainTextParser):
    media_type = "application/gzip"


class OctetStreamParser(PlainTextParser):
    media_type = "application/octet-stream"


@extend_schema_view(
    list=extend_schema(parameters=[BRIEF_PARAM]), retrieve=extend_schema(parameters=[BRIEF_PARAM])
)
class NodeViewSet(ReadOnlyViewSet):
    """Switches, CAs and routers; the detail form lists the ports with their links and remote ends."""

    queryset = Node.objects.with_fabric_and_host()
    serializer_class = serializers.NodeSerializer
    filterset_class = filtersets.NodeFilterSet
    ordering_fields = ["id", "name", "description", "lid", "node_guid", "tier", "node_type"]

    def get_queryset(self):
        if self.action == "retrieve" and not self.brief:
            return Node.objects.with_linked_ports()
        return super().get_queryset()

    def get_serializer_class(self):
        if self.action == "retrieve" and not self.brief:
            return serializers.NodeDetailSerializer
        return super().get_serializer_class()


@extend_schema_view(
    list=extend_schema(parameters=[BRIEF_PARAM]), retrieve=extend_schema(parameters=[BRIEF_PARAM])
)
class PortViewSet(ReadOnlyViewSet):
    """Ports with state, width, speed, rate, link and remote end."""

    queryset = Port.objects.with_link()
    serializer_class = serializers.PortSerializer
    filterset_class = filtersets.PortFilterSet
    ordering_fields = ["id", "port_num", "lid", "state", "rate_gbps"]
    action_roles = {"port_action": Role.OPERATOR}

    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT, description="{action, port, state, phys_state}"),
            400: OpenApiResponse(description="unknown action or no confirm"),
            409: OpenApiResponse(description="refused: a CA port, the SM's own path (the reason in detail)"),
            502: OpenApiResponse(description="the tool failed"),
            503: SITE_DOWN_RESPONSE,
        },
        description="Run ``action`` (disable, enable, reset, clear_counters) on this switch port: body "
        '``{"action": "disable", "confirm": true}`` (Operator; audited; rules in '
        "``fabric.services.portactions``).",
    )
    @action(detail=True, methods=["post"], url_path="actions")
    def port_action(self, request, pk=None):
        """Disable / enable / reset a switch port or clear its counters (Operator)."""
        port = self.get_object()
        data = request.data if isinstance(request.data, Mapping) else {}
        name = str(data.get("action", ""))
        if name not in PORT_ACTIONS:
            raise ValidationError({"action": [f"one of {', '.join(PORT_ACTIONS)}"]})
        if data.get("confirm") not in (True, "1", "true", 1):
            raise ValidationError({"confirm": ["send confirm: true to run the action"]})
        result = request_port_action(port, name, user=request.user)  # refused 409, failed 502 (api/errors.py)
        return Response(result.as_dict())


@extend_schema_view(
    list=extend_schema(parameters=[BRIEF_PARAM]), retrieve=extend_schema(parameters=[BRIEF_PARAM])
)
class LinkViewSet(ReadOnlyViewSet):
    """Links (cables): two ports, unordered; width/speed/rate as negotiated."""

    queryset = Link.objects.with_ends()
    serializer_class = serializers.LinkSerializer
    filterset_class = filtersets.LinkFilterSet
    ordering_fields = ["id", "rate_gbps", "speed", "width"]


@extend_schema_view(
    list=extend_schema(parameters=[BRIEF_PARAM]), retrieve=extend_schema(parameters=[BRIEF_PARAM])
)
class HostViewSet(ReadOnlyViewSet):
    """Machines grouping CAs by the host name of their NodeDescription."""

    queryset = Host.objects.with_nodes()
    serializer_class = serializers.HostSerializer
    filterset_class = filtersets.HostFilterSet
    ordering_fields = ["id", "name"]


@extend_schema_view(
    list=extend_schema(parameters=[BRIEF_PARAM]), retrieve=extend_schema(parameters=[BRIEF_PARAM])
)
class PartitionApplyViewSet(ReadOnlyViewSet):
    """Requested applies of the fabrics' partitions, newest first (``POST partitions/apply/``
    answers with one): queued, running, coalesced, done or failed, with the result."""

    queryset = PartitionApply.objects.select_related("requested_by")
    serializer_class = serializers.PartitionApplySerializer
    filterset_fields = ["fabric", "state"]
    ordering_fields = ["id", "created"]


@extend_schema_view(
    list=extend_schema(parameters=[BRIEF_PARAM]), retrieve=extend_schema(parameters=[BRIEF_PARAM])
)
class SubnetManagerViewSet(ReadOnlyViewSet):
    """Subnet managers seen on each fabric (SMInfo)."""

    queryset = SubnetManager.objects.with_fabric()
    serializer_class = serializers.SubnetManagerSerializer
    filterset_class = filtersets.SubnetManagerFilterSet
    ordering_fields = ["id", "priority", "state", "lid"]


@extend_schema_view(
    list=extend_schema(parameters=[BRIEF_PARAM]), retrieve=extend_schema(parameters=[BRIEF_PARAM])
)
class DiscoveryViewSet(ReadOnlyViewSet):
    """Discoveries and imports, newest first, with counts, diff and warnings."""

    queryset = Discovery.objects.with_fabric()
    serializer_class = serializers.DiscoverySerializer
    filterset_class = filtersets.DiscoveryFilterSet
    ordering_fields = ["id", "started", "duration_s", "added", "removed", "changed"]

    def get_serializer_class(self):
        if (
            self.action == "list"
            and not self.brief
            and self.request.query_params.get("diff") not in {"1", "true"}
        ):
            return serializers.DiscoveryListSerializer
        return super().get_serializer_class()


def _read_upload(data) -> tuple[str, str]:
    """Return ``(text, filename)`` from the request data; gzip is recognised by its magic number.

    Raises:
        ValidationError: no file/text, or a corrupt gzip stream.
    """
    missing = ValidationError(
        {"file": ["send a topology file (multipart 'file'), 'text', or a text/plain body"]}
    )
    if not isinstance(data, Mapping):  # a JSON list or scalar body
        raise missing
    filename = data.get("filename") or ""
    if not isinstance(filename, str):
        raise ValidationError({"filename": ["must be a string"]})
    if len(filename) > 255 or any(ord(ch) < 32 or 0xD800 <= ord(ch) <= 0xDFFF for ch in filename):
        raise ValidationError({"filename": ["at most 255 printable characters"]})
    try:
        if "raw" in data:
            raw = data["raw"]
            if len(raw) > max_upload_bytes():
                raise UploadError(f"{filename or 'upload'}: larger than {max_upload_bytes()} bytes")
        elif data.get("file") is not None:
            upload = data["file"]
            if not hasattr(upload, "read"):  # a form field or JSON value, not a file part
                raise ValidationError({"file": ["must be a file (multipart upload); send text as 'text'"]})
            filename = filename or upload.name
            raw = read_limited(upload, filename)
        elif data.get("text"):
            if not isinstance(data["text"], str):
                raise ValidationError({"text": ["must be a string (the topology file's text)"]})
            try:
                raw = data["text"].encode("utf-8")
            except UnicodeEncodeError as exc:  # a lone surrogate (\ud800) in the JSON string
                raise ValidationError({"text": [f"not valid Unicode at character {exc.start}"]}) from exc
        else:
            raise missing
        text = topology_text(raw, filename or "upload")
    except UploadError as exc:
        raise ValidationError({"file": [str(exc)]}) from exc
    if raw[:2] == GZIP_MAGIC and filename.endswith(".gz"):
        filename = filename[:-3]
    return text, filename or "upload"


@extend_schema_view(
    list=extend_schema(parameters=[BRIEF_PARAM]), retrieve=extend_schema(parameters=[BRIEF_PARAM])
)
class FabricViewSet(AuditedWritesMixin, BriefModeMixin, viewsets.ModelViewSet):
    """Fabrics (IB subnets): Viewer reads, Admin edits, Operator runs discovery, Admin imports."""

    queryset = Fabric.objects.with_counts()
    serializer_class = serializers.FabricSerializer
    filterset_class = filtersets.FabricFilterSet
    ordering_fields = ["id", "name", "created"]
    lookup_value_regex = r"\d+"
    read_role = Role.VIEWER
    write_role = Role.ADMIN
    action_roles = {"discover": Role.OPERATOR, "import_file": Role.ADMIN, "import_new": Role.ADMIN}
    #: GET of the node-name map is a read (Viewer); PUT/DELETE are Admin (``write_role``)
    audit_prefix = "fabric"  # create: the validated fields (JSON scalars, tool_env); update: the diff

    def perform_create(self, serializer) -> None:
        """Create (audited), then queue its first discovery when it has live access, on commit."""
        with transaction.atomic():
            super().perform_create(serializer)
            discover_new_fabric(serializer.instance, self.request.user)

    @extend_schema(
        request=None,
        responses={
            202: serializers.DiscoverQueuedSerializer,
            409: OpenApiResponse(description="the fabric has no live access (imported from a file)"),
            503: SITE_DOWN_RESPONSE,
        },
    )
    @extend_schema(
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT, description="the compare report")},
        description="The fabric against its reference topology (``fabric.compare.compare``): missing, extra "
        'and miswired links, missing and extra nodes, links below the reference\'s width/speed; ``{"reference": '
        'null, "detail": …}`` when no reference is set (an Admin sets it on the fabric\'s compare page).',
    )
    @action(detail=True, methods=["get"])
    def compare(self, request, pk=None):
        """The compare report of this fabric against its reference topology (Viewer)."""
        fabric = self.get_object()
        report = compare_fabric(fabric)
        if report is None:
            return Response({"reference": None, "detail": f"{fabric.name} has no reference topology"})
        return Response(report)

    @action(detail=True, methods=["post"])
    def discover(self, request, pk=None):
        """Queue a live discovery (ibnetdiscover) of this fabric now (Operator)."""
        fabric = self.get_object()
        task_id = request_discovery(fabric, request.user)  # NoLiveAccess: 409 (api/errors.py)
        return Response(
            {
                "fabric": serializers.FabricSerializer(
                    fabric, nested=True, context={"request": request}
                ).data,
                "queued": True,
                "task_id": task_id,
            },
            status=status.HTTP_202_ACCEPTED,
        )

    def _import(self, request, fabric_name: str | None):
        data = request.data
        if not isinstance(data, Mapping):  # a JSON list, string, number or null body
            raise ValidationError(
                {"text": ["send a JSON object with 'text', a multipart 'file' or a text body"]}
            )
        replace = str(data.get("replace") or request.query_params.get("replace") or "").lower() in {
            "1",
            "true",
            "yes",
            "on",
        }
        if fabric_name is None:
            name_ser = serializers.ImportRequestSerializer(
                data={"fabric": data.get("fabric") or request.query_params.get("fabric")}
            )
            name_ser.is_valid(raise_exception=True)
            fabric_name = name_ser.validated_data.get("fabric")
            if not fabric_name:
                raise ValidationError({"fabric": ["give the name of the fabric to import into"]})
        if "raw" in data:
            data = {"raw": data["raw"], "filename": request.query_params.get("filename", "")}
        text, filename = _read_upload(data)
        # ImportWouldRemove: 409, TopologyParseError: 400 located (api/errors.py)
        discovery = import_upload(fabric_name, text, filename=filename, user=request.user, replace=replace)
        ctx = {"request": request}
        return Response(
            {
                "fabric": serializers.FabricSerializer(discovery.fabric, nested=True, context=ctx).data,
                "discovery": serializers.DiscoveryListSerializer(discovery, context=ctx).data,
                "summary": ingest_summary(discovery),
            },
            status=status.HTTP_201_CREATED,
        )

    _import_schema = extend_schema(
        request=IMPORT_REQUEST,
        parameters=[
            OpenApiParameter(
                "filename", OpenApiTypes.STR, description="file name for raw bodies (warnings cite it)"
            ),
            REPLACE_PARAM,
        ],
        responses={
            201: serializers.ImportResultSerializer,
            400: OpenApiResponse(serializers.ImportErrorSerializer, description="located parse error"),
            409: OpenApiResponse(
                serializers.ImportWouldRemoveSerializer, description="would remove too much; send replace"
            ),
        },
    )
    _parsers = [
        parsers.MultiPartParser,
        parsers.FormParser,
        StrictJSONParser,
        PlainTextParser,
        GzipParser,
        OctetStreamParser,
    ]

    @_import_schema
    @action(detail=True, methods=["post"], url_path="import", parser_classes=_parsers)
    def import_file(self, request, pk=None):
        """Import an ibnetdiscover file into this fabric (Admin). Multipart ``file`` (plain or
        gzip), JSON/form ``text``, or a raw ``text/plain``/``application/gzip`` body."""
        fabric = self.get_object()
        return self._import(request, fabric.name)

    @extend_schema(
        operation_id="fabric_fabrics_import_new",
        request=IMPORT_REQUEST,
        parameters=[
            OpenApiParameter("fabric", OpenApiTypes.STR, description="fabric name for raw bodies"),
            OpenApiParameter("filename", OpenApiTypes.STR, description="file name for raw bodies"),
            REPLACE_PARAM,
        ],
        responses={
            201: serializers.ImportResultSerializer,
            400: OpenApiResponse(serializers.ImportErrorSerializer, description="located parse error"),
            409: OpenApiResponse(
                serializers.ImportWouldRemoveSerializer, description="would remove too much; send replace"
            ),
        },
    )
    @action(detail=False, methods=["post"], url_path="import", parser_classes=_parsers)
    def import_new(self, request):
        """Import an ibnetdiscover file into the fabric named ``fabric`` (created when missing, Admin)."""
        return self._import(request, None)

    @extend_schema(
        methods=["PUT"],
        request={
            "application/json": serializers.NodeNameMapSerializer,
            "multipart/form-data": serializers.NodeNameMapSerializer,
            "text/plain": OpenApiTypes.STR,
        },
        responses={200: serializers.NodeNameMapResultSerializer, 400: serializers.NodeNameMapErrorSerializer},
    )
    @extend_schema(methods=["GET"], responses={200: serializers.NodeNameMapSerializer})
    @extend_schema(methods=["DELETE"], responses={200: serializers.NodeNameMapResultSerializer})
    @action(detail=True, methods=["get", "put", "delete"], url_path="node-name-map", parser_classes=_parsers)
    def node_name_map(self, request, pk=None):
        """This fabric's node-name map (GUID → the name admins see; ``ibnetdiscover(8)`` format).
        PUT (Admin) sets it from ``text``/``file``/a ``text/plain`` body, or from ``path`` (a file
        on this server under ``WEFT_NODE_NAME_MAP_DIRS``), renames the stored nodes and audits the
        change; a map with bad lines is refused with all of them located (400, nothing changed).
        DELETE (Admin) removes it (nodes show their descriptions again)."""
        fabric = self.get_object()
        if request.method == "GET":
            doc = {"source": "upload" if fabric.node_name_map else "path" if fabric.node_name_map_path else "none",
                   "text": fabric.node_name_map, "path": fabric.node_name_map_path, "error": ""}  # fmt: skip
            try:
                doc["entries"] = len(fabric_names(fabric))
            except (MapUnreadable, NodeNameMapError) as exc:
                doc.update(entries=0, error=str(exc))
            return Response(doc)
        text, path, filename = "", "", ""
        if request.method == "PUT":
            data = request.data
            if not isinstance(data, Mapping):
                raise ValidationError({"text": ["send a JSON object with 'text' or 'path', or a text body"]})
            path = data.get("path") or ""
            if not isinstance(path, str):
                raise ValidationError({"path": ["must be a string"]})
            if "raw" in data or data.get("file") is not None or data.get("text"):
                if "raw" in data:
                    data = {"raw": data["raw"], "filename": request.query_params.get("filename", "")}
                text, filename = _read_upload(data)
                filename = "" if filename == "upload" else filename
        try:
            result = set_node_name_map(fabric, text=text, path=path, filename=filename, user=request.user)
        except NodeNameMapError as exc:
            return Response({"error": str(exc), "errors": exc.as_dicts(), "total": exc.total},
                            status=status.HTTP_400_BAD_REQUEST)  # fmt: skip
        except (MapUnreadable, ValueError) as exc:
            return Response({"error": str(exc), "errors": [{"source": path or filename, "line": 0,
                             "message": str(exc), "text": ""}], "total": 1},
                            status=status.HTTP_400_BAD_REQUEST)  # fmt: skip
        source = "upload" if text else "path" if path else "none"
        return Response({"source": source, "text": text, "path": path, **result})

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "part",
                str,
                enum=["edges"],
                description="edges: only the node ids and the edges (state, down cables, counts), for "
                "an open map to recolour its cables in place",
            )
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    @action(detail=True, methods=["get"], url_path="map")
    def map(self, request, pk=None):
        """The map layout: parallel arrays of nodes (id, guid, name, type, tier, lid, host, x, y)
        and aggregated edges (a, b, n cables, down cables, state, speed/width indexes, rate Gb/s);
        with ``?part=edges`` only the edges and a digest of the nodes (``maplayout.edges_part``)."""
        part = request.query_params.get("part", "")
        if part not in ("", "edges"):
            raise ValidationError({"part": f"unknown part {part!r}: use edges or leave it out"})
        fabric = self.get_object()
        payload = get_or_compute(map_cache_key(fabric), lambda: build_map(fabric), 300)
        # live utilisation, congestion and alarms change every sweep: read at each request
        live = build_live(fabric, payload)
        return Response({**(edges_part(payload) if part == "edges" else payload), "live": live})

    @extend_schema(
        parameters=[
            OpenApiParameter("a", int, required=True, description="node id at one end"),
            OpenApiParameter("b", int, required=True, description="node id at the other end"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    @action(detail=True, methods=["get"], url_path="map-edge")
    def map_edge(self, request, pk=None):
        """One edge of the map (the cables between nodes ``a`` and ``b``), for the map's link panel:
        ``{"a": {id, name, guid}, "b": {...}, "cables": [{"a": end, "b": end}], "alarms": [...]}``
        where an end is ``{port_id, port_num, state, width, speed, rate_gbps, utilisation,
        congestion, xmit_wait_per_s, error_deltas, stale}`` (utilisation and congestion 0..1,
        ``telemetry.PortCounters``; None without a rate) and ``alarms`` the open alarms on those
        ports or keyed by one of those cables (id, code, severity, message, object); ``jobs`` the
        jobs whose routed paths cross those cables, one entry per direction (``{job, name, state,
        url, paths, share, port_key, from, to}``, ``share`` the *estimated* part of that port's
        traffic; the scheduler's overlay ``edge_jobs``). 400 for a missing or non-integer id; 404
        when a node is not on this fabric."""
        fabric = self.get_object()
        return Response(map_edge_detail(fabric, request.query_params, request.user))

    @extend_schema(
        request=serializers.SwitchRolesSerializer, responses={200: serializers.SwitchRolesResultSerializer}
    )
    @action(detail=True, methods=["post"], url_path="switch-roles")
    def switch_roles(self, request, pk=None):
        """Give switches a role (Admin): storage and management switches are no leaves or spines
        of the scheduler's locality tree (``fabric.services.roles``; audited)."""
        fabric = self.get_object()
        body = serializers.SwitchRolesSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = set_switch_roles(  # RoleError: 400 on switches (api/errors.py)
            fabric, body.validated_data["switches"], body.validated_data["role"], user=request.user
        )
        return Response(result)

    @extend_schema(responses={200: serializers.PartitionsConfSerializer})
    @action(detail=True, methods=["get"], url_path="partitions-conf")
    def partitions_conf(self, request, pk=None):
        """The OpenSM ``partitions.conf`` Weft generates for this fabric (``text``; what
        ``POST /api/fabric/partitions/apply/`` writes), with its SHA-256 and longest line."""
        fabric = self.get_object()
        text = partition_service.generate_conf(fabric)
        lines = text.splitlines()
        return Response(
            {
                "fabric": fabric.name,
                "text": text,
                "sha256": hashlib.sha256(text.encode()).hexdigest(),
                "lines": len(lines),
                "longest_line": max(map(len, lines), default=0),
            }
        )


@extend_schema_view(
    list=extend_schema(parameters=[BRIEF_PARAM]), retrieve=extend_schema(parameters=[BRIEF_PARAM])
)
class PartitionViewSet(BriefModeMixin, viewsets.ModelViewSet):
    """Partitions (PKeys) of the fabrics: Viewer reads, Admin creates, edits, deletes, sets members,
    imports a ``partitions.conf`` and applies them (OpenSM re-reads the file; ports verified with
    ``smpquery pkeys``). Every write goes through ``fabric.services.partitions`` (one transaction,
    audited); a change makes the partition ``pending`` until the next apply."""

    queryset = Partition.objects.select_related("fabric").annotate(member_count=Count("members"))
    serializer_class = serializers.PartitionSerializer
    filterset_class = filtersets.PartitionFilterSet
    ordering_fields = ["id", "pkey", "name", "applied_at"]
    lookup_value_regex = r"\d+"
    read_role = Role.VIEWER
    write_role = Role.ADMIN

    def get_queryset(self):
        """Another tenant's pool and job partitions do not exist for a tenant member
        (``accounts.scoping``)."""
        return scope_rows(super().get_queryset(), self.request.user)

    def _save(self, serializer, action: str):
        instance = serializer.instance or Partition()
        for k, v in serializer.validated_data.items():
            setattr(instance, k, v)
        # PartitionOwned: 409, PartitionError: 400 on its field (api/errors.py)
        partition_service.save_partition(instance, user=self.request.user, action=action)
        serializer.instance = instance

    def perform_create(self, serializer) -> None:
        self._save(serializer, "partition.create")

    def perform_update(self, serializer) -> None:
        self._save(serializer, "partition.update")

    def perform_destroy(self, instance) -> None:
        try:
            partition_service.delete_partition(instance, user=self.request.user)
        except partition_service.PartitionOwned:
            raise  # 409 (api/errors.py)
        except partition_service.PartitionError as exc:
            raise ValidationError({"detail": str(exc)}) from exc

    def create(self, request, *args, **kwargs):
        resp = super().create(request, *args, **kwargs)
        resp.data["member_count"] = 0
        return resp

    @extend_schema(methods=["GET"], responses={200: serializers.PartitionMemberSerializer(many=True)})
    @extend_schema(
        methods=["PUT"],
        request=serializers.SetMembersSerializer,
        responses={200: serializers.MemberChangeSerializer},
    )
    @action(detail=True, methods=["get", "put"])
    def members(self, request, pk=None):
        """GET: the members (GUID or keyword, membership, reason, port). PUT (Admin): replace them
        (``{"members": [{"guid", "membership"}], "reason": "extra"}``; with ``reason`` only that
        reason's members are replaced)."""
        partition = self.get_object()
        if request.method == "GET":
            rows = list(partition.members.select_related("port__node").order_by("port_guid"))
            in_fabric = set(
                Port.objects.filter(
                    node__fabric=partition.fabric_id, port_guid__in=partition.members.values("port_guid")
                ).values_list("port_guid", flat=True)
            )
            context = {"request": request, "in_fabric": in_fabric}
            return Response(serializers.PartitionMemberSerializer(rows, many=True, context=context).data)
        body = serializers.SetMembersSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            change = partition_service.set_members(
                partition,
                [(m["guid"], m["membership"]) for m in body.validated_data["members"]],
                reason=body.validated_data.get("reason"),
                user=request.user,
            )
        except partition_service.PartitionOwned:
            raise  # 409 (api/errors.py)
        except partition_service.PartitionError as exc:
            raise ValidationError({"members": [str(exc)]}) from exc
        return Response(change.as_dict())

    @extend_schema(
        request=serializers.ApplyRequestSerializer,
        responses={202: serializers.PartitionApplySerializer, 503: SITE_DOWN_RESPONSE},
    )
    @action(detail=False, methods=["post"])
    def apply(self, request):
        """Apply the partitions of ``fabric`` (Admin): 202 at once with the apply's record (``id``,
        ``url``: ``GET /api/fabric/partition-applies/<id>/``), never waiting for OpenSM. A worker
        then writes OpenSM's partitions file, makes the master SM re-read it and verifies the
        ports (``timeout`` s, default ``WEFT_PARTITIONS_VERIFY_TIMEOUT_S``), through the one
        coalesced apply path (``fabric.services.partitions.request_apply``); the record ends
        ``done`` or ``failed`` with the result."""
        body = serializers.ApplyRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        fabric = body.validated_data["fabric"]
        rec = partition_service.request_apply(
            fabric, user=request.user, source="api", timeout=body.validated_data.get("timeout")
        )
        data = serializers.PartitionApplySerializer(rec, context={"request": request}).data
        return Response(data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        request=serializers.PartitionImportSerializer,
        responses={
            201: OpenApiTypes.OBJECT,
            400: OpenApiResponse(serializers.ImportErrorSerializer, description="located parse error"),
            409: OpenApiResponse(OpenApiTypes.OBJECT, description="another change meanwhile; retry"),
        },
    )
    @action(detail=False, methods=["post"], url_path="import")
    def import_file(self, request):
        """Import a ``partitions.conf`` (``text``) into ``fabric`` (Admin): ``merge`` (default) creates
        or replaces the file's partitions by PKey, ``replace`` also deletes the others. Pools' and
        jobs' partitions are never changed or deleted (in the answer's ``kept``); a file that would
        change one (naming its owner), or that OpenSM would reject, is a 400 with its line; nothing
        is written."""
        body = serializers.PartitionImportSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        v = body.validated_data
        try:  # PartitionsParseError: 400 located (api/errors.py)
            summary = partition_service.import_partitions(
                v["fabric"], v["text"], source=v["filename"], mode=v["mode"], user=request.user
            )
        except partition_service.PartitionError as exc:  # a concurrent change: retry
            raise Conflict(str(exc)) from exc
        return Response(summary.as_dict(), status=status.HTTP_201_CREATED)


class CableInfoViewSet(ReadOnlyViewSet):
    """Cable and transceiver readings of ports (``fabric.services.cables``): vendor, part and serial
    number, length, type, temperature, per-lane Rx/Tx power and bias, and (mlxlink) FEC and BER;
    newest first. ``?latest=true`` keeps each port's latest reading, ``?port=<id>`` one port's
    history. Readings come from ibdiagnet ``--get_cable_info``, mlxlink, or ``manage.py cable_info
    --file`` (the lab's simulated ports have none)."""

    queryset = CableInfo.objects.select_related("port__node").order_by("-taken", "-pk")
    serializer_class = serializers.CableInfoSerializer
    filterset_class = filtersets.CableInfoFilterSet
    ordering_fields = ["id", "taken"]
