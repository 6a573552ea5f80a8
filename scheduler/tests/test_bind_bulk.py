"""The pass binds runs of plain whole-GPU placements in bulk (``queue.binder.bind_many`` through
``pools.services.allocation.allocate_many``): what changed between planning and binding refuses
only the job it touches — a GPU taken meanwhile, a quota filled meanwhile — and the other jobs of
the batch are placed, each GPU held once."""

from __future__ import annotations

import pytest

from pools.models import AllocationItem, Gpu
from pools.services.allocation import AllocationRequest, allocate
from scheduler.choices import JobState
from scheduler.models import Job
from scheduler.services.queue import JobSpec, passes, run_pass, submit
from tests.support.jobs import gpu_cluster

pytestmark = pytest.mark.backend  # bulk binds (COPY / nextval on PostgreSQL)


@pytest.fixture
def cluster(db):
    return gpu_cluster(2, 2, 8, name="bulk", quota=24)  # 4 hosts × 8 H100s, pool quota 24


def _plan_then(monkeypatch, meanwhile):
    """Run ``meanwhile(plan)`` between the pass's planning and its binding."""
    real = passes.plan_pass

    def planned(*args, **kw):
        plan = real(*args, **kw)
        meanwhile(plan)
        return plan

    monkeypatch.setattr(passes, "plan_pass", planned)


def _jobs(cluster, n: int) -> list[Job]:
    return [
        submit(JobSpec(name=f"j{i}", pool_id=cluster.pool.pk, count=8, gpus_per_host=8)) for i in range(n)
    ]


def test_a_gpu_taken_meanwhile_refuses_only_its_job(cluster, monkeypatch):
    jobs = _jobs(cluster, 3)
    taken = []

    def take(plan):
        second = [o for o in plan.outcomes if o.ok][1]
        (host,) = second.placed
        gpu = Gpu.objects.filter(host__name=host).order_by("pk").first()
        allocate(cluster.pool.pk, AllocationRequest(count=1, gpu_ids=[gpu.pk], job="outside"))
        taken.append((second.job_id, host))

    _plan_then(monkeypatch, take)
    summary = run_pass()
    assert summary["placed"] == 2 and summary["bind_failed"] == 1
    (loser, host), = taken  # fmt: skip
    states = {j.pk: Job.objects.get(pk=j.pk) for j in jobs}
    assert states[loser].state == JobState.PENDING and states[loser].pending_code == "conflict"
    assert (
        f"{host} has 7 free GPUs, the plan counted 8 (taken meanwhile)"
        in states[loser].decision["reasons"][0]
    )
    placed = [j for j in states.values() if j.state == JobState.PLACED]
    assert len(placed) == 2 and all(len(j.placement) == 1 and host not in j.placement for j in placed)
    active = list(AllocationItem.objects.filter(active=True).values_list("gpu_id", flat=True))
    assert len(active) == len(set(active)) == 17


def test_a_quota_filled_meanwhile_refuses_the_job_past_it_and_keeps_the_others(cluster, monkeypatch):
    jobs = _jobs(cluster, 3)

    def fill(plan):  # one GPU of the pool's quota of 24 used on a host no job was planned on
        planned = {h for o in plan.outcomes if o.ok for h in o.placed}
        (free_host,) = set(cluster.hosts) - planned
        gpu = Gpu.objects.filter(host__name=free_host).order_by("pk").first()
        allocate(cluster.pool.pk, AllocationRequest(count=1, gpu_ids=[gpu.pk], job="outside"))

    _plan_then(monkeypatch, fill)
    run_pass()
    states = [Job.objects.get(pk=j.pk) for j in jobs]
    order = [s for s in states if s.state == JobState.PLACED]
    (last,) = [s for s in states if s.state == JobState.PENDING]
    assert len(order) == 2 and last.pending_code == "quota"
    assert "17 gpus held + 8 asked > quota 24" in last.decision["reasons"][0]
    assert last.allocation_id is None
