"""Heatmap snapshot API: the whole switch × port matrix of a fabric for a page load.

``GET /api/fabric/heatmap/<fabric_id>/`` (Viewer) returns::

    {
      "fabric": {"id": 1, "name": "lab"},
      "now": "2026-11-29T19:40:00.123Z",          # server clock, to judge staleness in the page
      "poll_interval_s": 10.0,                     # configured sweep interval (WEFT_POLL_INTERVAL_S)
      "sweep": {"id", "at", "interval_s", "duration_s", "status", "ports", "stale",
                "error", "mechanism"} | null,      # the fabric's latest sweep
      "columns": 36,                               # highest switch port number with a cell
      "tiers": [{"tier": 3, "name": "core", "rows": 2}, ...],   # row groups, in row order
      "rows": [{"node": id, "guid", "name", "description", "lid", "tier", "tier_name", "num_ports"}],
      "cells": [[port_id, node_id, port_num, utilisation, congestion, error_flag, stale, down], ...]
    }

Rows are switches grouped core, spine, leaf, then switches of unknown tier, then the rows of other
apps (``register_rows``: the devices app's Ethernet switches, ``devices.heatmap``), each group sorted by
name (``Node.name``: the node-name map's, else the trimmed description; ``description`` is the raw
NodeDescription); ``cells`` use the format of ``telemetry.producer`` (the same as the websocket
deltas, so the page applies both the same way).

``GET /api/fabric/heatmap/<fabric_id>/cells/<port_id>/`` (Viewer) returns one cell's tooltip:
raw counters as read (data in 4-byte words, PortXmitWait in ticks), rates (bytes/s, packets/s,
ticks/s), utilisation, congestion, error deltas, flags, the remote end of the link, and what the
apps above telemetry say about the port (``annotations``, ``telemetry.porttable``: the
scheduler's ``jobs``, the jobs whose routed paths leave by this port with their *estimated*
share of its traffic).

``GET /api/fabric/heatmap/<fabric_id>/annotations/?ports=<id>,<id>…`` (Viewer): the same
``annotations`` for up to :data:`MAX_ANNOTATED` ports of the fabric at once,
``{"ports": {"<port id>": {"jobs": [...]}}}`` — the hot-spot list asks it for the ports it
shows, so the snapshot and the deltas never grow with the number of jobs.
"""

from __future__ import annotations

from django.conf import settings
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fabric.choices import NodeType, Tier
from fabric.keys import port_key
from fabric.models import Fabric, Link, Node, Port

from ..models import RAW_COUNTERS, PortCounters, Sweep
from ..porttable import annotations
from ..producer import switch_port_cells
from ..semantics import DERIVED_FIELDS

#: ports per ``annotations/`` request at most (the hot-spot list shows 12)
MAX_ANNOTATED = 50

#: Row group order of the heatmap: core at the top, leaves at the bottom, unknown last.
TIER_ORDER: tuple[int, ...] = (Tier.CORE, Tier.SPINE, Tier.LEAF, Tier.UNKNOWN, Tier.HOST)


def _iso(value) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def sweep_summary(sweep: Sweep | None) -> dict | None:
    """The fields of a sweep the heatmap shows (None when the fabric was never polled)."""
    if sweep is None:
        return None
    return {
        "id": sweep.pk,
        "at": _iso(sweep.started),
        "interval_s": sweep.interval_s,
        "duration_s": sweep.duration_s,
        "status": sweep.status,
        "ports": sweep.ports,
        "stale": sweep.stale,
        "error": sweep.error,
        "mechanism": sweep.mechanism,
    }


#: other apps' rows (the devices app's Ethernet switches): ``build(fabric) -> {"tier": {"tier",
#: "name", "rows"}, "rows": [...], "cells": [...]} | None``, appended after the IB tiers
#: (``AppConfig.ready()`` calls :func:`register_rows`). Their rows' ``node`` and cells' port ids
#: must not collide with IB ones (the devices app uses negative ids).
ROW_SOURCES: dict[str, object] = {}


def register_rows(name: str, build) -> None:
    """Add (or replace) the heatmap row source ``name`` (see :data:`ROW_SOURCES`)."""
    ROW_SOURCES[name] = build


def heatmap_snapshot(fabric: Fabric) -> dict:
    """Build the snapshot document described in the module docstring (three queries, plus those
    of the registered row sources)."""
    switches = list(
        Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH).values(
            "id", "node_guid", "name", "description", "lid", "tier", "num_ports"
        )
    )
    rank = {tier: i for i, tier in enumerate(TIER_ORDER)}
    switches.sort(key=lambda n: (rank.get(n["tier"], len(rank)), n["name"].lower(), n["node_guid"]))
    labels = dict(Tier.choices)
    rows, tiers = [], []
    for node in switches:
        if not tiers or tiers[-1]["tier"] != node["tier"]:
            tiers.append({"tier": node["tier"], "name": labels.get(node["tier"], "unknown"), "rows": 0})
        tiers[-1]["rows"] += 1
        rows.append(
            {
                "node": node["id"],
                "guid": node["node_guid"],
                "name": node["name"] or node["node_guid"],
                "description": node["description"],
                "lid": node["lid"],
                "tier": node["tier"],
                "tier_name": labels.get(node["tier"], "unknown"),
                "num_ports": node["num_ports"],
            }
        )
    cells = switch_port_cells(fabric.pk)
    for build in ROW_SOURCES.values():
        extra = build(fabric)
        if extra and extra["rows"]:
            tiers.append(extra["tier"])
            rows.extend(extra["rows"])
            cells.extend(extra["cells"])
    widest = max((r["num_ports"] for r in rows), default=0)
    highest_cell = max((c[2] for c in cells), default=0)
    sweep = Sweep.objects.filter(fabric=fabric).order_by("-started", "-id").first()
    return {
        "fabric": {"id": fabric.pk, "name": fabric.name},
        "now": _iso(timezone.now()),
        "poll_interval_s": float(settings.WEFT_POLL_INTERVAL_S),
        "sweep": sweep_summary(sweep),
        "columns": highest_cell or widest,  # ports beyond the highest cabled one are just empty
        "tiers": tiers,
        "rows": rows,
        "cells": cells,
    }


def remote_end(port: Port) -> dict | None:
    """The port at the other end of ``port``'s link, or None when the port has no link."""
    link = Link.objects.filter(port_a=port).select_related("port_b__node").first()
    other = link.port_b if link else None
    if other is None:
        link = Link.objects.filter(port_b=port).select_related("port_a__node").first()
        other = link.port_a if link else None
    if other is None:
        return None
    return {
        "port": other.pk,
        "port_num": other.port_num,
        "node": other.node_id,
        "node_guid": other.node.node_guid,
        "node_type": other.node.node_type,
        "name": other.node.name or other.node.node_guid,
        "description": other.node.description,
        "width": link.width,
        "speed": link.speed,
        "rate_gbps": link.rate_gbps,
    }


def cell_detail(port: Port, user=None) -> dict:
    """The tooltip document of one switch port (see the module docstring); its annotations as
    ``user`` may read them (``telemetry.porttable.annotations``)."""
    counters = PortCounters.objects.filter(port=port).first()
    doc = {
        "port": port.pk,
        "port_num": port.port_num,
        "node": port.node_id,
        "node_guid": port.node.node_guid,
        "name": port.node.name or port.node.node_guid,
        "description": port.node.description,
        "state": port.get_state_display(),
        "width": port.width,
        "speed": port.speed,
        "rate_gbps": port.rate_gbps,
        "remote": remote_end(port),
        "counters": None,
    }
    key = port_key(port.node.node_guid, port.port_num)
    doc["annotations"] = annotations([key], user)[key]
    if counters is not None:
        doc["counters"] = {
            "sampled_at": _iso(counters.sampled_at),
            "sweep": counters.sweep_id,
            "extended": counters.extended,
            "raw": {name: getattr(counters, name) for name in RAW_COUNTERS},
            "rates": {name: getattr(counters, name) for name in DERIVED_FIELDS},
            "error_deltas": counters.error_deltas or {},
            "saturated": counters.saturated or [],
            "reset": counters.reset,
            "stale": counters.stale,
            "stale_reason": counters.stale_reason,
        }
    return doc


class HeatmapView(APIView):
    """Snapshot of a fabric's heatmap (switch × port matrix); Viewer and above."""

    read_role = "viewer"

    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        description="Rows (switches by tier), columns (ports) and cells "
        "[port_id, node_id, port_num, utilisation, congestion, error_flag, stale] (see module docstring).",
    )
    def get(self, request: Request, fabric_id: int) -> Response:
        fabric = get_object_or_404(Fabric, pk=fabric_id)
        return Response(heatmap_snapshot(fabric))


class HeatmapCellView(APIView):
    """Tooltip details of one heatmap cell (a switch port of the fabric); Viewer and above."""

    read_role = "viewer"

    @extend_schema(
        responses=OpenApiTypes.OBJECT, description="Raw counters, rates and the remote end of one port."
    )
    def get(self, request: Request, fabric_id: int, port_id: int) -> Response:
        port = get_object_or_404(Port.objects.select_related("node"), pk=port_id, node__fabric_id=fabric_id)
        return Response(cell_detail(port, request.user))


class HeatmapAnnotationsView(APIView):
    """What the apps above telemetry say about some ports of the fabric (the hot-spot list's
    jobs); Viewer and above. ``?ports=`` comma-separated port ids (at most
    :data:`MAX_ANNOTATED`); ids not on this fabric are left out. 400 naming ``ports`` for a
    missing, non-integer or too long list."""

    read_role = "viewer"

    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        description='{"ports": {"<port id>": {"jobs": [{"job", "name", "state", "paths", "share", "url"}]}}} '
        "(share: estimated, 0..1).",
    )
    def get(self, request: Request, fabric_id: int) -> Response:
        fabric = get_object_or_404(Fabric, pk=fabric_id)
        raw = [p.strip() for p in request.query_params.get("ports", "").split(",") if p.strip()]
        if not raw or not all(p.isascii() and p.isdigit() for p in raw):
            raise ValidationError({"ports": ["comma-separated port ids (integers) are required"]})
        if len(raw) > MAX_ANNOTATED:
            raise ValidationError({"ports": [f"at most {MAX_ANNOTATED} ports per request, got {len(raw)}"]})
        rows = Port.objects.filter(node__fabric=fabric, pk__in=[int(p) for p in raw]).values_list(
            "pk", "node__node_guid", "port_num"
        )
        keys = {pk: port_key(guid, num) for pk, guid, num in rows}
        got = annotations(list(keys.values()), request.user)
        return Response({"ports": {str(pk): got[k] for pk, k in sorted(keys.items())}})
