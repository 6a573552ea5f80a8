"""A pool's PKey applied by the real OpenSM of the lab (issue 11, "Lab test"): GPUs of two hosts
allocated to a pool with a PKey → their HCA ports carry the PKey (``smpquery pkeys``, read by the
test itself), a host outside does not; released → removed. The apply is the one the allocation
queues (``fabric.tasks.apply_partitions_task``; no worker runs here, so it runs when the
allocation commits)."""

from __future__ import annotations

import pytest

from fabric.choices import ApplyState, NodeType
from fabric.models import Fabric, Host, Port
from fabric.parsers.partitions import parse_smpquery_pkeys
from fabric.services.discovery import discover
from lab import netgen
from pools.lab import seed_lab_gpus
from pools.models import Gpu, Pool, Tenant
from pools.services.allocation import AllocationRequest, allocate, release
from pools.services.partitions import set_pool_pkey
from tests.support.waits import wait_for

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]

PKEY = 0x0A42


@pytest.fixture
def lab_pool(lab_factory, committed_signals):
    lab = lab_factory(netgen.fat_tree_2level(2, 1, 4))  # 8 single-HCA hosts
    fabric = Fabric.objects.create(
        name="pk",
        tool_env=dict(lab.tool_env),
        partitions_path=str(lab.partitions_path),
        sm_pid_file=str(lab.sm_pid_file),
    )
    discover(fabric)
    seed_lab_gpus(fabric, 8)
    pool = Pool.objects.create(name="vision", tenant=Tenant.objects.create(name="t"), fabric=fabric)
    return lab, fabric, pool


def _guids(fabric: Fabric, host: str) -> list[str]:
    return list(
        Port.objects.filter(node__host__name=host, node__fabric=fabric, node__node_type=NodeType.CA)
        .exclude(port_guid="")
        .values_list("port_guid", flat=True)
    )


def _membership(lab, guid: str) -> str | None:
    return parse_smpquery_pkeys(lab.run(["smpquery", "pkeys", "-G", guid]).stdout).membership(PKEY)


def test_pool_hosts_get_the_pkey_outside_hosts_do_not_release_removes_it(lab_pool):
    lab, fabric, pool = lab_pool
    hosts = sorted(Host.objects.filter(fabric=fabric).values_list("name", flat=True))
    assert len(hosts) == 8
    inside, outside = [hosts[2], hosts[6]], [hosts[0], hosts[5]]
    set_pool_pkey(pool, PKEY)  # no member yet: the apply writes an empty partition
    offset = lab.sm_log_size()
    allocs = [
        allocate(pool.pk, AllocationRequest(count=3, gpu_ids=list(
            Gpu.objects.filter(host__name=h).order_by("index").values_list("pk", flat=True)[:3])))
        for h in inside
    ]  # fmt: skip
    members = [g for h in inside for g in _guids(fabric, h)]
    others = [g for h in outside for g in _guids(fabric, h)]
    assert len(members) == 2 and len(others) == 2
    wait_for(
        lambda: all(_membership(lab, g) == "full" for g in members), 30, "the pool's hosts to get the PKey"
    )
    assert [_membership(lab, g) for g in others] == [None, None]
    assert lab.partition_errors(offset) == []
    pool.refresh_from_db()
    assert (pool.partition.applied_state, pool.partition.drift) == (ApplyState.APPLIED, [])
    assert f"{members[0]}=full" in lab.partitions_path.read_text()

    release(allocs[0].pk)
    wait_for(lambda: _membership(lab, members[0]) is None, 30, "the released host to lose the PKey")
    assert _membership(lab, members[1]) == "full"
    release(allocs[1].pk)
    wait_for(lambda: _membership(lab, members[1]) is None, 30, "the last host to lose the PKey")
    for g in members + others:
        assert (
            parse_smpquery_pkeys(lab.run(["smpquery", "pkeys", "-G", g]).stdout).membership(0x7FFF) == "full"
        )
    pool.partition.refresh_from_db()
    assert pool.partition.applied_state == ApplyState.APPLIED


def test_demo_tenants_pools_and_pkeys_on_the_lab_opensm(lab_factory, committed_signals):
    """The demo's own steps (``manage.py demo``: its lab fabric, GPUs, then tenants and pools) on
    a small lab: both PKeys applied by OpenSM on their hosts' ports, other hosts without them."""
    from io import StringIO

    from pools.models import Tenant
    from weft.management.commands.demo import Command

    lab = lab_factory(netgen.fat_tree_2level(2, 1, 4))  # 8 single-HCA hosts
    cmd = Command(stdout=StringIO())
    fabric, _ = cmd._prepare_fabric("lab", lab)
    seed_lab_gpus(fabric, 8, mig_every=4)
    cmd._pools(fabric)
    out = cmd.stdout.getvalue()
    assert "Seeded 2 tenants, 3 pools (research-h100 PKey 0x0a01, inference-h100 PKey 0x0a02)" in out
    assert sorted(Tenant.objects.values_list("name", flat=True)) == ["inference", "research"]

    def pkeys(host: str) -> dict[int, str]:
        (guid,) = _guids(fabric, host)
        table = parse_smpquery_pkeys(lab.run(["smpquery", "pkeys", "-G", guid]).stdout)
        return {k: m for k in (0x0A01, 0x0A02) if (m := table.membership(k))}

    # research: hosts 2-4 whole, host 1's MIG GPU; inference: host 6, a fraction on host 7, and a
    # MIG slice of host 1 (in both partitions through its MIG GPU)
    expected = {"host001": {0x0A01: "full", 0x0A02: "full"}, "host002": {0x0A01: "full"},
                "host003": {0x0A01: "full"}, "host004": {0x0A01: "full"}, "host005": {},
                "host006": {0x0A02: "full"}, "host007": {0x0A02: "full"}, "host008": {}}  # fmt: skip
    wait_for(lambda: {h: pkeys(h) for h in expected} == expected, 30, "the demo's PKeys on the hosts' ports")
    for pool in Pool.objects.exclude(partition=None).select_related("partition"):
        assert pool.partition.applied_state == ApplyState.APPLIED, pool
