"""Tenants, pools, quotas and allocations (issue 11, "Pools, tenants, quotas, allocations").

A :class:`Pool` is a quota over the GPU inventory, not a fixed set of GPUs: any allocatable GPU
(``Gpu.objects.allocatable()``) that matches the pool's filters (GPU model, fabric) may be handed
out in it, the way a Kueue ClusterQueue's nominal quota is drawn from a cohort's capacity. Each
pool has a **guaranteed** share (GPUs it can always get back, reclaiming what other pools
borrowed) and a hard **quota** (guaranteed + borrowable). An :class:`Allocation` holds GPUs, MIG
slices or one shared-GPU fraction through :class:`AllocationItem` rows; the one writer of
allocations, items and ``Gpu.state``/``MigSlice.state`` is ``pools.services.allocation``.

Isolation on the fabric (a PKey per pool, issue 11 "Partitions") is the fabric app's model: a pool
may own one :class:`fabric.models.Partition` (``Pool.partition``) on its fabric, whose ``pool``
members ``pools.services.partitions`` keeps equal to the CA ports of the hosts the pool holds GPUs on.
"""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from core.validators import printable_text
from fabric.models import Fabric, Partition

from ..choices import AllocationKind, AllocationState, OnFault, TenantRole
from .inventory import Gpu, MigSlice


class Tenant(models.Model):
    """An organisation (team, project) whose members share pools and quotas.

    ``contacts``: e-mail addresses that get mail when one of its jobs is degraded, requeued,
    replaced or failed (``scheduler.services.faults``); ``webhook_url``/``webhook_secret``: a
    signed webhook for its jobs' state changes (``outbound``; a job's own URL wins)."""

    name = models.CharField(max_length=64, unique=True, validators=[printable_text])
    description = models.CharField(max_length=200, blank=True, validators=[printable_text])
    contacts = models.JSONField(
        default=list, blank=True, help_text="e-mail addresses told when the tenant's jobs are degraded, requeued, "
        "replaced or failed",
    )  # fmt: skip
    webhook_url = models.URLField(
        max_length=500, blank=True, help_text="signed webhook for its jobs' state changes"
    )
    webhook_secret = models.CharField(max_length=200, blank=True, help_text="HMAC-SHA256 key of the webhook")
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="TenantMembership", related_name="tenants", blank=True
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TenantMembership(models.Model):
    """A user in a tenant, with the role they have there (:class:`pools.choices.TenantRole`)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tenant_memberships"
    )
    role = models.CharField(max_length=10, choices=TenantRole.choices, default=TenantRole.VIEWER)

    class Meta:
        ordering = ["tenant", "user"]
        constraints = [models.UniqueConstraint(fields=["tenant", "user"], name="tenant_membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant} ({self.role})"


class Pool(models.Model):
    """A GPU quota of one tenant, or shared by all tenants (``tenant`` null).

    GPUs it may draw: allocatable GPUs whose ``product_name`` contains ``gpu_model``
    (case-insensitive; blank: any) on hosts of ``fabric`` (null: any). Quotas count whole GPUs
    plus the distinct GPUs the pool holds fractions on (``quota_gpus``), and MIG slices
    (``quota_slices``); null means no cap. ``guaranteed_*`` (≤ the quota) is the share the pool
    gets back by reclaiming GPUs other pools borrowed; what it holds above that is borrowed and
    may be reclaimed. ``priority_weight``: among borrowers, the lower weight is reclaimed first.

    ``partition``: the pool's IB partition (PKey 0x0001-0x7ffe, unique per fabric: the
    partition's own constraint) on ``fabric``; its ``pool`` members are the port GUIDs of the CA
    ports of the hosts whose GPUs the pool holds, its other members (``extra``: storage, login
    nodes) are configured on the partition. Written only by ``pools.services.partitions``.

    ``job_isolation``: every job the queue places in this pool gets a partition of its own whose
    members are its hosts' CA ports (full membership), removed when the job ends, as the UFM
    Slurm plugin's prolog/epilog do. Its PKey is the lowest one in ``job_pkey_min``-
    ``job_pkey_max`` (inclusive, 0x0001-0x7ffe) that no partition of the fabric uses
    (``pools.services.partitions.open_job_partition``): a configured range per pool, never a
    PKey an imported, pool or other job partition holds.

    ``on_fault``: the default of its jobs' ``on_fault`` (``notify``/``requeue``/``replace``,
    ``scheduler.services.faults``).
    """

    name = models.CharField(max_length=64, unique=True, validators=[printable_text])
    description = models.CharField(max_length=200, blank=True, validators=[printable_text])
    tenant = models.ForeignKey(
        Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="pools",
        help_text="owning tenant; empty for a pool shared by every tenant",
    )  # fmt: skip
    fabric = models.ForeignKey(
        Fabric, null=True, blank=True, on_delete=models.CASCADE, related_name="pools",
        help_text="only GPUs of this fabric's hosts (empty: any fabric)",
    )  # fmt: skip
    gpu_model = models.CharField(
        max_length=96, blank=True, help_text="GPU product name contains this (case-insensitive); empty: any"
    )
    quota_gpus = models.PositiveIntegerField(null=True, blank=True, help_text="hard cap in GPUs; empty: none")
    guaranteed_gpus = models.PositiveIntegerField(default=0, help_text="GPUs the pool can always reclaim")
    quota_slices = models.PositiveIntegerField(null=True, blank=True, help_text="hard cap in MIG slices")
    guaranteed_slices = models.PositiveIntegerField(default=0)
    priority_weight = models.PositiveSmallIntegerField(
        default=1, help_text="reclaim order among borrowers: lower weight loses borrowed GPUs first"
    )
    partition = models.OneToOneField(
        Partition, null=True, blank=True, on_delete=models.SET_NULL, related_name="pool", editable=False,
        help_text="the pool's IB partition (PKey) on its fabric; empty: none",
    )  # fmt: skip
    job_isolation = models.BooleanField(
        default=False, help_text="each job placed in the pool gets its own partition (job PKey) of its hosts"
    )
    job_pkey_min = models.PositiveIntegerField(
        default=0x6000, validators=[MinValueValidator(0x0001), MaxValueValidator(0x7FFE)],
        help_text="first PKey of the range job partitions take theirs from",
    )  # fmt: skip
    job_pkey_max = models.PositiveIntegerField(
        default=0x6FFF, validators=[MinValueValidator(0x0001), MaxValueValidator(0x7FFE)],
        help_text="last PKey (inclusive) of that range",
    )  # fmt: skip
    on_fault = models.CharField(
        max_length=8, choices=OnFault.choices, default=OnFault.NOTIFY,
        help_text="what the queue does with a running job of this pool whose fabric fails (the jobs' default)",
    )  # fmt: skip
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    job_pkey_min__gte=1, job_pkey_min__lte=models.F("job_pkey_max"), job_pkey_max__lte=0x7FFE
                ),
                name="pool_job_pkey_range",
            ),
            models.CheckConstraint(
                condition=Q(quota_gpus__isnull=True) | Q(guaranteed_gpus__lte=models.F("quota_gpus")),
                name="pool_guaranteed_gpus_within_quota",
            ),
            models.CheckConstraint(
                condition=Q(quota_slices__isnull=True) | Q(guaranteed_slices__lte=models.F("quota_slices")),
                name="pool_guaranteed_slices_within_quota",
            ),
            models.CheckConstraint(condition=Q(priority_weight__gte=1), name="pool_priority_weight_positive"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def shared(self) -> bool:
        return self.tenant_id is None

    @property
    def pkey(self) -> int | None:
        """The PKey of the pool's partition (15 bits), None without one."""
        return self.partition.pkey if self.partition_id else None


class Allocation(models.Model):
    """GPUs, MIG slices or a shared-GPU fraction held by a user and/or a job in a pool.

    ``tenant`` is on whose behalf (the pool's tenant, or for a shared pool the requester's), and
    scopes who sees it. ``lease_expires_at`` (null: no lease) ends it as ``expired``. ``borrowed``:
    some of its GPUs/slices are above the pool's guaranteed share (reclaimable).
    """

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="allocations")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="allocations")
    kind = models.CharField(max_length=10, choices=AllocationKind.choices)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="gpu_allocations",
    )
    job = models.CharField(
        max_length=128,
        blank=True,
        validators=[printable_text],
        help_text="job reference (scheduler, Slurm id)",
    )
    state = models.CharField(max_length=10, choices=AllocationState.choices, default=AllocationState.ACTIVE)
    count = models.PositiveIntegerField(help_text="GPUs or slices held (1 for a fraction)")
    mig_profile = models.CharField(max_length=32, blank=True, help_text="MIG profile asked for, e.g. 1g.10gb")
    memory_mib = models.PositiveIntegerField(null=True, blank=True, help_text="fraction: GPU memory, MiB")
    compute_pct = models.PositiveSmallIntegerField(null=True, blank=True, help_text="fraction: SM share, %")
    borrowed = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["pool", "state"]),
            models.Index(
                fields=["lease_expires_at"], condition=Q(state="active"), name="allocation_lease_active"
            ),
            # the scheduler finds a job's allocations by its reference (scheduler.services.timeline,
            # pools.lab's holding check): without it, a scan of every allocation ever made
            models.Index(fields=["job"], name="allocation_job"),
        ]

    def __str__(self) -> str:
        who = self.job or (self.owner.username if self.owner_id else "")
        return f"{self.pool} #{self.pk} {self.count} {self.kind}{' ' + who if who else ''}"

    def environment(self) -> list[dict]:
        """Per host, what the GPU runtime enforces for the active items: ``[{"host": name, "env":
        {"CUDA_VISIBLE_DEVICES": "GPU-…,MIG-…"}}]`` (GPU or MIG UUIDs, in item order), and for a
        fraction HAMi's ``CUDA_DEVICE_MEMORY_LIMIT`` (MiB, as ``<n>m``) and
        ``CUDA_DEVICE_SM_LIMIT`` (%). Reads ``items`` with their GPUs' hosts and slices (prefetch
        them). The API's ``environment`` and the pool page's result."""
        hosts: dict[str, list] = {}
        for item in self.items.all():
            if not item.active:
                continue
            uuid = item.mig_slice.uuid if item.mig_slice_id and item.mig_slice.uuid else item.gpu.uuid
            hosts.setdefault(item.gpu.host.name, []).append(uuid)
        out = []
        for host, uuids in hosts.items():
            env = {"CUDA_VISIBLE_DEVICES": ",".join(uuids)}
            if self.kind == AllocationKind.FRACTION:
                env |= {
                    "CUDA_DEVICE_MEMORY_LIMIT": f"{self.memory_mib}m",
                    "CUDA_DEVICE_SM_LIMIT": str(self.compute_pct),
                }
            out.append({"host": host, "env": env})
        return out


class AllocationItem(models.Model):
    """One GPU, slice or fraction of an allocation. ``active`` while the allocation holds it: at
    most one active whole-GPU item per GPU and one active item per slice (database constraints,
    the last guard against double booking); fractions of one GPU are summed by the service
    against the GPU's memory and 100 % compute under the GPU's row lock."""

    allocation = models.ForeignKey(Allocation, on_delete=models.CASCADE, related_name="items")
    kind = models.CharField(max_length=10, choices=AllocationKind.choices)
    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="allocation_items")
    mig_slice = models.ForeignKey(
        MigSlice, null=True, blank=True, on_delete=models.CASCADE, related_name="allocation_items"
    )
    memory_mib = models.PositiveIntegerField(null=True, blank=True)
    compute_pct = models.PositiveSmallIntegerField(null=True, blank=True)
    borrowed = models.BooleanField(default=False)
    active = models.BooleanField(default=True)

    class Meta:
        ordering = ["allocation", "gpu", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu"], condition=Q(active=True, kind="gpu"), name="allocation_item_gpu_once"
            ),
            models.UniqueConstraint(
                fields=["mig_slice"], condition=Q(active=True, kind="mig"), name="allocation_item_slice_once"
            ),
        ]
        indexes = [models.Index(fields=["gpu"], condition=Q(active=True), name="allocation_item_active_gpu")]

    def __str__(self) -> str:
        return f"{self.allocation_id}: {self.mig_slice or self.gpu}"
