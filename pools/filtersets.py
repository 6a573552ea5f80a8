"""django-filter filtersets of the pools API (``/api/pools/``).

Hosts and fabrics by id (several comma-separated or repeated), host by name; GPUs by UUID,
product (substring), health, state, MIG mode, rail device and presence (``present=false`` lists
the GPUs marked missing); tenants by name or member; pools by tenant, fabric, shared; allocations
by pool, tenant, state, kind, job, owner, GPU and host; agent tokens by owner, name, prefix, bound
host and whether bound at all.
"""

from __future__ import annotations

from django_filters import rest_framework as filters

from accounts.models import ApiToken
from fabric.filtersets import ModelIdsFilter
from fabric.models import Fabric, Host

from .choices import AllocationKind, AllocationState, GpuState, Health, MigMode
from .models import Allocation, Gpu, HostInventory, MigSlice, Pool, Tenant


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


class TenantFilterSet(filters.FilterSet):
    member = filters.CharFilter(field_name="memberships__user__username", label="member user name")

    class Meta:
        model = Tenant
        fields = ["id", "name"]


class PoolFilterSet(filters.FilterSet):
    tenant = ModelIdsFilter(queryset=Tenant.objects.all())
    tenant_name = filters.CharFilter(field_name="tenant__name")
    fabric = ModelIdsFilter(queryset=Fabric.objects.all())
    shared = filters.BooleanFilter(field_name="tenant", lookup_expr="isnull", label="shared by every tenant")
    gpu_model = filters.CharFilter(lookup_expr="icontains", label="GPU model filter contains")
    pkey = filters.NumberFilter(field_name="partition__pkey", label="PKey of the pool's partition (15 bits)")
    has_pkey = filters.BooleanFilter(field_name="partition", lookup_expr="isnull", exclude=True,
                                     label="owns a PKey")  # fmt: skip

    class Meta:
        model = Pool
        fields = ["id", "name", "priority_weight"]


class AllocationFilterSet(filters.FilterSet):
    pool = ModelIdsFilter(queryset=Pool.objects.all())
    tenant = ModelIdsFilter(queryset=Tenant.objects.all())
    state = filters.MultipleChoiceFilter(choices=AllocationState.choices)
    kind = filters.MultipleChoiceFilter(choices=AllocationKind.choices)
    owner_name = filters.CharFilter(field_name="owner__username", label="owner user name")
    gpu = ModelIdsFilter(
        field_name="items__gpu",
        queryset=Gpu.objects.all(),
        distinct=True,
        label="holds or held these GPUs (ids)",
    )
    host = ModelIdsFilter(field_name="items__gpu__host", queryset=Host.objects.all(), distinct=True,
                          label="on these hosts (ids)")  # fmt: skip

    job = filters.CharFilter(label="job reference (exact; empty values are ignored)")
    mig_profile = filters.CharFilter()

    class Meta:
        model = Allocation
        fields = ["id", "borrowed", "owner"]


class AgentTokenFilterSet(filters.FilterSet):
    host = ModelIdsFilter(
        field_name="agent_bindings__host", queryset=Host.objects.all(), label="bound to host"
    )
    bound = filters.BooleanFilter(method="filter_bound", label="bound to a host at least")

    class Meta:
        model = ApiToken
        fields = ["id", "user", "user__username", "name", "prefix"]

    def filter_bound(self, queryset, name, value):
        bound = queryset.filter(agent_bindings__isnull=False).values("pk")
        return queryset.filter(pk__in=bound) if value else queryset.exclude(pk__in=bound)
