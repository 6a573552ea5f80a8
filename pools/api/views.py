"""Thin views of the pools API (``/api/pools/``): the GPU inventory (read, Viewer), the host
agents' reports (``POST agent/``, see ``pools.api.permissions``), tenants and pools (Admin
configures) and allocations (``allocate``/``release``: Operator of the tenant), all tenant-scoped
(``pools.access``: another tenant's rows are 404).

Inventory rows come only from reports (``pools.services.inventory``); the API does not edit them.
"""

from __future__ import annotations

from contextlib import contextmanager

from django.conf import settings
from django.db import transaction
from django.db.models import Prefetch
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, NotFound, PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import ApiToken
from accounts.roles import Role
from core.api.views import BRIEF_PARAM, BriefModeMixin, ReadOnlyViewSet

from .. import access, filtersets
from ..choices import ReportSource
from ..models import AgentBinding, Allocation, Gpu, HostInventory, MigSlice, Pool, Tenant
from ..parsers import GpuParseError, parse_gpu_report
from ..services import agents, tenancy
from ..services.allocation import (
    AllocationError,
    AllocationRequest,
    InvalidRequest,
    allocate,
    release,
)
from ..services.inventory import (
    GpuConflict,
    HostNotFound,
    ReportRejected,
    ingest_gpu_report,
    record_conflict,
    resolve_reporting_host,
)
from . import serializers
from .permissions import AgentReportPermission

_BRIEF = extend_schema_view(
    list=extend_schema(parameters=[BRIEF_PARAM]), retrieve=extend_schema(parameters=[BRIEF_PARAM])
)


@_BRIEF
class GpuViewSet(ReadOnlyViewSet):
    """GPUs of the hosts (present and missing), with their MIG slices and rail HCA."""

    queryset = Gpu.objects.with_host().prefetch_related(
        Prefetch("mig_slices", queryset=MigSlice.objects.order_by("gpu_instance_id", "compute_instance_id"))
    )
    serializer_class = serializers.GpuSerializer
    filterset_class = filtersets.GpuFilterSet
    ordering_fields = ["id", "index", "memory_total_mib", "product_name", "health", "state"]


@_BRIEF
class MigSliceViewSet(ReadOnlyViewSet):
    """MIG slices (a compute instance of a GPU instance) of every GPU."""

    queryset = MigSlice.objects.select_related("gpu")
    serializer_class = serializers.MigSliceSerializer
    filterset_class = filtersets.MigSliceFilterSet
    ordering_fields = ["id", "profile", "gpu_instance_id", "memory_total_mib"]


@_BRIEF
class HostInventoryViewSet(ReadOnlyViewSet):
    """Hosts that reported GPUs: last report, driver, HCAs seen by the agent, GPUs."""

    queryset = HostInventory.objects.select_related("host", "host__fabric").prefetch_related("host__gpus")
    serializer_class = serializers.HostInventorySerializer
    filterset_class = filtersets.HostInventoryFilterSet
    ordering_fields = ["id", "reported_at"]


class AgentReportView(APIView):
    """A host agent's report (``python -m pools.agent``): stored as the host's GPU inventory.

    In order: 401/403 (who may post, ``AgentReportPermission``); 413 for a body above
    ``WEFT_AGENT_MAX_BODY_BYTES`` (by its Content-Length, before it is parsed); 400 for a body
    that does not validate; 404 for a host Weft does not know; 403 when the token may not report
    for that host (``pools.services.agents``); 400 located for nvidia-smi output that does not
    parse or is out of bounds (``pools.services.inventory.check_bounds``); 409 when it lists GPUs
    stored on another host (nothing written; audited and alarmed, ``record_conflict``); else the
    report is stored (and an agent token's first report binds it to the host, in the same
    transaction).
    """

    permission_classes = [AgentReportPermission]
    serializer_class = serializers.AgentReportSerializer

    @extend_schema(
        request=serializers.AgentReportSerializer,
        responses={
            200: serializers.AgentResultSerializer,
            400: OpenApiResponse(
                serializers.LocatedErrorSerializer, description="malformed report (located)"
            ),
            403: OpenApiResponse(
                serializers.AgentRefusedSerializer,
                description="not allowed to post reports, or this token is bound to other hosts",
            ),
            404: OpenApiResponse(description="no such host: discover the host's fabric first"),
            409: OpenApiResponse(
                serializers.AgentConflictSerializer, description="the report lists GPUs of another host"
            ),
            413: OpenApiResponse(
                serializers.AgentRefusedSerializer, description="body above WEFT_AGENT_MAX_BODY_BYTES"
            ),
        },
        summary="Post a host report (Operator or the 'Host agent' group)",
    )
    def post(self, request):
        too_large = _too_large(request, settings.WEFT_AGENT_MAX_BODY_BYTES)
        if too_large is not None:
            return too_large
        data = serializers.AgentReportSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        try:
            host = resolve_reporting_host(v["host"], v["fabric"], v["hcas"])
        except HostNotFound as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_404_NOT_FOUND)
        token = request.auth if isinstance(request.auth, ApiToken) else None
        try:
            bind = agents.check_report(request.user, token, host)
        except agents.AgentRefused as exc:
            return _not_bound(exc)
        try:
            report = parse_gpu_report(
                v["nvidia_smi_xml"], source="nvidia_smi_xml", topo=v["topo"] or None, mig=v["mig"] or None
            )
        except GpuParseError as exc:
            field = "topo" if "(topo)" in exc.source else "mig" if "(mig)" in exc.source else "nvidia_smi_xml"
            return Response(
                {"detail": str(exc), "field": field, "line": exc.line, "element": exc.element},
                status=status.HTTP_400_BAD_REQUEST,
            )
        hcas = [dict(h, ports=[dict(p) for p in h["ports"]]) for h in v["hcas"]]
        try:
            with transaction.atomic():
                if bind:
                    agents.bind_first_report(token, host, user=request.user)
                summary = ingest_gpu_report(
                    host, report, source=ReportSource.AGENT, hcas=hcas, user=request.user
                )
        except agents.AgentRefused as exc:
            return _not_bound(exc)
        except ReportRejected as exc:
            return Response(
                {"detail": str(exc), "field": exc.field, "where": exc.where},
                status=status.HTTP_400_BAD_REQUEST,
            )
        except GpuConflict as exc:
            record_conflict(exc, source=ReportSource.AGENT, user=request.user)
            return Response(
                {"detail": str(exc), "code": "gpu_conflict", "conflicts": exc.conflicts},
                status=status.HTTP_409_CONFLICT,
            )
        return Response(summary)


def _too_large(request, limit: int) -> Response | None:
    """A 413 answer when the request's Content-Length is above ``limit`` bytes (the body is not
    read), else None. A missing or unreadable length is left to the parsers (an empty body)."""
    try:
        size = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    if size <= limit:
        return None
    return Response(
        {"detail": f"the report is {size} bytes, above the limit of {limit} bytes (WEFT_AGENT_MAX_BODY_BYTES)",
         "code": "too_large", "size": size, "limit": limit},
        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
    )  # fmt: skip


def _not_bound(exc: agents.AgentRefused) -> Response:
    return Response({"detail": str(exc), "code": "host_not_bound"}, status=status.HTTP_403_FORBIDDEN)


@extend_schema_view(
    update=extend_schema(
        request=serializers.AgentTokenHostsSerializer,
        responses={200: serializers.AgentTokenSerializer},
        summary="Set the hosts a token may report for (Admin; [] unbinds)",
    ),
    partial_update=extend_schema(
        request=serializers.AgentTokenHostsSerializer,
        responses={200: serializers.AgentTokenSerializer},
        summary="Set the hosts a token may report for (Admin; [] unbinds)",
    ),
)
class AgentTokenViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin,
                        mixins.UpdateModelMixin, viewsets.GenericViewSet):  # fmt: skip
    """API tokens as host-agent credentials (Admin): each with the hosts it may post reports for
    (``pools.services.agents``). ``PUT``/``PATCH {"hosts": [host ids]}`` replaces them (``[]``
    unbinds: an agent token then binds again on its next report, or is refused with
    ``WEFT_AGENT_BIND_ON_FIRST_REPORT`` off); audited ``agent.hosts``. Tokens are issued and
    revoked at ``/api/accounts/``."""

    queryset = ApiToken.objects.select_related("user").prefetch_related(
        Prefetch("agent_bindings", queryset=AgentBinding.objects.select_related("host__fabric"))
    )
    serializer_class = serializers.AgentTokenSerializer
    filterset_class = filtersets.AgentTokenFilterSet
    ordering_fields = ["id", "created", "last_used_at"]
    lookup_value_regex = r"\d+"
    read_role = Role.ADMIN
    write_role = Role.ADMIN

    def update(self, request, *args, **kwargs):
        token = self.get_object()
        body = serializers.AgentTokenHostsSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if token.user.is_superuser and not request.user.is_superuser and token.user_id != request.user.pk:
            raise PermissionDenied("Only a superuser changes the hosts of a superuser's token.")
        agents.set_bindings(token, body.validated_data["hosts"], user=request.user)
        return Response(serializers.AgentTokenSerializer(self.get_queryset().get(pk=token.pk),
                                                        context=self.get_serializer_context()).data)  # fmt: skip


def _refusal(exc: AllocationError) -> Response:
    return Response(exc.as_dict(), status=exc.status)


_REFUSALS = {
    400: OpenApiResponse(
        OpenApiTypes.OBJECT,
        description="bad input: {field: [messages]}, or {detail, code: 'invalid', field} from the service",
    ),
    409: OpenApiResponse(
        serializers.AllocationErrorSerializer, description="quota exceeded, not enough free, or already ended"
    ),
}


class TenantScopedMixin:
    """Lists and objects outside the caller's tenants do not exist for them (404); see ``pools.access``."""

    scope = None

    def get_queryset(self):
        return type(self).scope(super().get_queryset(), self.request.user)


@_BRIEF
class TenantViewSet(TenantScopedMixin, BriefModeMixin, viewsets.ModelViewSet):
    """Tenants and their members. Viewer reads the tenants they belong to; Admin configures.
    Writes and their audit entries: ``pools.services.tenancy`` (the pages' writer too)."""

    queryset = Tenant.objects.prefetch_related("memberships__user")
    serializer_class = serializers.TenantSerializer
    filterset_class = filtersets.TenantFilterSet
    ordering_fields = ["id", "name", "created"]
    lookup_value_regex = r"\d+"
    write_role = Role.ADMIN
    scope = staticmethod(access.scope_tenants)

    def perform_create(self, serializer):
        tenancy.write_tenant(serializer)

    def perform_update(self, serializer):
        with _gone(Tenant, serializer.instance.pk):
            tenancy.write_tenant(serializer)

    def perform_destroy(self, instance):
        with _gone(Tenant, instance.pk):
            tenancy.delete_tenant(instance, user=self.request.user)


@contextmanager
def _gone(model, pk: int):
    """A row deleted meanwhile is a 404; a refused delete a 409 (``TenancyConflict``)."""
    try:
        yield
    except model.DoesNotExist:
        raise NotFound(f"{model._meta.verbose_name} {pk} no longer exists") from None
    except tenancy.TenancyConflict as exc:
        raise Conflict(str(exc)) from None


class Conflict(APIException):
    status_code = 409
    default_detail = "conflict"
    default_code = "conflict"


@_BRIEF
class PoolViewSet(TenantScopedMixin, BriefModeMixin, viewsets.ModelViewSet):
    """GPU pools (a tenant's, or shared) with quotas, usage and their PKey. Viewer reads the pools
    of their tenants and the shared ones; Admin configures (a PKey too: ``pkey``, 400 on the
    field when out of range, taken on the fabric, inside a job PKey range in force on the fabric,
    or the pool has no fabric; a job range, ``job_isolation`` or ``fabric`` change that would take
    in a pool PKey is a 400 on that field). Writes, their audit entries and the re-marking of
    borrowed GPUs after a guarantee change: ``pools.services.tenancy`` (the pages' writer too)."""

    queryset = Pool.objects.select_related("tenant", "fabric", "partition")
    serializer_class = serializers.PoolSerializer
    filterset_class = filtersets.PoolFilterSet
    ordering_fields = ["id", "name", "priority_weight", "created"]
    lookup_value_regex = r"\d+"
    write_role = Role.ADMIN
    scope = staticmethod(access.scope_pools)

    def perform_create(self, serializer):
        tenancy.write_pool(serializer, user=self.request.user)

    def perform_update(self, serializer):
        with _gone(Pool, serializer.instance.pk):
            tenancy.write_pool(serializer, user=self.request.user)

    def perform_destroy(self, instance):
        with _gone(Pool, instance.pk):
            tenancy.delete_pool(instance, user=self.request.user)


@_BRIEF
class AllocationViewSet(TenantScopedMixin, BriefModeMixin, viewsets.ReadOnlyModelViewSet):
    """Allocations of the caller's tenants. ``allocate`` and ``release`` need the Operator role
    and an operator membership of the tenant (see ``pools.access``)."""

    queryset = Allocation.objects.select_related("pool", "tenant", "owner").prefetch_related(
        "items__gpu__host", "items__mig_slice"
    )
    serializer_class = serializers.AllocationSerializer
    filterset_class = filtersets.AllocationFilterSet
    ordering_fields = ["id", "created", "ended_at", "lease_expires_at", "state"]
    lookup_value_regex = r"\d+"
    action_roles = {"allocate": Role.OPERATOR, "release": Role.OPERATOR}
    scope = staticmethod(access.scope_allocations)

    @extend_schema(
        request=serializers.AllocateRequestSerializer,
        responses={201: serializers.AllocationSerializer, **_REFUSALS,
                   403: OpenApiResponse(description="not an operator of the tenant"),
                   404: OpenApiResponse(description="no such pool (or not one of your tenants')")},
        summary="Allocate GPUs, MIG slices or a shared-GPU fraction in a pool (Operator of the tenant)",
    )  # fmt: skip
    @action(detail=False, methods=["post"])
    def allocate(self, request):
        body = serializers.AllocateRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        v = body.validated_data
        pool = access.scope_pools(Pool.objects.all(), request.user).filter(pk=v["pool"]).first()
        if pool is None:
            raise NotFound(f"no pool {v['pool']}")
        try:
            tenant_id = access.allocation_tenant(request.user, pool, v["tenant"])
        except access.TenantRefused as exc:
            if exc.status == 404:
                raise NotFound(str(exc)) from None
            if exc.status == 403:
                raise PermissionDenied(str(exc)) from None
            return _refusal(InvalidRequest(str(exc), field=exc.field))
        req = AllocationRequest(
            kind=v["kind"], count=v["count"], gpu_ids=v["gpu_ids"], mig_profile=v["mig_profile"],
            memory_mib=v["memory_mib"], compute_pct=v["compute_pct"], job=v["job"], lease_s=v["lease_s"],
            tenant_id=tenant_id if pool.tenant_id is None else None,
        )  # fmt: skip
        try:
            alloc = allocate(pool.pk, req, user=request.user)
        except AllocationError as exc:
            return _refusal(exc)
        except Pool.DoesNotExist as exc:  # deleted since the lookup above
            raise NotFound(f"no pool {v['pool']}") from exc
        alloc = Allocation.objects.select_related("pool", "tenant", "owner").get(pk=alloc.pk)
        return Response(
            serializers.AllocationSerializer(alloc, context={"request": request}).data, status=201
        )

    @extend_schema(
        request=serializers.ReleaseRequestSerializer,
        responses={200: serializers.AllocationSerializer, **_REFUSALS,
                   403: OpenApiResponse(description="not an operator of the tenant")},
        summary="Release an allocation: its GPUs are free (Operator of the tenant)",
    )  # fmt: skip
    @action(detail=True, methods=["post"])
    def release(self, request, pk=None):
        alloc = self.get_object()
        body = serializers.ReleaseRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if not access.can_operate(request.user, alloc.tenant_id):
            raise PermissionDenied("releasing needs an operator membership of the tenant")
        try:
            release(alloc.pk, user=request.user, reason=body.validated_data["reason"])
        except AllocationError as exc:
            return _refusal(exc)
        alloc = Allocation.objects.select_related("pool", "tenant", "owner").get(pk=alloc.pk)
        return Response(serializers.AllocationSerializer(alloc, context={"request": request}).data)
