"""``GET /api/fabric/port-table/?fabric=<id>``: the ports table of ``telemetry.porttable`` as JSON
(the same filters and sorting as ``/ports/``, LimitOffset pagination with the API's ceiling)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.pagination import WeftLimitOffsetPagination
from core.params import int_param
from fabric.models import Fabric

from ..porttable import SORTS, BadParam, PortTableQuery, annotate_rows, fabric_norm, port_table, row_values


class PortTableView(APIView):
    """Every port of a fabric with its link, state, latest rates and error counts; Viewer."""

    read_role = "viewer"

    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        parameters=[
            OpenApiParameter("fabric", int, required=True),
            OpenApiParameter("state", str, description="port states, e.g. active,down"),
            OpenApiParameter("below", str, description="1: slower than the fabric's usual link"),
            OpenApiParameter("errors", str, description="1: an error total > 0; new: rose last interval"),
            OpenApiParameter("congested", str, description="1: congestion index >= congestion_min"),
            OpenApiParameter("congestion_min", float),
            OpenApiParameter("tier", str),
            OpenApiParameter("role", str),
            OpenApiParameter("type", str),
            OpenApiParameter("node", str, description="node name or GUID contains"),
            OpenApiParameter("stale", str),
            OpenApiParameter("sort", str, description=f"one of {', '.join(SORTS)}; '-' for descending"),
            OpenApiParameter("limit", int),
            OpenApiParameter("offset", int),
        ],  # fmt: skip
        description='{"count", "next", "previous", "norm": {"width", "speed", "rate_gbps"}, "results": '
        "[{node, port, peer, state, width, speed, rate_gbps, lid, xmit_bytes_per_s, rcv_bytes_per_s, "
        "utilisation, congestion, xmit_wait_per_s, error_deltas, error_total, stale, stale_reason, "
        "vendor, device, ...}]} (bytes/s, 0..1, ticks/s)",
    )
    def get(self, request: Request) -> Response:
        pk = int_param(request.query_params.get("fabric"))
        fabric = Fabric.objects.filter(pk=pk).first() if pk is not None else None
        if fabric is None:
            raise ValidationError({"fabric": ["give the id of an existing fabric"]})
        try:
            query = PortTableQuery.from_params(request.query_params)
        except BadParam as exc:
            raise ValidationError({exc.param: [str(exc)]}) from None
        norm = fabric_norm(fabric)
        paginator = WeftLimitOffsetPagination()
        page = paginator.paginate_queryset(port_table(fabric, query, norm), request, view=self)
        response = paginator.get_paginated_response(
            annotate_rows([row_values(p, norm) for p in page], request.user)
        )
        response.data["norm"] = {"width": norm.width, "speed": norm.speed, "rate_gbps": norm.rate_gbps}
        return response
