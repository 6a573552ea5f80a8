"""Thin views of the devices API (``/api/devices/``): devices (Viewer reads, Admin configures;
credentials write-only and never in the audit log), and their interfaces, sensors and LLDP
neighbours (read-only: they come from polls)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import viewsets

from accounts.api.mixins import AuditedWritesMixin
from accounts.roles import Role
from fabric.api.views import BRIEF_PARAM, BriefModeMixin, ReadOnlyTopologyViewSet

from .. import filtersets
from ..models import SECRET_FIELDS, Device, Interface, Neighbour, Sensor
from ..services import config
from . import serializers


@extend_schema_view(
    list=extend_schema(parameters=[BRIEF_PARAM]), retrieve=extend_schema(parameters=[BRIEF_PARAM])
)
class DeviceViewSet(AuditedWritesMixin, BriefModeMixin, viewsets.ModelViewSet):
    """SNMP devices: address, version and credentials (write-only), identification, poll state."""

    queryset = Device.objects.select_related("fabric", "node")
    serializer_class = serializers.DeviceSerializer
    brief_serializer_class = serializers.BriefDeviceSerializer
    filterset_class = filtersets.DeviceFilterSet
    ordering_fields = ["id", "name", "address", "status", "last_poll_at"]
    lookup_value_regex = r"\d+"
    read_role = Role.VIEWER
    write_role = Role.ADMIN
    audit_prefix = "device"

    def audit_create_changes(self, serializer, instance):
        return config.create_changes(dict(serializer.validated_data))

    def audit_update_changes(self, serializer, before, after):
        data = serializer.validated_data
        secrets = {k: data[k] for k in SECRET_FIELDS if k in data}
        return config.update_changes(before, after, list(data), secrets)


class InterfaceViewSet(ReadOnlyTopologyViewSet):
    """Interfaces of the devices with their latest rates."""

    queryset = Interface.objects.select_related("device")
    serializer_class = serializers.InterfaceSerializer
    filterset_class = filtersets.InterfaceFilterSet
    ordering_fields = ["id", "if_index", "name", "utilisation", "congestion"]


class SensorViewSet(ReadOnlyTopologyViewSet):
    """Sensors of the devices (temperatures, fans, PSUs...)."""

    queryset = Sensor.objects.select_related("device")
    serializer_class = serializers.SensorSerializer
    filterset_class = filtersets.SensorFilterSet
    ordering_fields = ["id", "index", "kind", "value"]


class NeighbourViewSet(ReadOnlyTopologyViewSet):
    """Ethernet links as LLDP sees them from each device."""

    queryset = Neighbour.objects.select_related("device", "remote", "interface", "remote_interface")
    serializer_class = serializers.NeighbourSerializer
    filterset_class = filtersets.NeighbourFilterSet
    ordering_fields = ["id", "local_port", "sys_name"]
