"""django-filter filtersets of the pools API (``/api/pools/``).

Hosts and fabrics by id (several comma-separated or repeated), host by name; GPUs by UUID,
product (substring), health, state, MIG mode, rail device and presence (``present=false`` lists
the GPUs marked missing).
"""

from __future__ import annotations

from django_filters import rest_framework as filters

from fabric.filtersets import ModelIdsFilter
from fabric.models import Fabric, Host

from .choices import GpuState, Health, MigMode
from .models import Gpu, HostInventory, MigSlice


class GpuFilterSet(filters.FilterSet):
    fabric = ModelIdsFilter(field_name="host__fabric", queryset=Fabric.objects.all())
    host = ModelIdsFilter(queryset=Host.objects.all())
    host_name = filters.CharFilter(field_name="host__name", label="host name (exact)")
    product = filters.CharFilter(field_name="product_name", lookup_expr="icontains")
    health = filters.MultipleChoiceFilter(choices=Health.choices)
    state = filters.MultipleChoiceFilter(choices=GpuState.choices)
    mig_mode = filters.MultipleChoiceFilter(field_name="mig_mode_current", choices=MigMode.choices)
    present = filters.BooleanFilter(
        field_name="missing_since", lookup_expr="isnull", label="reported by the last report"
    )

    class Meta:
        model = Gpu
        fields = ["id", "uuid", "index", "pci_bus_id", "rail_device", "rail_affinity", "numa_node"]


class MigSliceFilterSet(filters.FilterSet):
    gpu = ModelIdsFilter(queryset=Gpu.objects.all())
    host = ModelIdsFilter(field_name="gpu__host", queryset=Host.objects.all())
    state = filters.MultipleChoiceFilter(choices=GpuState.choices)
    present = filters.BooleanFilter(field_name="missing_since", lookup_expr="isnull")

    class Meta:
        model = MigSlice
        fields = ["id", "profile", "gpu_instance_id", "compute_instance_id", "uuid"]


class HostInventoryFilterSet(filters.FilterSet):
    fabric = ModelIdsFilter(field_name="host__fabric", queryset=Fabric.objects.all())
    host = ModelIdsFilter(queryset=Host.objects.all())
    host_name = filters.CharFilter(field_name="host__name")

    class Meta:
        model = HostInventory
        fields = ["id", "report_source", "driver_version"]
