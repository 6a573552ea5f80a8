"""Thin views of the devices API (``/api/devices/``): devices (Viewer reads, Admin configures
and deletes through ``devices.services.config``, as the pages do; credentials write-only and never
in the audit log), and their interfaces, sensors and LLDP
neighbours (read-only: they come from polls)."""

from __future__ import annotations

import time

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from accounts.roles import Role
from core.api.views import BRIEF_PARAM, BriefModeMixin, ReadOnlyViewSet

from .. import filtersets
from ..models import SECRET_FIELDS, Device, Interface, Neighbour, Sensor
from ..services import config
from . import serializers


@extend_schema_view(
    list=extend_schema(parameters=[BRIEF_PARAM]), retrieve=extend_schema(parameters=[BRIEF_PARAM])
)
class DeviceViewSet(BriefModeMixin, viewsets.ModelViewSet):
    """SNMP devices: address, version and credentials (write-only), identification, poll state."""

    queryset = Device.objects.select_related("fabric", "node")
    serializer_class = serializers.DeviceSerializer
    filterset_class = filtersets.DeviceFilterSet
    ordering_fields = ["id", "name", "address", "status", "last_poll_at"]
    lookup_value_regex = r"\d+"
    read_role = Role.VIEWER
    write_role = Role.ADMIN

    @extend_schema(
        responses=OpenApiTypes.OBJECT,
        parameters=[
            OpenApiParameter(
                "start", str, description="epoch seconds, ISO 8601, 'now' or relative ('-6h'); default end-1h"
            ),
            OpenApiParameter("end", str, description="as start; default now"),
            OpenApiParameter("resolution", str, description="auto (default), raw, minute or hour"),
            OpenApiParameter("interface", int, description="ifIndex of the interface whose rates to include"),
        ],
        description='{"t": [epoch s], "resolution", "interface": {"if_index", "name", "in_bytes_per_s", '
        '"out_bytes_per_s", "utilisation", "congestion", "errors"} | null, "sensors": [{"index", "name", '
        '"kind", "unit", "values"}]} (devices.services.history.device_history)',
    )
    @action(detail=True, methods=["get"], url_path="history")
    def history(self, request, pk=None):
        """Rate history of one interface (``?interface=<ifIndex>``) and every sensor's readings
        between ``start`` and ``end`` (the charts of the device page). Bad parameters: 400 naming them."""
        from datetime import UTC, datetime

        from telemetry.api.series import DEFAULT_SPAN_S, MAX_SPAN_S, RESOLUTIONS, parse_time

        from ..services.history import device_history

        device = self.get_object()
        q = request.query_params
        now = time.time()
        end = parse_time("end", q.get("end"), now, now)
        start = parse_time("start", q.get("start"), now, end - DEFAULT_SPAN_S)
        if start >= end:
            raise ValidationError({"start": "start must be before end"})
        if end - start > MAX_SPAN_S:
            raise ValidationError({"start": f"the range may span at most {MAX_SPAN_S / 86400:.0f} days"})
        resolution = q.get("resolution", "auto") or "auto"
        if resolution not in RESOLUTIONS:
            raise ValidationError({"resolution": f"use one of {', '.join(RESOLUTIONS)}"})
        if_index = q.get("interface") or None
        if if_index is not None and not (if_index.isdigit() and int(if_index) < 2**31):
            raise ValidationError({"interface": f"{if_index[:20]!r} is not an ifIndex"})
        doc = device_history(
            device, datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC),
            resolution=resolution, if_index=int(if_index) if if_index is not None else None,
        )  # fmt: skip
        return Response({"device": device.pk, "start": start, "end": end, **doc})

    def _save(self, serializer, instance: Device | None) -> None:
        """Create or update through ``devices.services.config.save_device`` (the pages' writer: one
        transaction with its audit entry, credentials of the other SNMP version cleared)."""
        values = dict(serializer.validated_data)
        secrets = {k: values.pop(k) for k in SECRET_FIELDS if k in values}
        try:
            serializer.instance = config.save_device(values, secrets, instance)
        except Device.DoesNotExist:  # deleted since the request read it (a PATCH racing a DELETE)
            raise NotFound(f"device {instance.pk} no longer exists") from None

    def perform_create(self, serializer) -> None:
        self._save(serializer, None)

    def perform_update(self, serializer) -> None:
        self._save(serializer, serializer.instance)

    def perform_destroy(self, instance: Device) -> None:
        try:
            config.delete_device(instance)
        except Device.DoesNotExist:
            raise NotFound(f"device {instance.pk} no longer exists") from None


class InterfaceViewSet(ReadOnlyViewSet):
    """Interfaces of the devices with their latest rates."""

    queryset = Interface.objects.select_related("device")
    serializer_class = serializers.InterfaceSerializer
    filterset_class = filtersets.InterfaceFilterSet
    ordering_fields = ["id", "if_index", "name", "utilisation", "congestion"]


class SensorViewSet(ReadOnlyViewSet):
    """Sensors of the devices (temperatures, fans, PSUs...)."""

    queryset = Sensor.objects.select_related("device")
    serializer_class = serializers.SensorSerializer
    filterset_class = filtersets.SensorFilterSet
    ordering_fields = ["id", "index", "kind", "value"]


class NeighbourViewSet(ReadOnlyViewSet):
    """Ethernet links as LLDP sees them from each device."""

    queryset = Neighbour.objects.select_related("device", "remote", "interface", "remote_interface")
    serializer_class = serializers.NeighbourSerializer
    filterset_class = filtersets.NeighbourFilterSet
    ordering_fields = ["id", "local_port", "sys_name"]
