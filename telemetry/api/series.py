"""Port time-series API for the charts of the port page.

``GET /api/fabric/port-series/<port_id>/?start=&end=&resolution=`` (Viewer) returns the
history of one port from ``telemetry.services.history.port_series``::

    {"port": {"id", "port_num", "node", "name", "description", "rate_gbps"},
     "start": epoch_s, "end": epoch_s, "resolution": "auto",
     "t": [epoch seconds], "xmit_bytes_per_s": [...], "rcv_bytes_per_s": [...],
     "xmit_wait_per_s": [...], "utilisation": [...], "congestion": [...], "errors": [...]}

Units: bytes/s, PortXmitWait ticks/s, utilisation and congestion 0..1, errors = sum of the error
counter deltas per point; ``null`` where no rate could be computed (gaps in the charts).

``start``/``end``: epoch seconds, ISO 8601 (``2026-11-29T19:00:00Z``), or relative to now
(``-15m``, ``-6h``, ``-7d``, ``now``). Defaults: ``end=now``, ``start=end-1h``. ``resolution``:
``auto`` (default), ``raw``, ``minute`` or ``hour``. A bad value gives HTTP 400 naming the
parameter.
"""

from __future__ import annotations

import math
import re
import time
from datetime import UTC, datetime

from django.shortcuts import get_object_or_404
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fabric.models import Port

DEFAULT_SPAN_S = 3600.0
MAX_SPAN_S = 400 * 86400.0
RESOLUTIONS = ("auto", "raw", "minute", "hour")
_RELATIVE = re.compile(r"^-(\d+(?:\.\d+)?)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: how far in the future a ``start``/``end`` may lie (clock skew, a range ending "tomorrow")
MAX_FUTURE_S = 366 * 86400


def parse_time(name: str, value: str | None, now: float, default: float) -> float:
    """Parse a ``start``/``end`` query value into epoch seconds.

    Accepts epoch seconds, ISO 8601 (naive = UTC), ``now`` or ``-<n><s|m|h|d>`` relative to
    ``now``; empty gives ``default``.

    Raises:
        ValidationError: an unparseable value, NaN/infinity, or a time before 1970 or more than
            :data:`MAX_FUTURE_S` after ``now``, naming the parameter ``name``.
    """
    if value is None or value.strip() == "":
        return default
    text = value.strip()
    if text == "now":
        return now
    bad = ValidationError(
        {name: f"{value[:40]!r} is not epoch seconds, ISO 8601 (2026-11-29T19:00:00Z), 'now' or '-6h' "
               "between 1970 and a year from now"}
    )  # fmt: skip
    if match := _RELATIVE.match(text):
        seconds = float(match.group(1)) * _UNIT_S[match.group(2)]
        epoch = now - seconds if math.isfinite(seconds) else -1.0
    else:
        try:
            epoch = float(text)
        except ValueError:
            parsed = parse_datetime(text.replace(" ", "T"))
            if parsed is None:
                raise bad from None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            try:
                epoch = parsed.timestamp()
            except (OverflowError, ValueError):
                raise bad from None
    if not math.isfinite(epoch) or not 0 <= epoch <= now + MAX_FUTURE_S:
        raise bad
    return epoch


class PortSeriesView(APIView):
    """Time series of one port's rates, utilisation, congestion and errors; Viewer and above."""

    read_role = "viewer"

    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        parameters=[
            OpenApiParameter("start", str, description="epoch seconds, ISO 8601, 'now' or relative ('-6h')"),
            OpenApiParameter("end", str, description="as start; default now"),
        ],
        description='{"t": [epoch s], "xmit_bytes_per_s": [...], "rcv_bytes_per_s": [...], '
        '"xmit_wait_per_s": [...], "utilisation": [...], "congestion": [...], "errors": [...]}',
    )
    def get(self, request: Request, port_id: int) -> Response:
        port = get_object_or_404(Port.objects.select_related("node"), pk=port_id)
        now = time.time()
        end = parse_time("end", request.query_params.get("end"), now, now)
        start = parse_time("start", request.query_params.get("start"), now, end - DEFAULT_SPAN_S)
        if start >= end:
            raise ValidationError({"start": "start must be before end"})
        if end - start > MAX_SPAN_S:
            raise ValidationError({"start": f"the range may span at most {MAX_SPAN_S / 86400:.0f} days"})
        resolution = request.query_params.get("resolution", "auto") or "auto"
        if resolution not in RESOLUTIONS:
            raise ValidationError({"resolution": f"use one of {', '.join(RESOLUTIONS)}"})
        from telemetry.services.history import port_series  # the telemetry engineer's history store

        series = port_series(
            port.pk,
            datetime.fromtimestamp(start, UTC),
            datetime.fromtimestamp(end, UTC),
            resolution=resolution,
        )
        return Response(
            {
                "port": {
                    "id": port.pk,
                    "port_num": port.port_num,
                    "node": port.node_id,
                    "name": port.node.name or port.node.node_guid,
                    "description": port.node.description,
                    "rate_gbps": port.rate_gbps,
                },
                "start": start,
                "end": end,
                "resolution": resolution,
                **series,
            }
        )
