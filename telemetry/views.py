"""Pages of the telemetry app: the live congestion heatmap of a fabric, and the ports table
(``/ports/``, its CSV export) of ``telemetry.porttable``.

The page itself is a shell: ``static/telemetry/heatmap.js`` loads the snapshot
(``telemetry-api:heatmap``), subscribes to ``ws/heatmap/<fabric_id>/`` and draws on a canvas.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_safe

from core.params import int_param
from fabric.choices import FabricRole, NodeType, PortState, Tier
from fabric.models import Fabric

from .porttable import (
    CSV_COLUMNS,
    SORTS,
    BadParam,
    PortTableQuery,
    annotate_rows,
    csv_cell,
    fabric_norm,
    port_table,
    row_values,
)

#: rows per page of the ports table (``?per_page=`` up to :data:`MAX_PER_PAGE`)
PER_PAGE = 100
MAX_PER_PAGE = 500


def port_url_template() -> str:
    """The port page URL with ``{id}`` in place of the port id (the fabric app's ``fabric:port``)."""
    try:
        return reverse("fabric:port", args=[987654321]).replace("987654321", "{id}")
    except NoReverseMatch:
        return "/fabric/ports/{id}/"


@require_safe
@login_required
def heatmap_index(request: HttpRequest) -> HttpResponse:
    """``/heatmap/``: the heatmap of the only fabric, or a choice of fabrics."""
    fabrics = list(Fabric.objects.order_by("name"))
    if len(fabrics) == 1:
        return redirect("telemetry:heatmap", fabric_id=fabrics[0].pk)
    return render(request, "telemetry/heatmap_index.html", {"fabrics": fabrics})


@require_safe
@login_required
def heatmap(request: HttpRequest, fabric_id: int) -> HttpResponse:
    """``/heatmap/<fabric_id>/``: switches × ports, coloured by congestion or utilisation."""
    fabric = get_object_or_404(Fabric, pk=fabric_id)
    context = {
        "fabric": fabric,
        "fabrics": Fabric.objects.order_by("name"),
        "poll_interval_s": settings.WEFT_POLL_INTERVAL_S,
        "snapshot_url": reverse("telemetry-api:heatmap", args=[fabric.pk]),
        "cell_url": reverse("telemetry-api:heatmap-cell", args=[fabric.pk, 987654321]).replace(
            "987654321", "{id}"
        ),
        "annotations_url": reverse("telemetry-api:heatmap-annotations", args=[fabric.pk]),
        "ws_path": f"/ws/heatmap/{fabric.pk}/",
        "port_url": port_url_template(),
        "mode": "utilisation" if request.GET.get("mode") == "utilisation" else "congestion",
    }
    return render(request, "telemetry/heatmap.html", context)


def _chosen_fabric(request: HttpRequest) -> tuple[list[Fabric], Fabric | None]:
    """All fabrics and the one of ``?fabric=<id or name>`` (default: the first by name)."""
    fabrics = list(Fabric.objects.order_by("name"))
    wanted = request.GET.get("fabric", "").strip()
    if not wanted:
        return fabrics, (fabrics[0] if fabrics else None)
    pk = int_param(wanted)
    return fabrics, next((f for f in fabrics if f.pk == pk or f.name == wanted), None)


@require_safe
@login_required
def port_list(request: HttpRequest) -> HttpResponse:
    """``/ports/``: every port of a fabric in one table, filtered, sorted and paginated in the
    database (parameters: ``telemetry.porttable``; ``page``, ``per_page``). A bad parameter is a
    400 page naming it."""
    fabrics, fabric = _chosen_fabric(request)
    context: dict = {"fabrics": fabrics, "fabric": fabric, "states": PortState, "tiers": Tier}
    context.update(roles=FabricRole, node_types=NodeType, error=None)
    if fabric is None:
        status = 404 if request.GET.get("fabric") else 200
        context["error"] = "No such fabric." if status == 404 else None
        return render(request, "telemetry/port_list.html", context, status=status)
    try:
        query = PortTableQuery.from_params(request.GET)
    except BadParam as exc:
        context["error"] = str(exc)
        context["query"] = PortTableQuery()
        return render(request, "telemetry/port_list.html", context, status=400)
    norm = fabric_norm(fabric)
    per_page = int_param(request.GET.get("per_page"), lo=1, hi=MAX_PER_PAGE) or PER_PAGE
    paginator = Paginator(port_table(fabric, query, norm), per_page)
    page = paginator.get_page(request.GET.get("page"))
    params = {"fabric": fabric.pk, **query.as_params()}
    if per_page != PER_PAGE:
        params["per_page"] = per_page
    base = {k: v for k, v in params.items() if k != "sort"}
    context.update(
        query=query,
        norm=norm,
        page_obj=page,
        paginator=paginator,
        rows=annotate_rows([row_values(p, norm) for p in page.object_list], request.user),
        qs=urlencode(params),
        sort_links={
            key: "?" + urlencode({**base, "sort": f"-{key}" if query.sort == key else key}) for key in SORTS
        },
        csv_url=reverse("telemetry:port_list_csv") + "?" + urlencode(params),
        port_url=port_url_template(),
    )
    return render(request, "telemetry/port_list.html", context)


class _Echo:
    def write(self, value: str) -> str:
        return value


@require_safe
@login_required
def port_list_csv(request: HttpRequest) -> HttpResponse:
    """``/ports/csv/``: the whole filtered table (all pages, same parameters as ``/ports/``) as
    CSV, streamed in chunks of 2,000 rows (columns ``telemetry.porttable.CSV_COLUMNS``; bytes/s,
    0..1, ticks/s). A bad parameter or an unknown fabric is a 400/404 in plain text."""
    _, fabric = _chosen_fabric(request)
    if fabric is None:
        return HttpResponse("No such fabric.\n", status=404, content_type="text/plain")
    try:
        query = PortTableQuery.from_params(request.GET)
    except BadParam as exc:
        return HttpResponse(f"{exc}\n", status=400, content_type="text/plain")
    qs = port_table(fabric, query)
    writer = csv.writer(_Echo())

    def lines() -> Iterator[str]:
        yield writer.writerow(CSV_COLUMNS)
        for port in qs.iterator(chunk_size=2000):
            row = row_values(port)
            yield writer.writerow([csv_cell(row[c]) for c in CSV_COLUMNS])

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="ports-{fabric.name}.csv"'
    return response
