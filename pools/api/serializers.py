"""Serializers of the pools REST API (``/api/pools/``).

Full and brief forms (``Meta.brief_fields``: id, url, display, natural key; ``nested=True``) as in
the fabric API. Memory is MiB; ``rail`` is the host's CA closest to the GPU (``nvidia-smi topo
-m``), in the fabric API's brief node form.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounts.models import ApiToken
from core.api.serializers import BaseModelSerializer, StrictPrimaryKeyRelatedField
from core.fields import FiniteFloatField, IdentityUrlField, OptionalWebUrlField
from core.validators import printable_text
from fabric.api.serializers import FabricSerializer, HostSerializer, NodeSerializer, PKeyField
from fabric.models import Fabric, Host, Partition

from ..choices import AllocationKind
from ..models import (
    AgentBinding,
    Allocation,
    AllocationItem,
    Gpu,
    HostInventory,
    MigSlice,
    Pool,
    Tenant,
    TenantMembership,
)
from ..services.allocation import pool_summary
from ..services.partitions import KEEP, PoolPKeyError, check_job_range, check_pool_pkey, save_pool


class _SliceInGpuSerializer(serializers.ModelSerializer):
    class Meta:
        model = MigSlice
        fields = ["id", "profile", "gpu_instance_id", "compute_instance_id", "placement_start",
                  "placement_size", "uuid", "memory_total_mib", "state", "missing_since"]  # fmt: skip


class GpuSerializer(BaseModelSerializer):
    url = IdentityUrlField(view_name="pools-api:gpu-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    host = HostSerializer(nested=True, read_only=True)
    fabric = FabricSerializer(nested=True, source="host.fabric", read_only=True)
    rail = NodeSerializer(nested=True, source="rail_node", read_only=True, allow_null=True)
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
        brief_fields = ["id", "url", "display", "uuid", "index", "state"]


class MigSliceSerializer(BaseModelSerializer):
    url = IdentityUrlField(view_name="pools-api:migslice-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    gpu = GpuSerializer(nested=True, read_only=True)
    present = serializers.BooleanField(read_only=True)

    class Meta:
        model = MigSlice
        fields = [
            "id", "url", "display", "gpu", "gpu_instance_id", "compute_instance_id", "mig_index", "profile",
            "profile_id", "placement_start", "placement_size", "uuid", "memory_total_mib", "sm_count", "state",
            "present", "missing_since", "first_seen",
        ]  # fmt: skip
        brief_fields = [
            "id",
            "url",
            "display",
            "profile",
            "gpu_instance_id",
            "compute_instance_id",
            "uuid",
            "state",
        ]


class HostInventorySerializer(BaseModelSerializer):
    """A host's last GPU report with its GPUs (brief) and the HCAs its agent saw."""

    url = IdentityUrlField(view_name="pools-api:hostinventory-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    host = HostSerializer(nested=True, read_only=True)
    fabric = FabricSerializer(nested=True, source="host.fabric", read_only=True)
    gpus = GpuSerializer(nested=True, source="host.gpus", many=True, read_only=True)

    class Meta:
        model = HostInventory
        fields = ["id", "url", "display", "fabric", "host", "report_source", "reported_at", "driver_version", "cuda_version",
                  "attached_gpus", "hcas", "warnings", "gpus"]  # fmt: skip
        brief_fields = ["id", "url", "display", "reported_at"]


class AgentPortSerializer(serializers.Serializer):
    port_num = serializers.IntegerField(min_value=1, max_value=255)
    port_guid = serializers.CharField(max_length=32, allow_blank=True, required=False, default="")
    link_layer = serializers.ChoiceField(choices=["InfiniBand", "Ethernet", "Unknown"], default="Unknown")
    state = serializers.CharField(max_length=32, allow_blank=True, required=False, default="")
    rate_gbps = FiniteFloatField(min_value=0, allow_null=True, required=False, default=None)


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


class AgentConflictItemSerializer(serializers.Serializer):
    uuid = serializers.CharField()
    host = serializers.CharField(help_text="the host the GPU is stored on")
    fabric = serializers.CharField()
    state = serializers.CharField(help_text="its allocation state")


class AgentConflictSerializer(serializers.Serializer):
    """A 409: the report lists GPUs stored on other hosts (``pools.services.inventory.GpuConflict``)."""

    detail = serializers.CharField()
    code = serializers.CharField()
    conflicts = AgentConflictItemSerializer(many=True)


class LocatedErrorSerializer(serializers.Serializer):
    """A 400: a report that does not parse (``detail``, ``field``: ``nvidia_smi_xml``/``topo``/
    ``mig``, ``line``, ``element``), or a body that does not validate (``{field: [messages]}``)."""

    detail = serializers.CharField(required=False)
    field = serializers.CharField(required=False)
    line = serializers.IntegerField(required=False, help_text="1-based line, 0 when unknown")
    element = serializers.CharField(required=False, help_text="XML path such as gpu[1]/fb_memory_usage/total")
    where = serializers.CharField(
        required=False, help_text="out of bounds: the GPU (and slice) and the value"
    )


class AgentRefusedSerializer(serializers.Serializer):
    """A 403 (``code`` ``host_not_bound``: the token may not report for this host, see
    ``pools.services.agents``; without ``code``: the role does not allow posting reports) or a 413
    (``code`` ``too_large``: ``size`` above ``limit``, bytes)."""

    detail = serializers.CharField()
    code = serializers.CharField(required=False)
    size = serializers.IntegerField(required=False)
    limit = serializers.IntegerField(required=False)


class AgentBindingSerializer(serializers.ModelSerializer):
    """A host the token may report for, and how it came to be bound (``admin``/``first_report``)."""

    host = HostSerializer(nested=True, read_only=True)

    class Meta:
        model = AgentBinding
        fields = ["host", "via", "created"]


class AgentTokenSerializer(serializers.ModelSerializer):
    """An API token as a host agent's credential: its owner, ``hosts`` (host ids) it may report
    for and ``bindings`` (each host, how and when bound). Never the key."""

    url = IdentityUrlField(view_name="pools-api:agenttoken-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    user = serializers.SlugRelatedField(slug_field="username", read_only=True)
    hosts = serializers.SerializerMethodField()
    bindings = AgentBindingSerializer(source="agent_bindings", many=True, read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "url", "display", "user", "user_id", "name", "prefix", "created", "expires_at",
                  "last_used_at", "hosts", "bindings"]  # fmt: skip
        read_only_fields = fields

    def get_hosts(self, token: ApiToken) -> list[int]:
        return sorted(b.host_id for b in token.agent_bindings.all())


class AgentTokenHostsSerializer(serializers.Serializer):
    """``PUT``/``PATCH agent-tokens/{id}/``: the hosts (ids) the token may report for, replacing
    the list; ``[]`` unbinds it."""

    hosts = serializers.PrimaryKeyRelatedField(many=True, queryset=Host.objects.select_related("fabric"))

    def validate_hosts(self, value):
        if len(value) > 4096:
            raise serializers.ValidationError("at most 4096 hosts")
        if len({h.pk for h in value}) != len(value):
            raise serializers.ValidationError("a host is listed twice")
        return value


# --- tenants, pools, allocations ----------------------------------------------------------------


class TenantMemberSerializer(serializers.ModelSerializer):
    """A member: the user (id; ``username`` read-only) and their role in the tenant."""

    user = StrictPrimaryKeyRelatedField(queryset=get_user_model().objects.all())
    username = serializers.CharField(source="user.username", read_only=True)

    class Meta:
        model = TenantMembership
        fields = ["user", "username", "role"]

    def validate(self, attrs):
        # A member is always whole: a PATCH of the tenant (``partial``) makes DRF skip the
        # ``required`` check of nested fields, so say here what a PUT says.
        if "user" not in attrs:
            raise serializers.ValidationError({"user": [self.fields["user"].error_messages["required"]]})
        return attrs


class TenantSerializer(BaseModelSerializer):
    """A tenant and its members (Admin writes; ``members`` replaces the whole list when sent).
    ``contacts``: e-mail addresses told of its jobs' faults (degraded, requeued, replaced,
    failed); ``webhook_url`` and ``webhook_secret`` (write-only; ``webhook_secret_set`` says
    whether one is stored): a signed webhook for its jobs' state changes (``outbound``)."""

    url = IdentityUrlField(view_name="pools-api:tenant-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    members = TenantMemberSerializer(source="memberships", many=True, required=False)
    contacts = serializers.ListField(
        child=serializers.EmailField(max_length=254), required=False, max_length=50,
        help_text="e-mail addresses told when its jobs are degraded, requeued, replaced or failed",
    )  # fmt: skip
    webhook_url = OptionalWebUrlField(required=False)
    webhook_secret = serializers.CharField(
        max_length=200, required=False, allow_blank=True, write_only=True,
        help_text="HMAC-SHA256 key of the webhook's X-Weft-Signature (write-only)",
    )  # fmt: skip
    webhook_secret_set = serializers.SerializerMethodField()

    class Meta:
        model = Tenant
        fields = ["id", "url", "display", "name", "description", "members", "contacts", "webhook_url",
                  "webhook_secret", "webhook_secret_set", "created"]  # fmt: skip
        brief_fields = ["id", "url", "display", "name"]

    def get_webhook_secret_set(self, tenant: Tenant) -> bool:
        return bool(tenant.webhook_secret)

    def validate_contacts(self, value):
        seen: dict[str, str] = {}
        for a in value:
            seen.setdefault(a.lower(), a)
        return list(seen.values())

    def validate_members(self, value):
        users = [m["user"].pk for m in value]
        if len(set(users)) != len(users):
            raise serializers.ValidationError("a user is listed twice")
        return value

    def _set_members(self, tenant: Tenant, members) -> None:
        if members is None:
            return
        tenant.memberships.all().delete()
        TenantMembership.objects.bulk_create(
            [TenantMembership(tenant=tenant, user=m["user"], role=m.get("role", "viewer")) for m in members]
        )

    def create(self, validated_data):
        members = validated_data.pop("memberships", None)
        tenant = super().create(validated_data)
        self._set_members(tenant, members)
        return tenant

    def update(self, instance, validated_data):
        members = validated_data.pop("memberships", None)
        tenant = super().update(instance, validated_data)
        self._set_members(tenant, members)
        return tenant


class PoolUsageSerializer(serializers.Serializer):
    gpus = serializers.IntegerField(help_text="whole GPUs + GPUs with fractions held")
    slices = serializers.IntegerField(help_text="MIG slices held")
    borrowed_gpus = serializers.IntegerField(help_text="of gpus, held above the guaranteed share")
    borrowed_slices = serializers.IntegerField()
    free_gpus = serializers.IntegerField(
        help_text="free whole GPUs the pool's filters match (shared by every pool)"
    )


class PoolPartitionSerializer(serializers.ModelSerializer):
    """The pool's partition: its PKey and what the last apply to OpenSM found (``applied_state``
    pending / applied / partial / drift / failed, ``applied_status`` in words: "applied to N of M
    members, K not verifiable", ``applied_at``, ``drift`` ports, ``apply_error``)."""

    url = IdentityUrlField(view_name="fabric-api:partition-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    applied_status = serializers.CharField(read_only=True)

    class Meta:
        model = Partition
        fields = ["id", "url", "display", "name", "pkey", "pkey_hex", "applied_state", "applied_status",
                  "applied_at", "drift", "apply_error"]  # fmt: skip


class PoolSerializer(BaseModelSerializer):
    """A pool: owner tenant (null: shared by every tenant), filters, quotas, its usage now, and
    its IB partition. ``pkey`` (an integer or ``"0x0123"``, 0x0001-0x7ffe, unique on the pool's
    fabric; null: none) gives the pool a partition whose members follow the hosts it holds GPUs
    on; ``partition`` shows it and its applied state (read-only). ``job_isolation``: each job the
    queue places in the pool gets its own partition (a PKey from ``job_pkey_min``-``job_pkey_max``
    that no partition of the fabric uses) of its hosts, removed when the job ends. A pool PKey
    never lies inside a job PKey range in force on its fabric (``_validate_job_range``)."""

    url = IdentityUrlField(view_name="pools-api:pool-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    tenant = serializers.PrimaryKeyRelatedField(
        queryset=Tenant.objects.all(), allow_null=True, required=False
    )
    fabric = serializers.PrimaryKeyRelatedField(
        queryset=Fabric.objects.all(), allow_null=True, required=False
    )
    pkey = PKeyField(
        required=False, allow_null=True,
        help_text="the pool's PKey (0x0001-0x7ffe, unique per fabric; needs a fabric); null: none",
    )  # fmt: skip
    partition = PoolPartitionSerializer(read_only=True, allow_null=True)
    job_pkey_min = PKeyField(required=False, help_text="first PKey of the job PKey range (default 0x6000)")
    job_pkey_max = PKeyField(required=False, help_text="last PKey of the job PKey range (default 0x6fff)")
    usage = serializers.SerializerMethodField()

    class Meta:
        model = Pool
        fields = [
            "id", "url", "display", "name", "description", "tenant", "fabric", "gpu_model", "quota_gpus",
            "guaranteed_gpus", "quota_slices", "guaranteed_slices", "priority_weight", "on_fault", "pkey", "partition",
            "job_isolation", "job_pkey_min", "job_pkey_max", "usage", "created",
        ]  # fmt: skip
        brief_fields = ["id", "url", "display", "name"]
        extra_kwargs = {"priority_weight": {"min_value": 1}}

    @extend_schema_field(PoolUsageSerializer)
    def get_usage(self, pool: Pool) -> dict:
        return pool_summary(pool)

    def validate(self, attrs):
        def value(name):
            return attrs[name] if name in attrs else getattr(self.instance, name, None)

        for unit in ("gpus", "slices"):
            quota, guaranteed = value(f"quota_{unit}"), value(f"guaranteed_{unit}") or 0
            if quota is not None and guaranteed > quota:
                raise serializers.ValidationError(
                    {
                        f"guaranteed_{unit}": [
                            f"the guaranteed share ({guaranteed}) is above the quota ({quota})"
                        ]
                    }
                )
        self._validate_pkey(attrs, value("fabric"), value("pkey"))
        low, high = value("job_pkey_min"), value("job_pkey_max")
        low = 0x6000 if low is None else low
        high = 0x6FFF if high is None else high
        if low > high:
            field = "job_pkey_min" if "job_pkey_min" in attrs else "job_pkey_max"
            raise serializers.ValidationError(
                {field: [f"the job PKey range 0x{low:04x}-0x{high:04x} is empty"]}
            )
        self._validate_job_range(attrs, value, low, high)
        return attrs

    def _validate_job_range(self, attrs, value, low: int, high: int) -> None:
        """A pool PKey never lies in a job PKey range in force on its fabric, whichever side
        changes (``check_pool_pkey``, ``check_job_range``; ``save_pool`` checks again under the
        fabric row locks, which a racing request waits for): 400 on the field that changed,
        naming the range. A pool's unrelated edit is not refused for an overlap stored before
        (``manage.py check --database default`` reports those)."""
        fabric, pkey = value("fabric"), value("pkey")
        current = self.instance.pkey if self.instance is not None else None
        moved = "fabric" in attrs and self.instance is not None and attrs["fabric"] != self.instance.fabric
        pkey_changed = ("pkey" in attrs and attrs["pkey"] != current) or moved
        range_field = next(
            (f for f in ("job_pkey_min", "job_pkey_max", "job_isolation", "fabric") if f in attrs), None
        )
        candidate = Pool(
            pk=self.instance.pk if self.instance is not None else None,
            name=value("name") or "", fabric_id=fabric.pk if fabric is not None else None,
            job_isolation=bool(value("job_isolation")), job_pkey_min=low, job_pkey_max=high,
        )  # fmt: skip
        try:
            if pkey is not None and fabric is not None and pkey_changed:
                field = "pkey" if "pkey" in attrs else "fabric"
                check_pool_pkey(pkey, fabric.pk, pool=candidate)
            if range_field:
                field = range_field  # the pool's own stored PKey counts unless it changes too
                check_job_range(candidate, field=range_field, include_own=not pkey_changed)
        except PoolPKeyError as exc:
            raise serializers.ValidationError({field: [str(exc)]}) from None

    def _validate_pkey(self, attrs, fabric, pkey) -> None:
        """A PKey needs a fabric and must be free on it (the service checks again under its lock)."""
        if pkey is None:
            return
        field = "pkey" if "pkey" in attrs else "fabric"  # a pool with a PKey moving to another fabric
        if fabric is None:
            raise serializers.ValidationError(
                {
                    field: [
                        "a pool needs a fabric to own a PKey (PKeys are per fabric): set fabric, or pkey null"
                    ]
                }
            )
        own = self.instance.partition_id if self.instance is not None else None
        clash = Partition.objects.filter(fabric=fabric, pkey=pkey).exclude(pk=own).first()
        if clash is not None:
            raise serializers.ValidationError(
                {
                    field: [
                        f"PKey 0x{pkey:04x} is already used on fabric {fabric.name} by partition {clash.name}"
                    ]
                }
            )

    def _save(self, pool: Pool, values: dict, pkey) -> Pool:
        """Through ``save_pool``: the PKey and job range checks again, under the fabric row locks
        (two racing requests are judged one after the other); a refusal is a 400 on its field."""
        try:
            return save_pool(pool, values, pkey=pkey)
        except PoolPKeyError as exc:
            raise serializers.ValidationError({exc.field: [str(exc)]}) from None

    def create(self, validated_data):
        pkey = validated_data.pop("pkey", None)
        return self._save(Pool(), validated_data, KEEP if pkey is None else pkey)

    def update(self, instance, validated_data):
        # the PKey before the change, as stored (the view locked the pool row): for the audit entry
        self.pkey_before = (
            Pool.objects.filter(pk=instance.pk).values_list("partition__pkey", flat=True).first()
        )
        return self._save(instance, validated_data, validated_data.pop("pkey", KEEP))


class AllocationItemSerializer(serializers.ModelSerializer):
    gpu = GpuSerializer(nested=True, read_only=True)
    gpu_uuid = serializers.CharField(source="gpu.uuid", read_only=True)
    host = serializers.CharField(source="gpu.host.name", read_only=True)
    mig_slice = MigSliceSerializer(nested=True, read_only=True, allow_null=True)

    class Meta:
        model = AllocationItem
        fields = ["id", "kind", "host", "gpu", "gpu_uuid", "mig_slice", "memory_mib", "compute_pct", "borrowed",
                  "active"]  # fmt: skip


class AllocationEnvSerializer(serializers.Serializer):
    host = serializers.CharField()
    env = serializers.DictField(child=serializers.CharField(), help_text="what the GPU runtime enforces")


class AllocationSerializer(BaseModelSerializer):
    """An allocation, its items, and per host the environment the GPU runtime enforces:
    ``CUDA_VISIBLE_DEVICES`` (GPU or MIG UUIDs), and for a fraction HAMi's ``CUDA_DEVICE_MEMORY_LIMIT``
    (MiB, as ``<n>m``) and ``CUDA_DEVICE_SM_LIMIT`` (%)."""

    url = IdentityUrlField(view_name="pools-api:allocation-detail")
    display = serializers.CharField(source="__str__", read_only=True)
    pool = PoolSerializer(nested=True, read_only=True)
    tenant = TenantSerializer(nested=True, read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True, allow_null=True, default=None)
    items = AllocationItemSerializer(many=True, read_only=True)
    environment = serializers.SerializerMethodField()

    class Meta:
        model = Allocation
        fields = [
            "id", "url", "display", "pool", "tenant", "kind", "owner", "job", "state", "count", "mig_profile",
            "memory_mib", "compute_pct", "borrowed", "created", "started_at", "ended_at", "lease_expires_at",
            "end_reason", "items", "environment",
        ]  # fmt: skip
        brief_fields = ["id", "url", "display", "state"]

    @extend_schema_field(AllocationEnvSerializer(many=True))
    def get_environment(self, alloc: Allocation) -> list[dict]:
        return alloc.environment()


class AllocateRequestSerializer(serializers.Serializer):
    """``POST allocations/allocate/``: what to allocate in which pool (see
    ``pools.services.allocation.AllocationRequest``)."""

    pool = serializers.IntegerField(min_value=1, max_value=2**62, help_text="pool id")
    kind = serializers.ChoiceField(choices=AllocationKind.choices, default=AllocationKind.GPU)
    count = serializers.IntegerField(min_value=1, max_value=4096, default=1)
    gpu_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**62),
        required=False,
        default=list,
        max_length=4096,
    )
    mig_profile = serializers.CharField(max_length=32, required=False, default="", allow_blank=True)
    memory_mib = serializers.IntegerField(
        min_value=1, max_value=2**31 - 1, required=False, allow_null=True, default=None
    )
    compute_pct = serializers.IntegerField(
        min_value=1, max_value=100, required=False, allow_null=True, default=None
    )
    job = serializers.CharField(
        max_length=128, required=False, default="", allow_blank=True, validators=[printable_text]
    )
    lease_s = FiniteFloatField(
        min_value=1, max_value=366 * 86400, required=False, allow_null=True, default=None
    )
    tenant = serializers.IntegerField(
        min_value=1, max_value=2**62, required=False, allow_null=True, default=None,
        help_text="tenant to allocate for (a shared pool; default: your one operator tenant)",
    )  # fmt: skip


class ReleaseRequestSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)


class AllocationErrorSerializer(serializers.Serializer):
    """A refused allocation (409): ``code`` is ``quota_exceeded``, ``not_enough_free`` or
    ``not_holding``; the other fields say why."""

    detail = serializers.CharField()
    code = serializers.CharField()
    field = serializers.CharField(required=False)
    unit = serializers.CharField(required=False)
    quota = serializers.IntegerField(required=False)
    used = serializers.IntegerField(required=False)
    requested = serializers.IntegerField(required=False)
    available = serializers.IntegerField(required=False)
    gpus = serializers.ListField(child=serializers.IntegerField(), required=False)
    state = serializers.CharField(required=False)
    memory_mib = serializers.IntegerField(required=False)
    compute_pct = serializers.IntegerField(required=False)
