"""The demo's job stream (``scheduler.demo.JobStream``) against the demo pools on a small fabric:
jobs of several kinds, tenants and priorities are submitted, placed by real passes, started,
finished after their run; fill jobs keep the fabric full so a later job preempts one."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from django.utils import timezone

from pools.lab import seed_demo_pools
from pools.models import Tenant
from scheduler.demo import (
    DEMO_JOBS,
    FILL_JOB,
    FILL_POOL,
    PREFIX,
    DemoJob,
    JobStream,
    kind_of,
    running_job_hcas,
)
from scheduler.models import Job, JobDecision
from scheduler.services.queue import run_pass
from tests.support.jobs import gpu_cluster


def test_the_stream_submits_mixed_jobs_that_are_placed_run_and_end(db):
    c = gpu_cluster(4, 2, 8, name="demo")  # 8 hosts, 64 GPUs
    seed_demo_pools(c.fabric)
    small_fill = DemoJob(
        "fill", FILL_POOL, 8, 8, "batch", preemptible=True, runtime_s=(600, 900), tenant="research"
    )
    stream = JobStream(c.fabric, seed=3, keep_free=0, fill_job=small_fill)
    stream.setup()
    t = timezone.now()
    steps = []
    for _ in range(14):
        steps.append(stream.step(now=t))
        run_pass(now=t)
        t += timedelta(seconds=45)
    jobs = list(Job.objects.filter(name__startswith=PREFIX).select_related("pool", "tenant"))
    kinds = Counter(kind_of(j.name).name for j in jobs)
    states = Counter(j.state for j in jobs)
    # mixed sizes, priorities, pools and tenants, and fill jobs in the shared pool
    assert len(kinds) >= 4 and kinds["fill"] >= 1, kinds
    assert len({j.priority_class for j in jobs}) >= 3
    assert {j.pool.name for j in jobs} >= {"research-h100", "inference-h100", FILL_POOL}
    assert {j.tenant.name for j in jobs} == {"research", "inference"}
    # placed jobs were started on the next step, and some ran their time and ended
    assert any(s["started"] for s in steps) and any(s["finished"] for s in steps)
    assert states["completed"] + states["failed"] >= 1, states
    assert all(j.started_at is not None for j in jobs if j.state in ("completed", "failed"))
    # the fabric was full of fill jobs: a later job preempted some (read from the decisions: a
    # preempted job may also go back to pending)
    preempted = list(
        JobDecision.objects.filter(
            job__name__startswith=PREFIX, code__in=["preempted", "requeued"]
        ).select_related("job")
    )
    assert preempted and all(d.job.preemptible for d in preempted), states
    assert "preempted by job" in preempted[0].reasons[0]
    # the stream never submits more than max_pending of its own pending jobs at once (+ fills)
    assert (
        Job.objects.filter(name__startswith=PREFIX, state="pending").exclude(pool__name=FILL_POOL).count()
        <= 6
    )
    assert FILL_JOB.count == 64  # the demo's own fill jobs are 8 whole hosts
    # a mix of fault policies, tenants with contacts (their fault mail), and the hosts of running
    # stream jobs (not fill jobs) offered to the fault injector's HCA pulls
    assert {j.on_fault for j in jobs} >= {"replace", ""} and {k.on_fault for k in DEMO_JOBS} >= {
        "replace", "requeue", ""}  # fmt: skip
    assert all(t.contacts == [f"{t.name}-team@tenants.weft.local"] for t in Tenant.objects.all())
    running_hosts = {
        h for j in Job.objects.filter(name__startswith=PREFIX, state="running").exclude(pool__name=FILL_POOL)
        for h in j.placement
    }  # fmt: skip
    hcas = running_job_hcas(c.fabric.pk)
    assert running_hosts and {n.split()[0] for n, _ in hcas} == running_hosts and {p for _, p in hcas} == {1}
    assert running_job_hcas(c.fabric.pk, exclude={hcas[0][0]}) == hcas[1:]


def test_kind_of_reads_the_stream_names_only():
    assert kind_of("demo-train-3").name == "train" and kind_of("demo-fill-12").name == "fill"
    assert kind_of("train-3") is None and kind_of("demo-nosuch-1") is None


def test_the_stream_with_its_defaults_on_the_demo_fabric(db):
    """The demo's own shape: ``lab.netgen.DEMO_SPEC`` (2 SUs of 16 rail-aligned hosts) imported
    through the real ingest, the demo's seeds, the stream with its default fill jobs: leaf-tier
    jobs stay inside one SU (one unit of 8 rail leaves) and the fill jobs leave ``keep_free``."""
    from fabric.services.ingest import import_topology_text
    from lab import netgen
    from pools.lab import seed_lab_gpus
    from scheduler.services.state import current_locality

    fabric = import_topology_text("lab", netgen.parse_spec(netgen.DEMO_SPEC), filename="demo.topo").fabric
    assert seed_lab_gpus(fabric, 8, mig_every=4)["gpus"] == 256
    assert seed_demo_pools(fabric)["skipped"] == []
    loc = current_locality()
    assert len(loc.units()) == 2 and {len(u.hosts) for u in loc.units()} == {16}
    stream = JobStream(fabric, seed=5)
    stream.setup()
    t = timezone.now()
    for _ in range(10):
        stream.step(now=t)
        run_pass(now=t)
        t += timedelta(seconds=20)
    jobs = list(Job.objects.filter(name__startswith=PREFIX).exclude(placement={}))
    fills = [j for j in jobs if kind_of(j.name).name == "fill"]
    assert fills and all(sum(j.placement.values()) == 64 for j in fills)
    leaf_jobs = [j for j in jobs if j.tier == 1]
    assert leaf_jobs, Counter(kind_of(j.name).name for j in jobs)
    for job in leaf_jobs:
        assert len({loc.hosts[h].unit for h in job.placement}) == 1, job.placement
