"""Thin views of the pools API (``/api/pools/``): the GPU inventory (read, Viewer) and the host
agents' reports (``POST agent/``, see ``pools.api.permissions``).

Inventory rows come only from reports (``pools.services.inventory``); the API does not edit them.
"""

from __future__ import annotations

from django.db.models import Prefetch
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from fabric.api.views import BRIEF_PARAM, ReadOnlyTopologyViewSet

from .. import filtersets
from ..choices import ReportSource
from ..models import Gpu, HostInventory, MigSlice
from ..parsers import GpuParseError, parse_gpu_report
from ..services.inventory import HostNotFound, ingest_gpu_report, resolve_reporting_host
from . import serializers
from .permissions import AgentReportPermission

_BRIEF = extend_schema_view(
    list=extend_schema(parameters=[BRIEF_PARAM]), retrieve=extend_schema(parameters=[BRIEF_PARAM])
)


@_BRIEF
class GpuViewSet(ReadOnlyTopologyViewSet):
    """GPUs of the hosts (present and missing), with their MIG slices and rail HCA."""

    queryset = Gpu.objects.with_host().prefetch_related(
        Prefetch("mig_slices", queryset=MigSlice.objects.order_by("gpu_instance_id", "compute_instance_id"))
    )
    serializer_class = serializers.GpuSerializer
    brief_serializer_class = serializers.BriefGpuSerializer
    filterset_class = filtersets.GpuFilterSet
    ordering_fields = ["id", "index", "memory_total_mib", "product_name", "health", "state"]


@_BRIEF
class MigSliceViewSet(ReadOnlyTopologyViewSet):
    """MIG slices (a compute instance of a GPU instance) of every GPU."""

    queryset = MigSlice.objects.select_related("gpu")
    serializer_class = serializers.MigSliceSerializer
    brief_serializer_class = serializers.BriefMigSliceSerializer
    filterset_class = filtersets.MigSliceFilterSet
    ordering_fields = ["id", "profile", "gpu_instance_id", "memory_total_mib"]


@_BRIEF
class HostInventoryViewSet(ReadOnlyTopologyViewSet):
    """Hosts that reported GPUs: last report, driver, HCAs seen by the agent, GPUs."""

    queryset = HostInventory.objects.select_related("host", "host__fabric").prefetch_related("host__gpus")
    serializer_class = serializers.HostInventorySerializer
    brief_serializer_class = serializers.BriefHostInventorySerializer
    filterset_class = filtersets.HostInventoryFilterSet
    ordering_fields = ["id", "reported_at"]


class AgentReportView(APIView):
    """A host agent's report (``python -m pools.agent``): stored as the host's GPU inventory."""

    permission_classes = [AgentReportPermission]
    serializer_class = serializers.AgentReportSerializer

    @extend_schema(
        request=serializers.AgentReportSerializer,
        responses={
            200: serializers.AgentResultSerializer,
            400: OpenApiResponse(
                serializers.LocatedErrorSerializer, description="malformed report (located)"
            ),
            404: OpenApiResponse(description="no such host: discover the host's fabric first"),
        },
        summary="Post a host report (Operator or the 'Host agent' group)",
    )
    def post(self, request):
        data = serializers.AgentReportSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        try:
            host = resolve_reporting_host(v["host"], v["fabric"], v["hcas"])
        except HostNotFound as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_404_NOT_FOUND)
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
        summary = ingest_gpu_report(host, report, source=ReportSource.AGENT, hcas=hcas, user=request.user)
        return Response(summary)
