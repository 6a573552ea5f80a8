"""Routing API (Viewer and above): the routing report and a hop-by-hop trace of one fabric.

* ``GET /api/fabric/fabrics/{id}/routing/`` — the latest snapshot (when read, how, digest, what
  moved against the previous) and its report (``routing.report.routing_report``: per out port
  destination LIDs and CA-to-CA paths, balance, leaf up-port shares, hop histogram, credit loops);
  404 before the first read.
* ``GET /api/fabric/fabrics/{id}/routing/trace/?src=…&dst=…[&src_port=…&dst_port=…]`` — the path
  ``ibtracert`` would print; ``src``/``dst`` a LID, a GUID or a node name (``fabric.lookup``).
  400 for a text that names no port or several; a pair without a route is 200 with ``ok: false``
  and the reason.
* ``GET /api/fabric/fabrics/{id}/routing/snapshots/`` — the stored snapshots, newest first.
"""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.params import int_param
from fabric.models import Fabric

from ..models import RoutingSnapshot
from ..paths import RouteError, trace
from ..services.current import current_routes, routing_report_for
from ..services.lookup import EndpointError, endpoint_lid
from ..tables import CA

NO_ROUTES = "The forwarding tables of this fabric have not been read yet"


def snapshot_json(s: RoutingSnapshot) -> dict:
    """The API form of a snapshot row."""
    return {
        "id": s.pk,
        "taken": s.taken.isoformat(),
        "checked": s.checked.isoformat(),
        "source": s.source,
        "reason": s.reason,
        "digest": s.digest,
        "switches": s.switches,
        "duration_s": s.duration_s,
        "moved": s.moved,
        "warnings": s.warnings,
    }


class RoutingView(APIView):
    """The routing report of a fabric's latest forwarding tables; Viewer and above."""

    read_role = "viewer"

    @extend_schema(responses=OpenApiTypes.OBJECT, description=__doc__)
    def get(self, request: Request, fabric_id: int) -> Response:
        fabric = get_object_or_404(Fabric, pk=fabric_id)
        got = routing_report_for(fabric)
        if got is None:
            raise NotFound(NO_ROUTES)
        snap, rep = got
        return Response({"fabric": fabric.name, "snapshot": snapshot_json(snap), "report": rep})


class RoutingSnapshotsView(APIView):
    """The stored routing snapshots of a fabric, newest first; Viewer and above."""

    read_role = "viewer"

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, fabric_id: int) -> Response:
        fabric = get_object_or_404(Fabric, pk=fabric_id)
        rows = RoutingSnapshot.objects.filter(fabric=fabric).order_by("-taken", "-pk")
        return Response({"fabric": fabric.name, "results": [snapshot_json(s) for s in rows]})


def _port_param(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    value = int_param(raw, lo=1, hi=254)
    if value is None:
        raise ValidationError({name: ["a port number 1..254"]})
    return value


class RoutingTraceView(APIView):
    """The path between two ports over the stored forwarding tables (``ibtracert``'s answer)."""

    read_role = "viewer"

    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        parameters=[
            OpenApiParameter("src", str, required=True, description="source: LID, GUID or node name"),
            OpenApiParameter("dst", str, required=True, description="destination: LID, GUID or node name"),
            OpenApiParameter("src_port", int, description="source CA port (when the CA has several)"),
            OpenApiParameter("dst_port", int, description="destination CA port (when the CA has several)"),
        ],
    )
    def get(self, request: Request, fabric_id: int) -> Response:
        fabric = get_object_or_404(Fabric, pk=fabric_id)
        lids = {}
        errors = {}
        for end in ("src", "dst"):
            try:
                lids[end] = endpoint_lid(
                    fabric, request.query_params.get(end, ""), _port_param(request, f"{end}_port")
                )
            except EndpointError as exc:
                errors[end] = [str(exc)]
        if errors:
            raise ValidationError(errors)
        cur = current_routes(fabric)
        if cur is None:
            raise NotFound(NO_ROUTES)
        t = cur.tables
        body: dict = {
            "fabric": fabric.name,
            "snapshot": cur.snapshot.pk,
            "src_lid": lids["src"],
            "dst_lid": lids["dst"],
        }
        try:
            tr = trace(t, lids["src"], lids["dst"])
        except RouteError as exc:
            return Response({**body, "ok": False, "reason": exc.reason, "detail": str(exc), "hops": []})

        def end(kind_idx: tuple[int, int]) -> dict:
            kind, i = kind_idx
            if kind == CA:
                return {
                    "type": "ca",
                    "guid": t.ca_guids[i],
                    "port": t.ca_ports[i],
                    "name": t.ca_names[i],
                    "lid": t.ca_lids[i],
                }
            return {
                "type": "switch",
                "guid": t.switch_guids[i],
                "port": 0,
                "name": t.switch_names[i],
                "lid": t.switch_lids[i],
            }

        hops = [
            {
                "guid": t.switch_guids[h.switch],
                "name": t.switch_names[h.switch],
                "lid": t.switch_lids[h.switch],
                "in_port": h.in_port,
                "out_port": h.out_port,
            }  # fmt: skip
            for h in tr.hops
        ]
        return Response({**body, "ok": True, "src": end(tr.src), "dst": end(tr.dst), "hops": hops})
