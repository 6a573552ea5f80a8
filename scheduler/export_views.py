"""The fabric page's topology download (``scheduler:topology_export``): the export ``manage.py
export_topology`` prints and ``GET /api/scheduler/topology/`` answers
(``scheduler.services.topology_export``), as a file to save.

``GET ?fabric=<id>&format=<format>[&nodes=<host-list>]`` (Viewer and above, as the API): the file
with its media type (``text/plain`` for Slurm's ``topology.conf``, ``application/yaml`` for the
others), ``Content-Disposition: attachment`` with its name (``topology_export.FILENAMES``), its
warnings as ``#`` comment lines at the top and their count in ``X-Weft-Warnings``. A bad format,
node list or nothing to export goes back to the fabric page with the reason; an unknown fabric
is a 404.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views import View

from core.params import int_param
from fabric.models import Fabric
from fabric.views import RoleRequiredMixin

from .exports import FORMATS, ExportError
from .hostlist import HostlistError, expand
from .services.topology_export import export_fabrics, export_filename, export_text

#: the formats as the fabric page offers them: (format, label)
FORMAT_LABELS = (
    ("slurm-tree", "Slurm topology.conf, tree (topology/tree)"),
    ("slurm-block", "Slurm topology.conf, blocks (topology/block)"),
    ("slurm-yaml", "Slurm topology.yaml (Slurm 25.05)"),
    ("kueue", "Kueue Topology"),
    ("volcano", "Volcano HyperNodes"),
    ("kai", "KAI Scheduler Topology"),
    ("labels", "Kubernetes node labels"),
)
assert [f for f, _ in FORMAT_LABELS] == list(FORMATS)


class TopologyExportView(RoleRequiredMixin, View):
    """The download (module docstring)."""

    def get(self, request: HttpRequest) -> HttpResponse:
        fabric = get_object_or_404(Fabric, pk=int_param(request.GET.get("fabric")) or 0)
        back = fabric.get_absolute_url() + "#topology-export"
        fmt = request.GET.get("format", "")
        if fmt not in FORMATS:
            messages.error(request, f"Export: format {fmt[:40]!r} is not one of {', '.join(FORMATS)}.")
            return redirect(back)
        nodes = None
        wanted = request.GET.get("nodes", "").strip()
        if wanted:
            try:
                nodes = set(expand(wanted))
            except HostlistError as exc:
                messages.error(request, f"Export: the node list is not a host-list expression: {exc}")
                return redirect(back)
        try:
            result, notes = export_fabrics([fabric], fmt, nodes=nodes)
        except ExportError as exc:
            messages.error(request, f"Export of {fabric.name}: {exc}")
            return redirect(back)
        text, warnings = export_text(result, notes)
        response = HttpResponse(text, content_type=f"{result.media_type}; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{export_filename([fabric], fmt)}"'
        response["X-Weft-Warnings"] = str(len(warnings))
        return response
