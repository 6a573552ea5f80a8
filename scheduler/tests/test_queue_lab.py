"""The queue end to end on the fabric lab: a rail-optimised pod (4 hosts × 2 rails) discovered by
the real ibnetdiscover, GPUs seeded through the inventory ingest; jobs are placed by the passes
their own commits trigger (no pass is called by the test), finish and free their GPUs; an
``Unlink`` of one of a host's HCA links (the alarm engine's ``link.down``) takes the host out of
placement until the ``ReLink`` and the next discovery bring it back."""

from __future__ import annotations

import pytest

from events.models import Alarm
from fabric.models import Fabric
from fabric.services.discovery import discover
from lab import netgen
from pools.lab import seed_lab_gpus
from pools.models import AllocationItem, Gpu, Pool, Tenant
from scheduler.models import Job
from scheduler.services.queue import JobSpec, finish, submit

pytestmark = [pytest.mark.lab]


def _job(pk: int) -> Job:
    return Job.objects.get(pk=pk)


@pytest.mark.django_db(transaction=True)
def test_jobs_on_a_lab_pod_and_an_unlinked_host_is_not_used_until_it_is_back(lab_factory):
    lab = lab_factory(netgen.rail_pod(hosts=4, rails=2), timeout=120)
    fabric = Fabric.objects.create(name="labq", tool_env=dict(lab.tool_env))
    discover(fabric)
    seed_lab_gpus(fabric, 8)
    tenant = Tenant.objects.create(name="lab-t")
    pool = Pool.objects.create(name="lab-p", tenant=tenant, fabric=fabric)

    def spec(name: str, count: int = 8) -> JobSpec:
        return JobSpec(
            name=name, pool_id=pool.pk, count=count, gpus_per_host=8, tier="leaf", tier_mode="required"
        )

    # submit → the pass on commit places it: two whole hosts of the pod (one unit: both rails)
    first = submit(spec("first", 16))
    job = _job(first.pk)
    assert job.state == "placed" and sorted(job.placement.values()) == [8, 8]
    assert job.decision["tier"] == 1 and job.decision["units"] == 1 == job.decision["lower_bound"]
    gpus = list(
        AllocationItem.objects.filter(allocation=job.allocation_id, active=True).values_list(
            "gpu_id", flat=True
        )
    )
    assert set(Gpu.objects.filter(pk__in=gpus).values_list("host__name", flat=True)) == set(job.placement)
    finish(first.pk, reason="exit 0")
    assert not AllocationItem.objects.filter(gpu_id__in=gpus, active=True).exists()
    assert set(Gpu.objects.filter(pk__in=gpus).values_list("state", flat=True)) == {"free"}

    # pull one of host004's two HCA cables (not the SM's host): the HCA is gone from the fabric
    # (node.removed and link.down alarms), host004 is unusable
    sm_host = lab.tool_env["SIM_HOST"]
    victim = "host004" if "host004" not in sm_host else "host003"
    lab.unlink(f"{victim} mlx5_1", 1)
    discover(fabric)
    assert Alarm.objects.open().filter(fabric=fabric, code="link.down").count() == 1
    jobs = [submit(spec(f"j{i}")) for i in range(4)]
    states = {j.pk: _job(j.pk) for j in jobs}
    placed = [j for j in states.values() if j.state == "placed"]
    assert len(placed) == 3 and all(victim not in j.placement for j in placed)
    (waiting,) = [j for j in states.values() if j.state == "pending"]
    assert waiting.pending_code == "capacity"
    assert any(
        f"{victim} (HCA {victim} mlx5_1 is no longer on the fabric)" in r for r in waiting.decision["reasons"]
    ), waiting.decision["reasons"]

    # the cable is back: the next discovery clears the alarm, and the pass it triggers places the job there
    lab.relink(f"{victim} mlx5_1", 1)
    discover(fabric)
    assert not Alarm.objects.open().filter(fabric=fabric, code="link.down").exists()
    waiting = _job(waiting.pk)
    assert waiting.state == "placed" and list(waiting.placement) == [victim]
