"""Synthetic GPU inventory for tests and benchmarks at scale.

Rows are bulk-written directly (2,048 hosts through ``pools.services.inventory`` would take
minutes): this is test data, not a second writer of reported facts. Real reports go through the
inventory ingest.
"""

from __future__ import annotations

from fabric.models import Fabric, Host
from pools.models import Gpu


def make_gpu_fabric(
    name: str = "gpus",
    hosts: int = 4,
    per_host: int = 8,
    product: str = "NVIDIA H100 80GB HBM3",
    memory_mib: int = 81559,
) -> Fabric:
    """A fabric ``name`` with ``hosts`` hosts (``gpu0001``...) of ``per_host`` free, healthy,
    MIG-off GPUs each (UUID ``GPU-<name>-<host>-<i>``); returns the fabric."""  # fmt: skip
    fabric, _ = Fabric.objects.get_or_create(name=name)
    Host.objects.bulk_create(
        [Host(fabric=fabric, name=f"gpu{h:04d}") for h in range(1, hosts + 1)], batch_size=2000
    )
    rows = []
    for host in Host.objects.filter(fabric=fabric).order_by("pk"):
        for i in range(per_host):
            rows.append(Gpu(
                host=host, uuid=f"GPU-{name}-{host.name}-{i}", index=i, product_name=product, memory_total_mib=memory_mib,
                memory_reserved_mib=0, health="healthy", mig_mode_current="disabled", mig_mode_pending="disabled",
                pci_bus_id=f"00000000:{i:02x}:00.0",
            ))  # fmt: skip
    Gpu.objects.bulk_create(rows, batch_size=5000)
    return fabric
