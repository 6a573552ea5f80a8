"""Pages of the telemetry app: the live congestion heatmap of a fabric.

The page itself is a shell: ``static/telemetry/heatmap.js`` loads the snapshot
(``telemetry-api:heatmap``), subscribes to ``ws/heatmap/<fabric_id>/`` and draws on a canvas.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_safe

from fabric.models import Fabric


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
        "ws_path": f"/ws/heatmap/{fabric.pk}/",
        "port_url": port_url_template(),
        "mode": "utilisation" if request.GET.get("mode") == "utilisation" else "congestion",
    }
    return render(request, "telemetry/heatmap.html", context)
