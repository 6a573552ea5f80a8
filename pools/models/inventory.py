"""The GPU inventory: GPUs and MIG slices of the hosts of a fabric (issue 11, "Inventory").

Attach point is :class:`fabric.models.Host`. Values come from ``nvidia-smi -q -x`` (NVML; the
documented ``nvsmi_device_v*.dtd`` schema), ``nvidia-smi mig -lgi/-lci`` and ``nvidia-smi topo -m``
through ``pools.parsers``; the one writer of presence, health and inventory fields is
``pools.services.inventory``. ``state`` (free/allocated/...) belongs to the allocation service:
the inventory creates rows free and never changes it. A GPU or slice the host no longer reports
keeps its row with ``missing_since`` set (an allocated GPU must survive a bad report).
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from fabric.models import Host, Node

from ..choices import GpuState, Health, MigMode, ReportSource
from ..querysets import GpuQuerySet, MigSliceQuerySet


class HostInventory(models.Model):
    """The last GPU report of a host: driver, CUDA version, when and from where, warnings, and
    the HCAs the host agent saw locally.

    ``hcas`` = ``[{"name": "mlx5_0", "node_guid": "0x…", "ports": [{"port_num": 1, "port_guid":
    "0x…", "link_layer": "InfiniBand"|"Ethernet", "state": "ACTIVE", "rate_gbps": 200.0}]}]``
    (the agent's view; fabric topology rows stay the discovery's). ``warnings`` = ``[{"where",
    "message"}]``.
    """

    host = models.OneToOneField(Host, on_delete=models.CASCADE, related_name="gpu_inventory")
    report_source = models.CharField(max_length=8, choices=ReportSource.choices)
    reported_at = models.DateTimeField()
    driver_version = models.CharField(max_length=32, blank=True)
    cuda_version = models.CharField(max_length=16, blank=True)
    attached_gpus = models.PositiveSmallIntegerField(null=True, blank=True)
    hcas = models.JSONField(default=list, blank=True)
    warnings = models.JSONField(default=list, blank=True)

    class Meta:
        verbose_name_plural = "host inventories"

    def __str__(self) -> str:
        return f"{self.host} inventory"


class Gpu(models.Model):
    """One physical GPU of a host.

    ``index`` is NVML's index (nvidia-smi ``-i`` and the order of the ``<gpu>`` elements: PCI bus
    order), not ``minor_number`` (``/dev/nvidiaN``), which may differ. Memory is MiB as reported
    by ``fb_memory_usage`` (capacity only: used/free are telemetry, not inventory; an impossible
    reading is a warning of the report). ``rail_node``
    is the host's CA closest to the GPU on PCIe (``nvidia-smi topo -m``), ``rail_affinity`` the
    matrix entry to it (PIX < PXB < PHB < NODE < SYS).
    """

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="gpus")
    uuid = models.CharField(max_length=64, unique=True, help_text="NVML UUID, e.g. GPU-27b94a00-…")
    index = models.PositiveSmallIntegerField()
    minor_number = models.PositiveSmallIntegerField(null=True, blank=True)
    product_name = models.CharField(max_length=96, blank=True)
    architecture = models.CharField(max_length=32, blank=True)
    serial = models.CharField(max_length=64, blank=True)
    memory_total_mib = models.PositiveIntegerField(null=True, blank=True)
    memory_reserved_mib = models.PositiveIntegerField(null=True, blank=True)
    pci_bus_id = models.CharField(
        max_length=16, blank=True, help_text="domain:bus:device.function, lower case"
    )
    numa_node = models.SmallIntegerField(null=True, blank=True)
    health = models.CharField(max_length=10, choices=Health.choices, default=Health.UNKNOWN)
    health_reasons = models.JSONField(default=list, blank=True)
    mig_mode_current = models.CharField(max_length=12, choices=MigMode.choices, default=MigMode.UNSUPPORTED)
    mig_mode_pending = models.CharField(max_length=12, choices=MigMode.choices, default=MigMode.UNSUPPORTED)
    rail_node = models.ForeignKey(
        Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="rail_gpus",
        help_text="the host's CA closest to this GPU (its rail)",
    )  # fmt: skip
    rail_device = models.CharField(max_length=32, blank=True, help_text="RDMA device name, e.g. mlx5_3")
    rail_affinity = models.CharField(
        max_length=8, blank=True, help_text="topo -m entry: PIX, PXB, PHB, NODE, SYS"
    )
    state = models.CharField(max_length=10, choices=GpuState.choices, default=GpuState.FREE, db_index=True)
    missing_since = models.DateTimeField(null=True, blank=True, db_index=True)
    first_seen = models.DateTimeField(auto_now_add=True)

    objects = models.Manager.from_queryset(GpuQuerySet)()

    class Meta:
        ordering = ["host", "index", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["host", "index"],
                condition=Q(missing_since__isnull=True),
                name="gpu_index_unique_present",
            )
        ]
        # the allocation service's "first free GPUs in pk order" (pools.services.allocation)
        indexes = [
            models.Index(
                fields=["id"], condition=Q(state="free", missing_since__isnull=True), name="gpu_free_by_pk"
            )
        ]

    def __str__(self) -> str:
        return f"{self.host} GPU{self.index}"

    @property
    def present(self) -> bool:
        return self.missing_since is None


class MigSlice(models.Model):
    """A MIG device: one compute instance of one GPU instance (``nvidia-smi mig -lgi/-lci``).

    ``profile`` is the GPU-instance profile name without ``MIG`` (``1g.10gb``, ``3g.40gb``);
    ``placement_start``/``placement_size`` are in memory slices (``-lgi`` Start:Size). The XML
    lists MIG devices without a profile name: it comes from ``-lgi`` when reported with it.
    """

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="mig_slices")
    gpu_instance_id = models.PositiveSmallIntegerField()
    compute_instance_id = models.PositiveSmallIntegerField()
    mig_index = models.PositiveSmallIntegerField(null=True, blank=True, help_text="MIG device index (-L)")
    profile = models.CharField(max_length=32, blank=True)
    profile_id = models.PositiveSmallIntegerField(null=True, blank=True)
    placement_start = models.PositiveSmallIntegerField(null=True, blank=True)
    placement_size = models.PositiveSmallIntegerField(null=True, blank=True)
    uuid = models.CharField(max_length=64, blank=True, help_text="MIG-… when reported")
    memory_total_mib = models.PositiveIntegerField(null=True, blank=True)
    sm_count = models.PositiveSmallIntegerField(null=True, blank=True)
    state = models.CharField(max_length=10, choices=GpuState.choices, default=GpuState.FREE, db_index=True)
    missing_since = models.DateTimeField(null=True, blank=True, db_index=True)
    first_seen = models.DateTimeField(auto_now_add=True)

    objects = models.Manager.from_queryset(MigSliceQuerySet)()

    class Meta:
        ordering = ["gpu", "gpu_instance_id", "compute_instance_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu", "gpu_instance_id", "compute_instance_id"], name="mig_slice_unique_per_gpu"
            )
        ]

    def __str__(self) -> str:
        return f"{self.gpu} MIG {self.profile or '?'} gi{self.gpu_instance_id}/ci{self.compute_instance_id}"

    @property
    def present(self) -> bool:
        return self.missing_since is None
