"""The lab seed: 8 rail-aligned GPUs per CA host, through the inventory ingest, idempotent."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from fabric.models import Fabric, Host
from fabric.services.ingest import import_topology_text
from lab import netgen
from pools.lab import seed_lab_gpus
from pools.models import Gpu, MigSlice


def _check_rails(fabric: Fabric, rails: int) -> None:
    for host in Host.objects.filter(fabric=fabric):
        gpus = list(Gpu.objects.filter(host=host).select_related("rail_node").order_by("index"))
        assert [g.rail_node.description for g in gpus] == [f"{host.name} mlx5_{i % rails}" for i in range(8)]
        assert [g.numa_node for g in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_seed_rail_pod_import(db):
    fabric = import_topology_text("pod", netgen.rail_pod(hosts=4, rails=4), filename="pod.net").fabric
    s = seed_lab_gpus(fabric, mig_every=2)
    assert (s["hosts"], s["gpus"], s["mig_slices"]) == (4, 32, 8)
    _check_rails(fabric, 4)
    mig_gpu = Gpu.objects.get(host__name="host001", index=7)
    assert mig_gpu.mig_mode_current == "enabled"
    assert [m.profile for m in mig_gpu.mig_slices.all()] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert not MigSlice.objects.filter(gpu__host__name="host002").exists()
    again = seed_lab_gpus(fabric, mig_every=2)
    assert again["rows_written"] == 0 and Gpu.objects.count() == 32


def test_seed_hosts_with_more_gpus_than_hcas_and_single_hca_hosts(db):
    fabric = import_topology_text("ft", netgen.fat_tree_2level(2, 1, 2), filename="ft.net").fabric
    out = StringIO()
    call_command("seed_gpus", "--fabric", "ft", stdout=out)
    assert json.loads(out.getvalue().splitlines()[-1]) == {
        "fabric": "ft", "gpus": 32, "hosts": 4, "mig_slices": 0, "rows_written": 32}  # fmt: skip
    _check_rails(fabric, 1)
    with pytest.raises(CommandError, match="no fabric"):
        call_command("seed_gpus", "--fabric", "nope")


@pytest.mark.lab
def test_seed_discovered_lab_pod(lab_factory, db):
    from fabric.services.discovery import discover

    lab = lab_factory(netgen.rail_pod(hosts=2, rails=8), timeout=120)
    fabric = Fabric.objects.create(name="labpod", tool_env=dict(lab.tool_env))
    discover(fabric)
    s = seed_lab_gpus(fabric)
    assert (s["hosts"], s["gpus"]) == (2, 16)
    _check_rails(fabric, 8)


def test_seed_demo_pools_tenants_pkeys_allocations_idempotent(db, django_capture_on_commit_callbacks):
    from fabric.models import PartitionMember
    from pools.lab import seed_demo_pools
    from pools.models import Allocation, Pool, Tenant

    fabric = import_topology_text("demo", netgen.fat_tree_2level(2, 1, 4), filename="d.net").fabric
    seed_lab_gpus(fabric, mig_every=4)
    with django_capture_on_commit_callbacks(execute=True):
        out = seed_demo_pools(fabric)
    assert out == {"tenants": 2, "pools": 3, "pkeys": {"research-h100": "0x0a01", "inference-h100": "0x0a02"},
                   "job_pkeys": {"inference-h100": "0x6000-0x6fff"}, "allocations": 6, "created": 6,
                   "gpus": 31, "skipped": []}  # fmt: skip
    assert sorted(Tenant.objects.values_list("name", flat=True)) == ["inference", "research"]
    research, inference = Pool.objects.get(name="research-h100"), Pool.objects.get(name="inference-h100")
    assert (research.tenant.name, research.fabric, research.pkey) == ("research", fabric, 0x0A01)
    assert Pool.objects.get(name="burst").partition is None
    assert (inference.job_isolation, research.job_isolation) == (True, False)

    def hosts(pool):
        return sorted(
            PartitionMember.objects.filter(partition=pool.partition, reason="pool").values_list(
                "port__node__host__name", flat=True
            )
        )

    # whole hosts 1-3 and the MIG GPU of host 0 (research); host 5, a fraction on host 6 and a
    # MIG slice of host 0 (inference): host 0 is in both partitions through its MIG GPU
    assert hosts(research) == ["host001", "host002", "host003", "host004"]
    assert hosts(inference) == ["host001", "host006", "host007"]
    kinds = sorted(Allocation.objects.values_list("pool__name", "kind", "count"))
    assert kinds == [("inference-h100", "fraction", 1), ("inference-h100", "gpu", 8), ("inference-h100", "mig", 1),
                     ("research-h100", "gpu", 4), ("research-h100", "gpu", 16), ("research-h100", "mig", 2)]  # fmt: skip
    Pool.objects.filter(pk=inference.pk).update(job_isolation=False)  # an earlier demo's pool
    # a restarted demo: its queue has placed a job in a demo pool already; the count printed is the
    # standing allocations kept, not the job's (issue 26 §4: the restart count was wrong)
    from pools.services.allocation import AllocationRequest, allocate

    allocate(Pool.objects.get(name="burst").pk, AllocationRequest(count=2, job="scheduler-job-7",
                                                                   tenant_id=research.tenant_id))  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        assert seed_demo_pools(fabric) == dict(out, created=0)
    assert Allocation.objects.count() == 7 and Pool.objects.get(pk=inference.pk).job_isolation


def test_seed_demo_pools_on_a_small_fabric_skips_what_does_not_fit(db):
    from pools.lab import seed_demo_pools

    fabric = import_topology_text("small", netgen.fat_tree_2level(2, 1, 2), filename="s.net").fabric
    seed_lab_gpus(fabric)  # 4 hosts, no MIG
    out = seed_demo_pools(fabric)
    assert (out["pools"], out["allocations"], out["pkeys"]["research-h100"]) == (3, 2, "0x0a01")
    assert [s.split(":")[0] for s in out["skipped"]] == [
        "notebook-ana",
        "serve-chat",
        "serve-embed",
        "batch-rerank",
    ]
