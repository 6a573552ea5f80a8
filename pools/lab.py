"""Seed a lab fabric's hosts with GPUs (for the demo, the scheduler and tests).

Every host of a fabric that has CA nodes gets ``gpus_per_host`` GPUs (default 8, an HGX board:
H100 80GB), rail-aligned: GPU i's rail is the host's HCA ``i mod n`` (HCAs sorted by device
number, ``mlx5_0`` < ``mlx5_1`` < ``mlx5_10``), PIX-close, NUMA node ``i // (gpus_per_host / 2)``
— the layout of a rail-optimised pod (``lab.netgen.rail_pod``), where HCA i of every host is on
rail i. ``mig_every=k`` puts the last GPU of every k-th host in MIG mode with a 3g.40gb, a
2g.20gb and two 1g.10gb slices (an H100's placements). The GPUs go through the inventory ingest
(``pools.services.inventory``, source ``lab``), so events, audit and signals are as for an agent's
report; UUIDs derive from the host's name, so seeding again changes nothing.

:func:`seed_demo_pools` adds the demo's tenants, pools (each with a PKey) and a few allocations
on top (``manage.py demo``).
"""

from __future__ import annotations

import re
import uuid as uuidlib
from dataclasses import dataclass, field

from django.db import transaction

from fabric.choices import NodeType
from fabric.models import Fabric, Host

from .choices import HOLDING_STATES, AllocationKind, ReportSource
from .models import Gpu, Pool, Tenant
from .parsers.records import GpuRecord, GpuReport, MigDeviceRecord
from .services.allocation import AllocationError, AllocationRequest, allocate
from .services.inventory import ingest_gpu_report
from .services.partitions import set_pool_pkey

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


@dataclass(frozen=True)
class DemoAllocation:
    """One allocation of the demo: whole GPUs of the hosts at ``hosts`` (indexes into the
    fabric's CA hosts by name, ``per_host`` GPUs each), or ``count`` MIG slices of ``mig_profile``,
    or one fraction (``memory_mib`` + ``compute_pct``) on the first GPU of host ``hosts[0]``."""

    job: str
    hosts: tuple[int, ...] = ()
    per_host: int = 8
    mig_profile: str = ""
    count: int = 0
    memory_mib: int | None = None
    compute_pct: int | None = None


@dataclass(frozen=True)
class DemoPool:
    name: str
    tenant: str
    pkey: int | None
    quota_gpus: int | None
    guaranteed_gpus: int
    quota_slices: int | None = None
    guaranteed_slices: int = 0
    priority_weight: int = 1
    description: str = ""
    allocations: tuple[DemoAllocation, ...] = field(default_factory=tuple)
    #: each job the queue places gets its own partition (``Pool.job_isolation``, default PKey range)
    job_isolation: bool = False


#: tenants of the demo (name, description)
DEMO_TENANTS = [("research", "Model training and research"), ("inference", "Production inference")]
#: the demo's pools: two tenant pools with a PKey each (isolated on the fabric), one shared
DEMO_POOLS = [
    DemoPool("research-h100", "research", 0x0A01, 64, 32, quota_slices=8, guaranteed_slices=4,
             priority_weight=2, description="H100 training pool of the research tenant",
             allocations=(DemoAllocation("train-llm-001", hosts=(1, 2)),
                          DemoAllocation("finetune-042", hosts=(3,), per_host=4),
                          DemoAllocation("notebook-ana", mig_profile="1g.10gb", count=2))),
    DemoPool("inference-h100", "inference", 0x0A02, 32, 16, quota_slices=8, guaranteed_slices=2,
             priority_weight=3, description="H100 serving pool of the inference tenant",
             # a job PKey per job: the demo stream places about one job a minute here, so the
             # lab's OpenSM re-reads its partitions file (SIGHUP) about twice a minute
             job_isolation=True,
             allocations=(DemoAllocation("serve-chat", hosts=(5,)),
                          DemoAllocation("serve-embed", mig_profile="3g.40gb", count=1),
                          DemoAllocation("batch-rerank", hosts=(6,), memory_mib=20000, compute_pct=25))),
    DemoPool("burst", "", None, 16, 0, description="shared by every tenant; no PKey"),
]  # fmt: skip


def seed_demo_pools(fabric: Fabric) -> dict:
    """The demo's tenants and pools on ``fabric`` (a lab seeded by :func:`seed_lab_gpus`; pools
    limited to it), each tenant pool with its PKey and a few allocations (:data:`DEMO_POOLS`),
    in one transaction. Idempotent: existing tenants and pools are kept, a pool that holds
    anything gets no new allocation, a PKey already set stays. The pools' partition members
    follow from their allocations; an apply of the fabric's partitions is queued on commit when
    the fabric has a partitions file (``fabric.services.partitions.queue_apply``).

    A pool with ``job_isolation`` in its spec gets it (also an existing one): each job the queue
    places there has its own job PKey, so the demo's job pages show one.

    Returns ``{"tenants", "pools", "pkeys": {pool: "0x…"}, "job_pkeys": {pool: "0x…-0x…"},
    "allocations", "created", "gpus", "skipped"}``: ``allocations``/``gpus`` the demo's standing
    allocations (:data:`DEMO_POOLS`, by job name) the pools hold after the call and their GPUs, not
    the scheduler's jobs' allocations (a restarted demo counted whatever its queue had placed);
    ``created`` how many of them this call made (0 on a restart: the others were kept);
    ``skipped``: allocations the fabric could not give, e.g. fewer than 7 CA hosts or no MIG GPU,
    with the reason.
    """
    hosts = list(Host.objects.filter(fabric=fabric, nodes__node_type=NodeType.CA).distinct().order_by("name"))
    with transaction.atomic():
        tenants = {name: Tenant.objects.get_or_create(name=name, defaults={"description": d})[0]
                   for name, d in DEMO_TENANTS}  # fmt: skip
        out = {"tenants": len(tenants), "pools": 0, "pkeys": {}, "job_pkeys": {}, "allocations": 0, "created": 0,
               "gpus": 0, "skipped": []}  # fmt: skip
        for spec in DEMO_POOLS:
            pool, _ = Pool.objects.get_or_create(
                name=spec.name,
                defaults=dict(
                    tenant=tenants.get(spec.tenant), fabric=fabric, description=spec.description,
                    gpu_model="H100", quota_gpus=spec.quota_gpus, guaranteed_gpus=spec.guaranteed_gpus,
                    quota_slices=spec.quota_slices, guaranteed_slices=spec.guaranteed_slices,
                    priority_weight=spec.priority_weight, job_isolation=spec.job_isolation,
                ),
            )  # fmt: skip
            if spec.job_isolation and not pool.job_isolation:  # a pool of an earlier demo
                Pool.objects.filter(pk=pool.pk).update(job_isolation=True)
                pool.job_isolation = True
            if pool.fabric_id != fabric.pk:  # a pool of an earlier demo's fabric
                Pool.objects.filter(pk=pool.pk).update(fabric=fabric)
                pool.fabric = fabric
            if not pool.allocations.filter(state__in=HOLDING_STATES).exists():
                for a in spec.allocations:
                    if any(i >= len(hosts) for i in a.hosts):
                        out["skipped"].append(f"{a.job}: the fabric has {len(hosts)} CA hosts")
                        continue
                    try:
                        allocate(pool.pk, _demo_request(a, hosts, pool))
                        out["created"] += 1
                    except AllocationError as exc:  # a fabric without MIG GPUs, a small one
                        out["skipped"].append(f"{a.job}: {exc}")
            if spec.pkey is not None and pool.pkey != spec.pkey:
                set_pool_pkey(pool, spec.pkey)
            if pool.partition_id:
                out["pkeys"][pool.name] = f"0x{pool.pkey:04x}"
            if pool.job_isolation:
                out["job_pkeys"][pool.name] = f"0x{pool.job_pkey_min:04x}-0x{pool.job_pkey_max:04x}"
            out["pools"] += 1
            held = pool.allocations.filter(
                state__in=HOLDING_STATES, job__in=[a.job for a in spec.allocations]
            )
            out["allocations"] += held.count()
            out["gpus"] += held.values("items__gpu").distinct().count()
    return out


def _demo_request(a: DemoAllocation, hosts: list[Host], pool: Pool) -> AllocationRequest:
    tenant_id = (
        None if pool.tenant_id else Tenant.objects.order_by("name").values_list("pk", flat=True).first()
    )
    if a.mig_profile:
        return AllocationRequest(kind=AllocationKind.MIG, count=a.count, mig_profile=a.mig_profile, job=a.job,
                                 tenant_id=tenant_id)  # fmt: skip
    whole = Gpu.objects.filter(mig_mode_current__in=["disabled", "unsupported"]).order_by("index")
    if a.memory_mib:
        gpu = whole.filter(host=hosts[a.hosts[0]]).values_list("pk", flat=True)[:1]
        return AllocationRequest(kind=AllocationKind.FRACTION, gpu_ids=list(gpu), memory_mib=a.memory_mib,
                                 compute_pct=a.compute_pct, job=a.job, tenant_id=tenant_id)  # fmt: skip
    ids = [
        pk for i in a.hosts for pk in whole.filter(host=hosts[i]).values_list("pk", flat=True)[: a.per_host]
    ]
    return AllocationRequest(count=len(ids), gpu_ids=ids, job=a.job, tenant_id=tenant_id)
