"""Seed a lab fabric's hosts with GPUs (for the demo, the scheduler and tests).

Every host of a fabric that has CA nodes gets ``gpus_per_host`` GPUs (default 8, an HGX board:
H100 80GB), rail-aligned: GPU i's rail is the host's HCA ``i mod n`` (HCAs sorted by device
number, ``mlx5_0`` < ``mlx5_1`` < ``mlx5_10``), PIX-close, NUMA node ``i // (gpus_per_host / 2)``
— the layout of a rail-optimised pod (``lab.netgen.rail_pod``), where HCA i of every host is on
rail i. ``mig_every=k`` puts the last GPU of every k-th host in MIG mode with a 3g.40gb, a
2g.20gb and two 1g.10gb slices (an H100's placements). The GPUs go through the inventory ingest
(``pools.services.inventory``, source ``lab``), so events, audit and signals are as for an agent's
report; UUIDs derive from the host's name, so seeding again changes nothing.
"""

from __future__ import annotations

import re
import uuid as uuidlib

from fabric.choices import NodeType
from fabric.models import Fabric, Host

from .choices import ReportSource
from .parsers.records import GpuRecord, GpuReport, MigDeviceRecord
from .services.inventory import ingest_gpu_report

PRODUCT = "NVIDIA H100 80GB HBM3"
MEMORY_MIB = 81559
#: (GPU-instance id, profile, profile id, placement start, size, memory MiB) of the MIG GPU
MIG_LAYOUT = [
    (2, "3g.40gb", 9, 0, 4, 40448),
    (3, "2g.20gb", 14, 4, 2, 20096),
    (9, "1g.10gb", 19, 6, 1, 9984),
    (10, "1g.10gb", 19, 7, 1, 9984),
]
_NS = uuidlib.UUID("8f9e4b52-6f0e-4c36-9a57-5d0a9a1f1c11")


def _device_key(description: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", description.split()[-1])) if description else ()


def lab_report(host: Host, hca_devices: list[str], gpus_per_host: int = 8, *, mig: bool = False) -> GpuReport:
    """The synthetic report of one host (see the module docstring); ``hca_devices`` sorted."""
    report = GpuReport(source=f"lab:{host.name}", driver_version="550.54.15", cuda_version="12.4",
                       attached_gpus=gpus_per_host)  # fmt: skip
    half = max(1, gpus_per_host // 2)
    for i in range(gpus_per_host):
        g = GpuRecord(
            index=i,
            uuid=f"GPU-{uuidlib.uuid5(_NS, f'{host.fabric.name}/{host.name}/{i}')}",
            pci_bus_id=f"00000000:{0x18 + 0x10 * i:02x}:00.0",
            minor_number=i,
            product_name=PRODUCT,
            architecture="Hopper",
            memory_total_mib=MEMORY_MIB,
            memory_reserved_mib=479,
            numa_node=i // half,
            health="healthy",
            mig_current="disabled",
            mig_pending="disabled",
        )
        if hca_devices:
            g.rail_device, g.rail_affinity = hca_devices[i % len(hca_devices)], "PIX"
        if mig and i == gpus_per_host - 1:
            g.mig_current = g.mig_pending = "enabled"
            g.mig_devices = [
                MigDeviceRecord(
                    gi, 0, n, profile, pid, start, size, f"MIG-{uuidlib.uuid5(_NS, f'{g.uuid}/{gi}')}", mem
                )  # fmt: skip
                for n, (gi, profile, pid, start, size, mem) in enumerate(MIG_LAYOUT)
            ]
        report.gpus.append(g)
    return report


def seed_lab_gpus(fabric: Fabric, gpus_per_host: int = 8, *, mig_every: int = 0) -> dict:
    """Seed every CA host of ``fabric`` (see the module docstring); returns ``{"fabric", "hosts",
    "gpus", "mig_slices", "rows_written"}``.

    Raises:
        ValueError: ``gpus_per_host`` not in 1..64, or ``mig_every`` negative.
    """
    if not 1 <= gpus_per_host <= 64 or mig_every < 0:
        raise ValueError("gpus_per_host must be 1..64 and mig_every >= 0")
    hosts = Host.objects.filter(fabric=fabric, nodes__node_type=NodeType.CA).distinct().order_by("name")
    out = {"fabric": fabric.name, "hosts": 0, "gpus": 0, "mig_slices": 0, "rows_written": 0}
    for n, host in enumerate(hosts.select_related("fabric")):
        descs = host.nodes.filter(node_type=NodeType.CA).values_list("description", flat=True)
        devices = [d.split()[-1] for d in sorted(descs, key=_device_key) if len(d.split()) == 2]
        mig = bool(mig_every) and n % mig_every == 0
        s = ingest_gpu_report(
            host, lab_report(host, devices, gpus_per_host, mig=mig), source=ReportSource.LAB
        )
        out["hosts"] += 1
        out["gpus"] += s["gpus"]
        out["mig_slices"] += s["mig_slices"]
        out["rows_written"] += s["rows_written"]
    return out
