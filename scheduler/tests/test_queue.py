"""The job queue service (``scheduler.services.queue``) on a stored fabric with GPUs: submit
validation, the state machine, passes that place through the pools' allocation service, quota,
fragmentation, backfill around the head's reservation, preemption, unusable hosts, congestion,
the pass lock and a pass that dies half way."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.db.models import Q
from django.utils import timezone

from accounts.models import AuditEntry
from core.locks import single_instance
from events.models import Alarm, Event
from fabric.keys import link_key
from fabric.models import Link, Node
from pools.models import Allocation, AllocationItem, Gpu, Pool
from pools.services import allocation as pools_allocation
from pools.services.allocation import AllocationRequest, allocate, pool_usage, release
from scheduler.choices import JobState
from scheduler.models import Job, JobDecision
from scheduler.services import queue
from scheduler.services.queue import (
    InvalidJob,
    JobConflict,
    JobSpec,
    binder,
    cancel,
    finish,
    passes,
    run_pass,
    start,
    submit,
)
from tests.support.jobs import gpu_cluster

pytestmark = pytest.mark.backend  # the queue's bulk updates, row locks and leases (Redis)


@pytest.fixture
def cluster(db):
    return gpu_cluster(2, 2, 8)  # host001-002 on leaf-01, host003-004 on leaf-02: 32 H100s


def spec(cluster, count: int, **kw) -> JobSpec:
    return JobSpec(name=kw.pop("name", f"job-{count}"), pool_id=cluster.pool.pk, count=count, **kw)


def held_gpus(job: Job) -> list[int]:
    return sorted(
        AllocationItem.objects.filter(allocation=job.allocation_id, active=True).values_list(
            "gpu_id", flat=True
        )
    )


# --- submit ---------------------------------------------------------------------------------------


def test_unknown_tier_and_bad_requests_are_refused_naming_the_field(cluster):
    cases = [
        (dict(tier="rack", tier_mode="required"), "tier", "unknown tier 'rack'"),
        (dict(tier=7), "tier", "unknown tier 7"),
        (dict(tier_mode="required"), "tier", "needs a tier"),
        (dict(gpus_per_host=8, segments=3, segment_hosts=1, segment_tier="leaf"), "segments", "≠ count 16"),
        (
            dict(segments=2, segment_hosts=1, segment_tier="pod", gpus_per_host=8),
            "segment_tier",
            "unknown tier 'pod'",
        ),
        (dict(gpus_per_host=5), "gpus_per_host", "not a multiple"),
        (dict(kind="mig"), "mig_profile", "name a profile"),
        (dict(kind="mig", mig_profile="bogus"), "mig_profile", "'bogus' is not a MIG GPU instance profile"),
        (dict(kind="mig", mig_profile="1g.10GB "), "mig_profile", "is not a MIG GPU instance profile"),
        (dict(priority_class="urgent"), "priority_class", "one of batch"),
    ]
    for kw, fld, text in cases:
        with pytest.raises(InvalidJob, match=text) as exc:
            submit(spec(cluster, 16, **kw))
        assert exc.value.field == fld and exc.value.status == 400, kw
    shared = Pool.objects.create(name="shared")
    with pytest.raises(InvalidJob) as exc:
        submit(JobSpec(name="x", pool_id=shared.pk, count=1))
    assert exc.value.field == "tenant"
    assert not Job.objects.exists()
    # a tier by name is stored as its number
    job = submit(spec(cluster, 8, tier="Leaf", tier_mode="required"))
    assert (job.tier, job.tier_mode, job.state, job.priority) == (1, "required", "pending", 500)


# --- the state machine --------------------------------------------------------------------------


def test_submit_pass_start_finish_with_events_audit_and_history(cluster, users):
    job = submit(spec(cluster, 16, gpus_per_host=8, time_limit_s=3600), user=users["operator"])
    assert job.owner == users["operator"] and job.tenant == cluster.tenant
    summary = run_pass()
    assert summary["placed"] == 1 and summary["pending"] == 1
    job.refresh_from_db()
    assert job.state == JobState.PLACED and job.placed_at is not None
    alloc = job.allocation
    assert alloc.state == "active" and alloc.job == f"weft-job-{job.pk}" and alloc.pool_id == cluster.pool.pk
    gpus = held_gpus(job)
    assert len(gpus) == 16 and set(Gpu.objects.filter(pk__in=gpus).values_list("state", flat=True)) == {
        "allocated"
    }
    # whole hosts of one leaf (tier 1, the lower bound: one unit)
    assert (
        sorted(job.placement.values()) == [8, 8] and job.decision["tier"] == 1 and job.decision["units"] == 1
    )
    hosts = set(Gpu.objects.filter(pk__in=gpus).values_list("host__name", flat=True))
    assert hosts == set(job.placement) and hosts in ({"host001", "host002"}, {"host003", "host004"})
    waiting = submit(spec(cluster, 1, name="waiting"))
    with pytest.raises(JobConflict, match="is pending: it cannot become running"):
        start(waiting.pk)
    start(job.pk, user=users["operator"])
    finish(job.pk, ok=True, reason="exit 0", user=users["operator"])
    job.refresh_from_db()
    assert job.state == JobState.COMPLETED and job.reason == "exit 0" and job.ended_at is not None
    alloc.refresh_from_db()
    assert alloc.state == "released" and set(
        Gpu.objects.filter(pk__in=gpus).values_list("state", flat=True)
    ) == {"free"}
    codes = list(
        Event.objects.filter(object_type="job", object_key=str(job.pk))
        .order_by("id")
        .values_list("code", flat=True)
    )
    assert codes == ["job.submitted", "job.placed", "job.started", "job.completed"]
    actions = set(
        AuditEntry.objects.filter(object_type="scheduler.job", object_id=str(job.pk)).values_list(
            "action", flat=True
        )
    )
    assert actions == {"job.submit", "job.place", "job.start", "job.complete"}
    assert [d.code for d in JobDecision.objects.filter(job=job).order_by("id")] == [
        "placed",
        "running",
        "completed",
    ]
    with pytest.raises(JobConflict) as exc:
        cancel(job.pk)
    assert exc.value.details["state"] == "completed"


def test_cancel_a_placed_job_frees_its_gpus(cluster):
    job = submit(spec(cluster, 4))
    run_pass()
    job.refresh_from_db()
    gpus = held_gpus(job)
    cancel(job.pk, reason="not needed")
    job.refresh_from_db()
    assert job.state == "cancelled" and job.allocation.state == "released"
    assert not AllocationItem.objects.filter(gpu_id__in=gpus, active=True).exists()


def test_time_limit_ends_a_running_job_timeout_and_frees_its_gpus(cluster):
    job = submit(spec(cluster, 2, time_limit_s=60))
    untimed = submit(spec(cluster, 2, name="untimed"))  # no limit of its own: never ended
    t0 = timezone.now()
    run_pass(now=t0)
    start(job.pk, now=t0)
    start(untimed.pk, now=t0)
    job.refresh_from_db()
    gpus = held_gpus(job)
    assert len(gpus) == 2
    assert run_pass(now=t0 + timedelta(seconds=59))["expired"] == 0
    assert run_pass(now=t0 + timedelta(seconds=60))["expired"] == 1  # the limit itself ends it
    job.refresh_from_db()
    untimed.refresh_from_db()
    assert (job.state, job.reason, job.ended_at) == (
        "timeout",
        "time limit of 60 s reached",
        t0 + timedelta(seconds=60),
    )
    assert job.allocation.state == "released" and untimed.state == "running"
    assert not AllocationItem.objects.filter(gpu_id__in=gpus, active=True).exists()
    ev = Event.objects.get(code="job.timeout", object_key=str(job.pk))
    assert (ev.details["limit_s"], ev.details["ran_s"], ev.details["allocation"]) == (
        60,
        60.0,
        job.allocation_id,
    )
    assert AuditEntry.objects.filter(action="job.timeout", object_id=str(job.pk)).count() == 1
    assert JobDecision.objects.filter(job=job).order_by("-id")[0].code == "timeout"
    # a timed-out job is final: no second end, no start
    assert run_pass(now=t0 + timedelta(seconds=120))["expired"] == 0
    with pytest.raises(JobConflict):
        finish(job.pk)


def test_the_beat_pass_ends_a_job_whose_start_is_past_its_limit_on_the_real_clock(cluster, settings):
    """No ``now`` given: the beat task's pass reads the clock; the job's start is set in the past."""
    from scheduler.tasks import run_pass_task

    job = submit(spec(cluster, 8, time_limit_s=3600))
    young = submit(spec(cluster, 8, time_limit_s=3600, name="young"))
    run_pass()
    start(job.pk)
    start(young.pk)
    before = timezone.now()
    Job.objects.filter(pk=job.pk).update(started_at=before - timedelta(seconds=3601))
    Job.objects.filter(pk=young.pk).update(started_at=before - timedelta(seconds=3500))
    assert run_pass_task()["expired"] == 1
    job.refresh_from_db()
    young.refresh_from_db()
    assert job.state == "timeout" and before <= job.ended_at <= timezone.now()
    assert young.state == "running" and pool_usage(cluster.pool.pk)["gpus"] == 8


# --- quota and fragmentation ---------------------------------------------------------------------


def test_quota_refusal_keeps_the_job_pending_holding_nothing(cluster):
    Pool.objects.filter(pk=cluster.pool.pk).update(quota_gpus=8)
    small = submit(spec(cluster, 6))
    big = submit(spec(cluster, 4))
    run_pass()
    small.refresh_from_db()
    big.refresh_from_db()
    assert small.state == "placed"
    assert (big.state, big.pending_code, big.allocation_id) == ("pending", "quota", None)
    assert big.reason == "pool p-jobs: 6 GPUs held + 4 asked > quota 8"
    assert big.reserved_start is None and pool_usage(cluster.pool.pk)["gpus"] == 6
    # the same decision again: one history row, counted twice
    run_pass()
    (row,) = JobDecision.objects.filter(job=big)
    assert (row.code, row.count) == ("quota", 2)


def test_fragmentation_is_pending_without_quota_or_allocation(cluster):
    # another tenant's direct allocations leave 4 free GPUs on every host: 16 free, no whole host
    other = Pool.objects.create(name="other", tenant=cluster.tenant)
    for host in cluster.hosts:
        ids = list(
            Gpu.objects.filter(host__name=host, host__fabric=cluster.fabric)
            .order_by("index")
            .values_list("pk", flat=True)[:4]
        )
        allocate(other.pk, AllocationRequest(count=4, gpu_ids=ids))
    job = submit(spec(cluster, 16, gpus_per_host=8))
    run_pass()
    job.refresh_from_db()
    assert (job.state, job.pending_code, job.allocation_id) == ("pending", "fragmentation", None)
    assert pool_usage(cluster.pool.pk)["gpus"] == 0
    assert "16 GPUs asked and 16 free, but not in the shape asked for" in job.decision["reasons"]
    assert any("0 hosts have ≥ 8 free GPUs" in r for r in job.decision["reasons"])
    # the allocations are not the queue's: no end time, so no reservation
    assert any(r.startswith("no reservation") for r in job.decision["reasons"])
    # a smaller job still fits in the holes
    small = submit(spec(cluster, 4))
    run_pass()
    small.refresh_from_db()
    assert small.state == "placed"


def test_backfill_does_not_delay_the_head_jobs_reservation(cluster):
    t0 = timezone.now()
    short = submit(spec(cluster, 8, gpus_per_host=8, time_limit_s=600, name="short"), now=t0)
    long = submit(spec(cluster, 16, gpus_per_host=8, time_limit_s=36000, name="long"), now=t0)
    run_pass(now=t0)
    short.refresh_from_db()
    long.refresh_from_db()
    assert short.state == long.state == "placed"
    (short_host,) = short.placement
    (free_host,) = set(cluster.hosts) - set(short.placement) - set(long.placement)
    head = submit(spec(cluster, 16, gpus_per_host=8, priority_class="high", name="head"), now=t0)
    blocked = submit(spec(cluster, 4, time_limit_s=36000, name="blocked"), now=t0)
    fits = submit(spec(cluster, 4, time_limit_s=300, name="fits"), now=t0)
    run_pass(now=t0 + timedelta(seconds=1))
    for j in (head, blocked, fits):
        j.refresh_from_db()
    assert head.state == "pending" and head.pending_code in ("capacity", "fragmentation")
    assert head.reserved_start == t0 + timedelta(seconds=600)
    assert set(head.reserved_hosts) == {short_host, free_host}
    assert head.decision["reservation"]["waits_for"] == [short.pk]
    assert blocked.state == "pending" and any("reserved for job" in r for r in blocked.decision["reasons"])
    assert fits.state == "placed" and fits.decision.get("backfilled") is True
    assert set(fits.placement) <= {short_host, free_host}
    # when the short jobs end, the head places on its reserved hosts
    finish(short.pk, now=t0 + timedelta(seconds=300))
    finish(fits.pk, now=t0 + timedelta(seconds=300))
    run_pass(now=t0 + timedelta(seconds=301))
    head.refresh_from_db()
    assert head.state == "placed" and set(head.placement) == {short_host, free_host}
    # nothing is free now: the blocked job is the new head, reserved for when a job ends
    blocked.refresh_from_db()
    assert head.reserved_start is None and blocked.state == "pending" and blocked.reserved_start is not None
    assert list(Job.objects.filter(reserved_start__isnull=False)) == [blocked]


def test_the_head_keeps_its_reservation_when_a_backfilled_job_of_its_pool_holds_quota(cluster):
    """Through the stored job (``Job.reserved_start``): pool p-jobs (quota 16) waits for a leaf
    whose other host runs another pool's job until t0 + 1000 s; a 4-GPU job of the same pool is
    backfilled there. The next pass keeps the head's reservation (not ``quota``) and a long job
    of the other pool does not take the 4 GPUs left on the reserved host."""
    Pool.objects.filter(pk=cluster.pool.pk).update(quota_gpus=16)
    other = Pool.objects.create(name="other", tenant=cluster.tenant, fabric=cluster.fabric)
    ospec = lambda n, **kw: JobSpec(name=kw.pop("name"), pool_id=other.pk, count=n, **kw)  # noqa: E731
    t0 = timezone.now()
    a = submit(ospec(8, gpus_per_host=8, time_limit_s=1000, name="a"), now=t0)
    run_pass(now=t0)
    start(a.pk, now=t0)
    a.refresh_from_db()
    (x,) = a.placement
    leaf = {"host001": 0, "host002": 0, "host003": 1, "host004": 1}
    (y,) = [h for h in cluster.hosts if leaf[h] == leaf[x] and h != x]
    for h in cluster.hosts:  # the other leaf is held with no end (direct allocations)
        if leaf[h] != leaf[x]:
            ids = list(
                Gpu.objects.filter(host__name=h, host__fabric=cluster.fabric).values_list("pk", flat=True)
            )
            allocate(other.pk, AllocationRequest(count=len(ids), gpu_ids=ids))
    head = submit(spec(cluster, 16, gpus_per_host=8, tier="leaf", tier_mode="required", priority_class="high",
                       name="head"), now=t0)  # fmt: skip
    short = submit(spec(cluster, 4, time_limit_s=500, name="short"), now=t0)
    run_pass(now=t0 + timedelta(seconds=1))
    head.refresh_from_db()
    short.refresh_from_db()
    assert head.pending_code == "capacity" and head.reserved_start == t0 + timedelta(seconds=1000)
    assert set(head.reserved_hosts) == {x, y}
    assert (
        short.state == "placed" and short.decision.get("backfilled") is True and set(short.placement) == {y}
    )
    late = submit(ospec(4, time_limit_s=50_000, name="late"), now=t0)
    run_pass(now=t0 + timedelta(seconds=2))
    head.refresh_from_db()
    late.refresh_from_db()
    assert head.pending_code == "capacity", head.decision["reasons"]
    assert head.reserved_start == t0 + timedelta(seconds=1000) and set(head.reserved_hosts) == {x, y}
    assert late.state == "pending" and late.pending_code == "capacity"


# --- preemption ----------------------------------------------------------------------------------


def test_preemption_takes_the_fewest_victims_in_the_same_pass(db):
    small = gpu_cluster(1, 2, 8, name="pre")  # one leaf, two hosts: 16 GPUs
    s = lambda n, **kw: JobSpec(name=kw.pop("name"), pool_id=small.pool.pk, count=n, **kw)  # noqa: E731
    whole = submit(s(8, name="whole", preemptible=True, requeue=False, priority_class="batch"))
    run_pass()
    a = submit(s(2, name="a", preemptible=True, priority_class="batch"))
    b = submit(s(6, name="b", preemptible=True, priority_class="batch"))
    run_pass()
    for j in (whole, a, b):
        j.refresh_from_db()
        assert j.state == "placed"
    assert set(a.placement) == set(b.placement) != set(whole.placement)
    victim_gpus = held_gpus(whole)
    high = submit(s(8, name="high", priority_class="high"))
    summary = run_pass()
    assert summary["placed"] == 1 and summary["preempted"] == 1
    for j in (whole, a, b, high):
        j.refresh_from_db()
    assert whole.state == "preempted" and whole.reason == f"preempted by {high} (high priority)"
    assert whole.allocation.state == "released"
    assert a.state == b.state == "placed"
    assert (
        high.state == "placed" and held_gpus(high) == victim_gpus and high.decision["victims"] == [whole.pk]
    )
    assert Event.objects.filter(code="job.preempted", object_key=str(whole.pk)).exists()


def test_a_preempted_preemptible_job_is_requeued_keeping_its_submit_time_and_priority(db):
    small = gpu_cluster(1, 1, 8, name="rq")  # one host of 8 GPUs
    s = lambda n, **kw: JobSpec(name=kw.pop("name"), pool_id=small.pool.pk, count=n, **kw)  # noqa: E731
    low = submit(s(8, name="low", preemptible=True, priority_class="batch"))
    assert low.requeue is True  # the default for a preemptible job
    run_pass()
    low.refresh_from_db()
    submitted, first_alloc = low.submitted_at, low.allocation_id
    assert low.state == "placed"
    high = submit(s(8, name="high", priority_class="high"))
    assert high.requeue is False
    run_pass()
    low.refresh_from_db()
    high.refresh_from_db()
    assert high.state == "placed" and high.decision["victims"] == [low.pk]
    assert low.state == "pending" and low.preemptions == 1 and low.placement == {}
    assert low.submitted_at == submitted and low.priority == 100 and low.placed_at is None
    assert low.reason == f"requeued: preempted by {high} (high priority)"
    assert Allocation.objects.get(pk=first_alloc).state == "released"
    codes = list(
        Event.objects.filter(object_type="job", object_key=str(low.pk))
        .order_by("id")
        .values_list("code", flat=True)
    )
    assert codes == ["job.submitted", "job.placed", "job.preempted", "job.requeued"]
    assert AuditEntry.objects.filter(action="job.requeue", object_id=str(low.pk)).count() == 1
    # it waits in the queue and is placed again once the GPUs are back
    run_pass()
    low.refresh_from_db()
    assert low.state == "pending" and low.pending_code == "capacity"
    finish(high.pk)
    run_pass()
    low.refresh_from_db()
    assert low.state == "placed" and low.allocation_id != first_alloc and sum(low.placement.values()) == 8


def test_allocation_reclaimed_by_the_pools_marks_the_job_preempted(
    cluster, django_capture_on_commit_callbacks
):
    job = submit(spec(cluster, 2))
    run_pass()
    job.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        release(job.allocation_id, reason="operator freed it")
    job.refresh_from_db()
    assert job.state == "preempted" and "was released by the pools" in job.reason


# --- where jobs may go ---------------------------------------------------------------------------


def _host_link(cluster, host: str) -> Link:
    return Link.objects.select_related("port_a__node", "port_b__node").get(
        Q(port_a__node__host__name=host) | Q(port_b__node__host__name=host), fabric=cluster.fabric
    )


def test_an_unusable_host_is_never_chosen(cluster):
    link = _host_link(cluster, "host001")
    key = link_key(
        (link.port_a.node.node_guid, link.port_a.port_num), (link.port_b.node.node_guid, link.port_b.port_num)
    )
    now = timezone.now()
    Alarm.objects.create(
        fabric=cluster.fabric, code="link.down", severity="critical", category="topology", object_type="link",
        object_key=key, object_repr=str(link), message="down", first_seen=now, last_seen=now,
    )  # fmt: skip
    Node.objects.filter(host__name="host004", fabric=cluster.fabric).update(unreachable_since=now)
    # a second HCA of host003 gone from the fabric (its only cable pulled): no row, its alarm names it
    Alarm.objects.create(
        fabric=cluster.fabric, code="node.removed", severity="minor", category="topology", object_type="node",
        object_key="0x0002c9030000ffff", object_repr="host003 mlx5_1", message="gone", first_seen=now, last_seen=now,
    )  # fmt: skip
    jobs = [submit(spec(cluster, 8, name=f"j{i}")) for i in range(2)]
    run_pass()
    for j in jobs:
        j.refresh_from_db()
    placed = [j for j in jobs if j.state == "placed"]
    assert len(placed) == 1 and list(placed[0].placement) == ["host002"]
    (left,) = [j for j in jobs if j.state == "pending"]
    assert left.pending_code == "capacity"
    text = " ".join(left.decision["reasons"])
    assert "host001 (HCA link down" in text and "host004 (HCA" in text and "unreachable since" in text
    assert "host003 (HCA host003 mlx5_1 is no longer on the fabric)" in text


def test_congested_uplinks_are_avoided_and_explained(cluster):
    leaf1 = Node.objects.get(fabric=cluster.fabric, name__contains="leaf-01")
    uplink = Link.objects.filter(
        Q(port_a__node=leaf1, port_b__node__tier=2) | Q(port_b__node=leaf1, port_a__node__tier=2)
    ).first()
    port = uplink.port_a if uplink.port_a.node_id == leaf1.pk else uplink.port_b
    now = timezone.now()
    Alarm.objects.create(
        fabric=cluster.fabric, code="port.congestion", severity="warning", category="counters", object_type="port",
        object_key=f"{leaf1.node_guid}/{port.port_num}", port=port, node=leaf1, first_seen=now, last_seen=now,
        message=f"Congestion on {port}: index 0.80 above 0.5 for 3 sweeps", details={"value": 0.8, "threshold": 0.5},
    )  # fmt: skip
    job = submit(spec(cluster, 8))
    run_pass()
    job.refresh_from_db()
    assert job.state == "placed" and set(job.placement) <= {"host003", "host004"}
    (avoided,) = job.decision["avoided"]
    assert avoided.endswith(leaf1.node_guid)
    assert any("avoided congested" in r and "(1.6: Congestion on" in r for r in job.decision["reasons"])


# --- one pass at a time; a pass that dies --------------------------------------------------------


def test_a_second_pass_is_skipped_and_asked_to_run_again(cluster):
    submit(spec(cluster, 2))
    with single_instance(queue.PASS_LOCK) as mine:
        assert mine
        assert run_pass() == {"skipped": "a scheduling pass is already running"}
    assert passes._take_wanted() is True
    assert run_pass()["placed"] == 1


def test_a_pass_that_dies_half_way_leaves_whole_placements_and_the_next_pass_finishes(cluster, monkeypatch):
    jobs = [submit(spec(cluster, 8, name=f"j{i}")) for i in range(3)]
    monkeypatch.setattr(passes, "BIND_BATCH", 1)  # one bulk transaction per placement
    real = pools_allocation.allocate_many
    calls, die_at = [], [2]

    def dying(requests, **kw):
        calls.append([r.job for _, r in requests])
        if len(calls) == die_at[0]:
            raise SystemExit("worker killed")  # not an AllocationError: the pass itself dies
        return real(requests, **kw)

    monkeypatch.setattr(binder, "allocate_many", dying)
    with pytest.raises(SystemExit):
        run_pass()
    states = dict(Job.objects.values_list("pk", "state"))
    assert sorted(states.values()) == ["pending", "pending", "placed"]
    assert Allocation.objects.filter(state="active").count() == 1
    monkeypatch.setattr(passes, "BIND_BATCH", 250)  # the two pending ones in one batch: it dies whole
    calls.clear()
    die_at[0] = 1
    with pytest.raises(SystemExit):
        run_pass()
    assert len(calls[0]) == 2
    assert sorted(Job.objects.values_list("state", flat=True)) == ["pending", "pending", "placed"]
    assert Allocation.objects.filter(state="active").count() == 1
    monkeypatch.setattr(binder, "allocate_many", real)
    run_pass()
    for j in jobs:
        j.refresh_from_db()
        assert j.state == "placed"
    items = AllocationItem.objects.filter(active=True)
    assert items.count() == 24 and len(set(items.values_list("gpu_id", flat=True))) == 24
    assert Allocation.objects.filter(state="active").count() == 3


# --- triggers ------------------------------------------------------------------------------------


def test_submit_and_release_trigger_passes_on_commit(cluster, django_capture_on_commit_callbacks):
    """Submit → (commit) job_changed → run_pass_task → placed; a release outside the queue
    frees GPUs → a pass places the job that waited for them."""
    other = Pool.objects.create(name="other", tenant=cluster.tenant)
    with django_capture_on_commit_callbacks(execute=True):
        hog = allocate(other.pk, AllocationRequest(count=28))
    with django_capture_on_commit_callbacks(execute=True):
        job = submit(spec(cluster, 8))
    job.refresh_from_db()
    assert (job.state, job.pending_code) == ("pending", "capacity")  # the pass ran: 4 free
    with django_capture_on_commit_callbacks(execute=True):
        release(hog.pk)
    job.refresh_from_db()
    assert job.state == "placed" and len(held_gpus(job)) == 8


def test_topology_and_alarm_changes_queue_a_pass(cluster, monkeypatch):
    """The receivers (called directly: the other apps' receivers of these signals are theirs)."""
    from events.engine import Outcome
    from scheduler import receivers
    from scheduler.services import state

    queued = []
    monkeypatch.setattr(receivers, "queue_pass", lambda: queued.append(1))
    loc = state.current_locality()
    receivers.on_discovery_committed(sender=None, fabric_id=cluster.fabric.pk)
    assert len(queued) == 1 and state.current_locality() is not loc  # rebuilt after a discovery
    receivers.on_alarms_changed(sender=None, outcome=Outcome(raised=[Alarm(code="port.congestion")]))
    receivers.on_alarms_changed(sender=None, outcome=Outcome(cleared=[Alarm(code="link.down")]))
    receivers.on_alarms_changed(sender=None, outcome=Outcome(raised=[Alarm(code="sm.master_changed")]))
    assert len(queued) == 3


def test_decision_history_is_capped_and_repeats_are_counted(cluster, settings):
    settings.WEFT_SCHEDULER_DECISION_HISTORY = 3
    other = Pool.objects.create(name="other", tenant=cluster.tenant)
    held = [allocate(other.pk, AllocationRequest(count=1))]
    job = submit(spec(cluster, 32))  # all 32 GPUs, some held: capacity, with the free count in the reason
    for n in (1, 2, 3, 4):
        run_pass()
        run_pass()  # the same decision: counted, not stored again
        held.append(allocate(other.pk, AllocationRequest(count=n)))
    run_pass()
    rows = list(JobDecision.objects.filter(job=job).order_by("id"))
    assert len(rows) == 3
    assert [r.reasons[0] for r in rows] == [
        f"32 GPUs asked, {32 - k} free in the best eligible fabric" for k in (4, 7, 11)
    ]
    assert [r.count for r in rows] == [2, 2, 1]


def test_the_pass_task_is_on_the_beat_schedule_and_runs_a_pass(cluster, settings):
    from scheduler.tasks import run_pass_task

    entry = settings.CELERY_BEAT_SCHEDULE["scheduler-pass"]
    assert entry["task"] == run_pass_task.name == "scheduler.tasks.run_pass_task"
    assert entry["schedule"].total_seconds() == settings.WEFT_SCHEDULER_PASS_INTERVAL_S
    job = submit(spec(cluster, 8))
    summary = run_pass_task()
    job.refresh_from_db()
    assert summary["placed"] == 1 and job.state == "placed"


def test_describe_says_host_for_one_host_and_hosts_for_more():
    """The request in words, as the queue page and ``GET /api/scheduler/queue/`` show it: a
    one-host job is ``(1 host × 8)``, not ``(1 hosts × 8)``."""
    from scheduler.choices import JobKind

    one = Job(kind=JobKind.GPU, count=8, gpus_per_host=8, tier=None)
    two = Job(kind=JobKind.GPU, count=16, gpus_per_host=8, tier=1, tier_mode="preferred")
    assert queue.describe(one) == "8 GPUs (1 host × 8)"
    assert queue.describe(two) == "16 GPUs (2 hosts × 8), within one leaf (preferred)"


def test_a_restarted_demo_ends_the_previous_runs_held_jobs_failed_with_the_reason(cluster, capsys):
    """Issue 26: a demo restarted on an existing database kept the previous run's jobs "running"
    against a new lab. ``end_previous_run`` (and the demo command's step that calls it) ends every
    job holding GPUs in the fabric's pools as ``failed`` with the reason; pending jobs stay."""
    from weft.management.commands.demo import Command

    running, placed = submit(spec(cluster, 8, name="old-run")), submit(spec(cluster, 4, name="old-placed"))
    run_pass()
    start(running.pk)
    waiting = submit(spec(cluster, 32, name="waits"))  # more than is free: stays pending
    run_pass()
    out = io.StringIO()
    ended = Command(stdout=out)._end_previous_run(cluster.fabric)
    assert ended == [running.pk, placed.pk]
    for job in (running, placed):
        job.refresh_from_db()
        assert job.state == "failed" and "demo restarted on a new lab" in job.reason
        assert job.allocation.state == "released"
    waiting.refresh_from_db()
    assert waiting.state in ("pending", "placed")  # not ended (a pass may place it on the freed GPUs)
    assert not AllocationItem.objects.filter(
        allocation__in=[running.allocation_id, placed.allocation_id], active=True
    ).exists()
    assert Event.objects.filter(code="job.failed", message__contains="old-run").exists()
    assert (
        f"ended 2 job(s) of the previous demo run still placed or running (now failed, reason given on each job page): {running.pk}, {placed.pk}"
        in out.getvalue()
    )
    # a fabric whose pools hold nothing: nothing ended, nothing said
    finish(waiting.pk, ok=True) if waiting.state == "placed" else cancel(waiting.pk)
    quiet = io.StringIO()
    assert Command(stdout=quiet)._end_previous_run(cluster.fabric) == [] and quiet.getvalue() == ""


def test_a_restarted_demo_raises_no_role_down_for_the_previous_runs_leases(cluster):
    """The walkthrough: a restarted demo mailed a Critical "Role down: role notices:1" (cleared a
    second later): the previous run's lease row of the notice listener had expired, and the role
    watch ran before the new listener took it. The demo's restart step forgets expired leases
    (``core.leases.forget_expired``); a live one is kept."""
    from datetime import timedelta

    from django.utils import timezone

    from core.models import Lease
    from events.roles import check_roles
    from weft.management.commands.demo import Command

    cluster.fabric.discovery_enabled, cluster.fabric.local_hca = True, True  # a live fabric, as the lab
    cluster.fabric.save(update_fields=["discovery_enabled", "local_hca"])
    now = timezone.now()
    old = now - timedelta(minutes=5)
    Lease.objects.create(role=f"notices:{cluster.fabric.pk}", holder="vm:1:old", acquired_at=old, renewed_at=old,
                         expires_at=old + timedelta(seconds=6))  # fmt: skip
    Lease.objects.create(role="beat", holder="vm:2:live", acquired_at=now, renewed_at=now,
                         expires_at=now + timedelta(seconds=60))  # fmt: skip
    Command(stdout=io.StringIO())._end_previous_run(cluster.fabric)
    assert list(Lease.objects.values_list("role", flat=True)) == ["beat"]
    assert [s.wrote for s in check_roles()] == [""]
    assert not Event.objects.filter(code="system.role_down").exists()
