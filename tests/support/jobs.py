"""A small GPU cluster for the job-queue tests: a 2-level fat tree imported through the real
ingest (``lab.netgen``), GPUs seeded through the inventory service (``pools.lab``), a tenant and
its pool. Hosts ``host001``… in leaf order (``hosts_per_leaf`` per leaf)."""

from __future__ import annotations

from dataclasses import dataclass

from fabric.models import Fabric
from fabric.services.ingest import import_topology_text
from lab import netgen
from pools.lab import seed_lab_gpus
from pools.models import Pool, Tenant


@dataclass
class Cluster:
    fabric: Fabric
    tenant: Tenant
    pool: Pool
    hosts: list[str]


def gpu_cluster(
    leaves: int = 2,
    hosts_per_leaf: int = 2,
    gpus: int = 8,
    *,
    name: str = "jobs",
    quota: int | None = None,
    mig_every: int = 0,
) -> Cluster:
    """``leaves`` × ``hosts_per_leaf`` hosts of ``gpus`` H100s, tenant ``t-<name>`` with pool
    ``p-<name>`` (quota ``quota`` GPUs, none by default) on that fabric. ``mig_every=k``: the last
    GPU of every k-th host in MIG mode (``pools.lab``: a 3g.40gb, a 2g.20gb and two 1g.10gb
    slices)."""
    fabric = import_topology_text(
        name, netgen.fat_tree_2level(leaves, 2, hosts_per_leaf), filename=f"{name}.topo"
    ).fabric
    seed_lab_gpus(fabric, gpus, mig_every=mig_every)
    tenant = Tenant.objects.create(name=f"t-{name}")
    pool = Pool.objects.create(name=f"p-{name}", tenant=tenant, fabric=fabric, quota_gpus=quota)
    hosts = [f"host{i:03d}" for i in range(1, leaves * hosts_per_leaf + 1)]
    return Cluster(fabric, tenant, pool, hosts)
