"""Scheduler API views (``/api/scheduler/``): thin; the work is in ``scheduler.topology`` and
``scheduler.exports``."""

from __future__ import annotations

import json
import re

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import renderers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request
from rest_framework.views import APIView

from accounts.roles import Role
from fabric.models import Fabric

from ..exports import FORMATS, ExportError
from ..hostlist import HostlistError, expand
from ..services.topology_export import export_fabrics, export_text

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")


class _TextRenderer(renderers.BaseRenderer):
    """Lets clients ask for the export's media type; errors in such a request are JSON text."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data if isinstance(data, str | bytes) else json.dumps(data)


class _YamlRenderer(_TextRenderer):
    media_type = "application/yaml"
    format = "yaml"


class _FormatIsTheExport(DefaultContentNegotiation):
    """``?format=`` names the export here (the issue's API), not DRF's renderer override."""

    class settings:  # stands in for DRF's api_settings, which it reads only for this
        URL_FORMAT_OVERRIDE = None


@extend_schema(
    parameters=[
        OpenApiParameter("fabric", OpenApiTypes.STR, required=True,
                         description="fabric name or id; comma-separate several for one file"),
        OpenApiParameter("format", OpenApiTypes.STR, required=True, enum=list(FORMATS),
                         description="slurm-tree, slurm-block (topology.conf), slurm-yaml (topology.yaml, "
                         "Slurm 25.05), labels (Kubernetes Node labels), kueue, volcano, kai"),
        OpenApiParameter("nodes", OpenApiTypes.STR,
                         description="the scheduler's nodes as a host-list expression (gpu[001-128]): "
                         "only these are written; the others are reported"),
        OpenApiParameter("name", OpenApiTypes.STR,
                         description="topology/object name prefix (lower-case letters, digits, '-'; default weft)"),
    ],
    responses={
        (200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="Slurm topology.conf"),
        (200, "application/yaml"): OpenApiResponse(OpenApiTypes.STR, description="YAML documents"),
        400: OpenApiResponse(OpenApiTypes.OBJECT, description="a bad parameter, or nothing to export"),
        404: OpenApiResponse(OpenApiTypes.OBJECT, description="no such fabric"),
    },
)  # fmt: skip
class TopologyExportView(APIView):
    """A fabric's topology for another scheduler (Viewer and above): the text of the file, its
    warnings (hosts the scheduler does not know, nodes no fabric has) as ``#`` comment lines at
    the top and their count in ``X-Weft-Warnings``. The same as ``manage.py export_topology``."""

    read_role = Role.VIEWER
    renderer_classes = [renderers.JSONRenderer, _TextRenderer, _YamlRenderer]
    content_negotiation_class = _FormatIsTheExport

    def get(self, request: Request) -> HttpResponse:
        params = request.query_params
        fmt = params.get("format", "")
        if fmt not in FORMATS:
            raise ValidationError({"format": [f"use one of {', '.join(FORMATS)}"]})
        name = params.get("name", "weft")
        if not _NAME.match(name):
            raise ValidationError({"name": ["lower-case letters, digits and '-', at most 40"]})
        wanted = [f.strip() for f in params.get("fabric", "").split(",") if f.strip()]
        if not wanted:
            raise ValidationError({"fabric": ["give a fabric name or id"]})
        fabrics = []
        for f in wanted:
            found = Fabric.objects.filter(name=f).first()
            if found is None and f.isascii() and f.isdigit() and len(f) < 18:
                found = Fabric.objects.filter(pk=int(f)).first()
            if found is None:
                raise NotFound(f"no fabric {f!r}")
            fabrics.append(found)
        nodes = None
        if "nodes" in params:
            try:
                nodes = set(expand(params["nodes"]))
            except HostlistError as exc:
                raise ValidationError({"nodes": [str(exc)]}) from None
        # the tree of the fabrics asked for (scheduler.services.topology_export)
        try:
            result, notes = export_fabrics(fabrics, fmt, nodes=nodes, name=name)
        except ExportError as exc:
            raise ValidationError({"error": str(exc), "warnings": getattr(exc, "notes", [])}) from None
        text, warnings = export_text(result, notes)
        response = HttpResponse(text, content_type=f"{result.media_type}; charset=utf-8")
        response["X-Weft-Warnings"] = str(len(warnings))
        return response
