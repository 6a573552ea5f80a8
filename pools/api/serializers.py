"""Serializers of the pools REST API (``/api/pools/``).

Full and brief forms (``Brief*``: id, url, display, natural key) as in the fabric API. Memory is
MiB; ``rail`` is the host's CA closest to the GPU (``nvidia-smi topo -m``), in the fabric API's
brief node form.
"""

from __future__ import annotations

from rest_framework import serializers

from fabric.api.serializers import BriefFabricSerializer, BriefHostSerializer, BriefNodeSerializer

from ..models import Gpu, HostInventory, MigSlice


class BriefGpuSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="pools-api:gpu-detail")
    display = serializers.CharField(source="__str__", read_only=True)

    class Meta:
        model = Gpu
        fields = ["id", "url", "display", "uuid", "index", "state"]


class BriefMigSliceSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="pools-api:migslice-detail")
    display = serializers.CharField(source="__str__", read_only=True)

    class Meta:
        model = MigSlice
        fields = [
            "id",
            "url",
            "display",
            "profile",
            "gpu_instance_id",
            "compute_instance_id",
            "uuid",
            "state",
        ]


class MigSliceSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="pools-api:migslice-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    gpu = BriefGpuSerializer(read_only=True)
    present = serializers.BooleanField(read_only=True)

    class Meta:
        model = MigSlice
        fields = [
            "id", "url", "display", "gpu", "gpu_instance_id", "compute_instance_id", "mig_index", "profile",
            "profile_id", "placement_start", "placement_size", "uuid", "memory_total_mib", "sm_count", "state",
            "present", "missing_since", "first_seen",
        ]  # fmt: skip


class _SliceInGpuSerializer(serializers.ModelSerializer):
    class Meta:
        model = MigSlice
        fields = ["id", "profile", "gpu_instance_id", "compute_instance_id", "placement_start",
                  "placement_size", "uuid", "memory_total_mib", "state", "missing_since"]  # fmt: skip


class GpuSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="pools-api:gpu-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    host = BriefHostSerializer(read_only=True)
    fabric = BriefFabricSerializer(source="host.fabric", read_only=True)
    rail = BriefNodeSerializer(source="rail_node", read_only=True, allow_null=True)
    present = serializers.BooleanField(read_only=True)
    mig_slices = _SliceInGpuSerializer(many=True, read_only=True)

    class Meta:
        model = Gpu
        fields = [
            "id", "url", "display", "fabric", "host", "uuid", "index", "minor_number", "product_name",
            "architecture", "serial", "memory_total_mib", "memory_reserved_mib", "pci_bus_id", "numa_node",
            "health", "health_reasons", "mig_mode_current", "mig_mode_pending", "rail", "rail_device",
            "rail_affinity", "state", "present", "missing_since", "first_seen", "mig_slices",
        ]  # fmt: skip


class HostInventorySerializer(serializers.ModelSerializer):
    """A host's last GPU report with its GPUs (brief) and the HCAs its agent saw."""

    url = serializers.HyperlinkedIdentityField(view_name="pools-api:hostinventory-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    host = BriefHostSerializer(read_only=True)
    fabric = BriefFabricSerializer(source="host.fabric", read_only=True)
    gpus = BriefGpuSerializer(source="host.gpus", many=True, read_only=True)

    class Meta:
        model = HostInventory
        fields = ["id", "url", "display", "fabric", "host", "report_source", "reported_at", "driver_version", "cuda_version",
                  "attached_gpus", "hcas", "warnings", "gpus"]  # fmt: skip


class BriefHostInventorySerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="pools-api:hostinventory-detail")
    display = serializers.CharField(source="__str__", read_only=True)

    class Meta:
        model = HostInventory
        fields = ["id", "url", "display", "reported_at"]


class AgentPortSerializer(serializers.Serializer):
    port_num = serializers.IntegerField(min_value=1, max_value=255)
    port_guid = serializers.CharField(max_length=32, allow_blank=True, required=False, default="")
    link_layer = serializers.ChoiceField(choices=["InfiniBand", "Ethernet", "Unknown"], default="Unknown")
    state = serializers.CharField(max_length=32, allow_blank=True, required=False, default="")
    rate_gbps = serializers.FloatField(min_value=0, allow_null=True, required=False, default=None)


class AgentHcaSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64)
    node_guid = serializers.CharField(max_length=32, allow_blank=True, required=False, default="")
    ports = AgentPortSerializer(many=True, required=False, default=list)


class AgentReportSerializer(serializers.Serializer):
    """What ``python -m pools.agent`` posts: the host name, ``nvidia-smi -q -x`` output, optional
    ``nvidia-smi topo -m`` and ``mig -lgi``/``-lci`` texts, and the local HCAs. The host is found
    by its HCAs' node GUIDs (the CA nodes of a discovered fabric) or else by name (``fabric``
    when several fabrics have it)."""

    host = serializers.CharField(max_length=128)
    fabric = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    nvidia_smi_xml = serializers.CharField(max_length=8_000_000, trim_whitespace=False)
    topo = serializers.CharField(required=False, allow_blank=True, default="", trim_whitespace=False)
    mig = serializers.CharField(required=False, allow_blank=True, default="", trim_whitespace=False)
    hcas = AgentHcaSerializer(many=True, required=False, default=list)
    agent_version = serializers.CharField(max_length=32, required=False, default="")


class AgentWarningSerializer(serializers.Serializer):
    where = serializers.CharField()
    message = serializers.CharField()


class AgentResultSerializer(serializers.Serializer):
    """The ingest summary (``pools.services.inventory.ingest_gpu_report``)."""

    host = serializers.CharField()
    fabric = serializers.CharField()
    gpus = serializers.IntegerField(help_text="GPUs present after the report")
    mig_slices = serializers.IntegerField(help_text="MIG slices present after the report")
    warnings = AgentWarningSerializer(many=True)
    added = serializers.IntegerField()
    missing = serializers.IntegerField()
    returned = serializers.IntegerField()
    changed = serializers.IntegerField()
    rows_written = serializers.IntegerField()


class LocatedErrorSerializer(serializers.Serializer):
    """A 400: a report that does not parse (``detail``, ``field``: ``nvidia_smi_xml``/``topo``/
    ``mig``, ``line``, ``element``), or a body that does not validate (``{field: [messages]}``)."""

    detail = serializers.CharField(required=False)
    field = serializers.CharField(required=False)
    line = serializers.IntegerField(required=False, help_text="1-based line, 0 when unknown")
    element = serializers.CharField(required=False, help_text="XML path such as gpu[1]/fb_memory_usage/total")
