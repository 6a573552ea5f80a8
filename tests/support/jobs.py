"""A small GPU cluster for the job-queue tests: a 2-level fat tree imported through the real
ingest (``lab.netgen``), GPUs seeded through the inventory service (``pools.lab``), a tenant and
its pool. Hosts ``host001``… in leaf order (``hosts_per_leaf`` per leaf)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q
from django.utils import timezone

from events.models import Alarm
from fabric.keys import link_key
from fabric.models import Fabric, Link
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


# --- faults on a cluster's fabric (scheduler.services.faults reads open alarms) ---------------------
def host_link(cluster, host: str) -> Link:
    """The one link of ``host``'s HCA in ``cluster``'s fabric."""
    return Link.objects.select_related("port_a__node", "port_b__node").get(
        Q(port_a__node__host__name=host) | Q(port_b__node__host__name=host), fabric=cluster.fabric
    )


def open_alarm(cluster, code: str, key: str, text: str, **kw) -> Alarm:
    """An open Critical alarm ``code`` on ``key`` (a link by default; ``type=`` another kind)."""
    now = timezone.now()
    return Alarm.objects.create(
        fabric=cluster.fabric, code=code, severity="critical", category="topology", object_type=kw.pop("type", "link"),
        object_key=key, object_repr=text, message=text, first_seen=now, last_seen=now, **kw,
    )  # fmt: skip


def link_down(cluster, host: str) -> Alarm:
    """The open ``link.down`` alarm of ``host``'s HCA link, as the alarm engine raises it."""
    link = host_link(cluster, host)
    a, b = link.port_a, link.port_b
    key = link_key((a.node.node_guid, a.port_num), (b.node.node_guid, b.port_num))
    return open_alarm(cluster, "link.down", key, str(link))
