"""Serializers of the devices API. Credentials are write-only: ``community``, ``auth_key`` and
``priv_key`` are accepted on create/update (stored encrypted, ``Device.set_secret``) and never
returned; the response says only whether each is set (``*_set``). Writes go through
``devices.services.config.save_device`` (``DeviceViewSet``), not through ``save()`` hooks here."""

from __future__ import annotations

from rest_framework import serializers

from core.api.serializers import BaseModelSerializer
from core.fields import IdentityUrlField
from fabric.api.serializers import FabricSerializer, NodeSerializer
from fabric.models import Fabric

from ..models import SECRET_FIELDS, Device, Interface, Neighbour, Sensor
from ..services.config import settings_errors


class DeviceSerializer(BaseModelSerializer):
    """A device: where, how (secrets write-only), identification and poll state (read-only)."""

    url = IdentityUrlField(view_name="devices-api:device-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    fabric = serializers.PrimaryKeyRelatedField(queryset=Fabric.objects.all())
    fabric_brief = FabricSerializer(nested=True, source="fabric", read_only=True)
    node = NodeSerializer(nested=True, read_only=True, allow_null=True)
    community = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=255,
                                      style={"input_type": "password"}, trim_whitespace=False)  # fmt: skip
    auth_key = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=255,
                                     style={"input_type": "password"}, trim_whitespace=False)  # fmt: skip
    priv_key = serializers.CharField(write_only=True, required=False, allow_blank=True, max_length=255,
                                     style={"input_type": "password"}, trim_whitespace=False)  # fmt: skip
    community_set = serializers.SerializerMethodField()
    auth_key_set = serializers.SerializerMethodField()
    priv_key_set = serializers.SerializerMethodField()
    interfaces = serializers.IntegerField(source="interfaces.count", read_only=True)

    class Meta:
        model = Device
        fields = [
            "id", "url", "display", "fabric", "fabric_brief", "name", "address", "port", "version",
            "community", "community_set", "user", "auth_protocol", "auth_key", "auth_key_set",
            "priv_protocol", "priv_key", "priv_key_set", "context", "timeout_s", "retries",
            "poll_interval_s", "enabled", "sys_descr", "sys_object_id", "sys_name", "vendor", "model",
            "serial", "engine_id", "identified_at", "node", "status", "last_poll_at", "last_ok_at",
            "last_poll_s", "last_error", "unreachable_since", "requests", "interfaces", "created",
        ]  # fmt: skip
        brief_fields = ["id", "url", "display", "name", "address", "status"]
        read_only_fields = ["created"]

    def get_community_set(self, obj) -> bool:
        return obj.has_secret("community")

    def get_auth_key_set(self, obj) -> bool:
        return obj.has_secret("auth_key")

    def get_priv_key_set(self, obj) -> bool:
        return obj.has_secret("priv_key")

    def validate(self, attrs):
        # a blank credential keeps the stored one, as on the form (devices.services.config)
        for name in SECRET_FIELDS:
            if name in attrs and not attrs[name]:
                del attrs[name]
        errors = settings_errors(attrs, self.instance)
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class InterfaceSerializer(serializers.ModelSerializer):
    """An interface with its latest counters and rates (bytes/s, packets/s, 0..1)."""

    device = DeviceSerializer(nested=True, read_only=True)
    display = serializers.CharField(source="__str__", read_only=True)

    class Meta:
        model = Interface
        fields = [
            "id", "display", "device", "if_index", "name", "descr", "alias", "if_type", "speed_mbps",
            "admin_status", "oper_status", "last_change", "hc", "counters", "sampled_at", "interval_s",
            "in_bytes_per_s", "out_bytes_per_s", "in_pkts_per_s", "out_pkts_per_s", "utilisation",
            "congestion", "error_deltas", "wrapped", "reset", "rate_reason", "present",
        ]  # fmt: skip


class SensorSerializer(serializers.ModelSerializer):
    device = DeviceSerializer(nested=True, read_only=True)
    display = serializers.CharField(source="__str__", read_only=True)

    class Meta:
        model = Sensor
        fields = ["id", "display", "device", "index", "name", "kind", "unit", "value", "raw", "sensor_type",
                  "scale", "precision", "status", "component", "updated"]  # fmt: skip


class NeighbourSerializer(serializers.ModelSerializer):
    device = DeviceSerializer(nested=True, read_only=True)
    remote = DeviceSerializer(nested=True, read_only=True, allow_null=True)
    display = serializers.CharField(source="__str__", read_only=True)
    interface = serializers.CharField(source="interface.name", read_only=True, allow_null=True, default=None)
    remote_interface = serializers.CharField(source="remote_interface.name", read_only=True, default=None)

    class Meta:
        model = Neighbour
        fields = ["id", "display", "device", "interface", "local_port", "sys_name", "chassis_id", "port_id",
                  "port_descr", "remote", "remote_interface", "first_seen", "last_seen"]  # fmt: skip
