"""The rebalancing worker (``scheduler.services.rebalance``) on a stored fabric with GPUs and
pools: reclaim of borrowed GPUs for a pool below its guarantee, a defragmenting move that frees a
whole leaf, the dry run listing the real run's actions, the pass lock, congestion reports from
stored counter sweeps, and the API's roles."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from accounts.models import AuditEntry
from core.locks import single_instance
from events.models import Alarm, Event
from events.rules.counters import evaluate_sweep
from fabric.models import Link, Node
from pools.models import Allocation, Pool, Tenant
from scheduler import receivers
from scheduler.models import Job
from scheduler.services import queue
from scheduler.services.queue import PASS_LOCK, JobSpec, finish, passes, run_pass, submit
from scheduler.services.rebalance import plan_rebalance, run_rebalance
from telemetry.models import PortCounters, Sweep
from tests.support.jobs import gpu_cluster


@pytest.fixture
def cluster(db):
    return gpu_cluster(2, 2, 8)  # host001-002 on leaf-01, host003-004 on leaf-02: 32 H100s


def _plain(result: dict) -> list[dict]:
    """The actions without their outcome (what a dry run and a real run must share)."""
    return [{k: v for k, v in a.items() if k != "outcome"} for a in result["actions"]]


def _fresh(*jobs: Job) -> None:
    for j in jobs:
        j.refresh_from_db()


def _codes(job: Job) -> list[str]:
    return list(
        Event.objects.filter(object_type="job", object_key=str(job.pk))
        .order_by("id")
        .values_list("code", flat=True)
    )


# --- reclaim --------------------------------------------------------------------------------------


@pytest.fixture
def borrowed(cluster):
    return _borrow(cluster)


def _borrow(cluster):
    """The owner pool (``cluster.pool``) is guaranteed 16 GPUs; a second tenant's pool with no
    guarantee borrowed all 32 with four preemptible 8-GPU jobs of the same priority; the owner
    then submits a 16-GPU job (no pass since). Returns ``(owner job, borrower jobs, borrower
    pool)``."""
    Pool.objects.filter(pk=cluster.pool.pk).update(guaranteed_gpus=16, quota_gpus=16)
    other = Pool.objects.create(
        name="p-borrow", tenant=Tenant.objects.create(name="t-borrow"), fabric=cluster.fabric
    )
    borrowers = [
        submit(JobSpec(name=f"b{i}", pool_id=other.pk, count=8, gpus_per_host=8, preemptible=True))
        for i in range(4)
    ]
    run_pass()
    _fresh(*borrowers)
    assert {b.state for b in borrowers} == {"placed"}
    assert all(b.allocation.borrowed for b in borrowers)
    # submitted, no pass yet: what the periodic run finds when a pass has not reclaimed
    owner = submit(JobSpec(name="owner", pool_id=cluster.pool.pk, count=16, gpus_per_host=8))
    return owner, borrowers, other


def test_reclaim_preempts_the_fewest_borrowers_and_places_the_owner(borrowed, users):
    owner, borrowers, other = borrowed
    dry = run_rebalance(dry_run=True)
    (action,) = dry["actions"]
    assert action["kind"] == "reclaim" and action["job"] == owner.pk and action["outcome"] == "would execute"
    assert len(action["victims"]) == 2  # 16 GPUs: two 8-GPU borrowers, the fewest
    assert sorted(action["placed"].values()) == [8, 8]
    assert "holds 0 of the 16 GPUs guaranteed" in action["reason"] and "the fewest" in action["reason"]
    assert Job.objects.get(pk=owner.pk).state == "pending"  # a dry run changes nothing
    assert not Event.objects.filter(code="job.reclaimed").exists()

    real = run_rebalance(dry_run=False, user=users["operator"])
    assert _plain(real) == _plain(dry)  # the dry run listed exactly what the real run did
    assert [a["outcome"] for a in real["actions"]] == ["done"]
    _fresh(owner, *borrowers)
    victims = [b for b in borrowers if b.pk in action["victims"]]
    assert owner.state == "placed" and owner.placement == action["placed"]
    assert owner.allocation.borrowed is False  # within its guarantee
    for v in victims:
        assert v.state == "pending" and v.preemptions == 1  # requeued (preemptible: the default)
        assert v.tenant_id != owner.tenant_id
        # the victim's tenant reads this: the owner's job and pool are another tenant's (issue 22)
        assert v.reason == "requeued: reclaimed for a job of another tenant: its pool's guaranteed GPUs"
        assert cluster_pool_name(owner) not in v.reason
        assert Allocation.objects.filter(job=v.reference, state="released").count() == 1
        assert _codes(v)[-2:] == ["job.preempted", "job.requeued"]
    assert {b.state for b in borrowers if b not in victims} == {"placed"}
    ev = Event.objects.get(code="job.reclaimed", object_key=str(owner.pk))
    assert sorted(ev.details["victims"]) == sorted(action["victims"])
    entry = AuditEntry.objects.get(action="job.reclaim", object_id=str(owner.pk))
    assert entry.user == users["operator"]

    # idempotent: the owner holds its guarantee, the requeued borrowers have nothing to reclaim
    again = run_rebalance(dry_run=False)
    assert again["actions"] == [] and Event.objects.filter(code="job.reclaimed").count() == 1
    # the next pass leaves the requeued borrowers pending (no GPUs free), not on the owner's GPUs
    run_pass()
    owner.refresh_from_db()
    assert owner.state == "placed"


def test_a_pass_reclaims_for_a_pool_below_its_guarantee_at_once(borrowed):
    owner, borrowers, _ = borrowed
    summary = run_pass()
    _fresh(owner, *borrowers)
    # same priority: the pass's own preemption takes nothing; the guarantee does
    assert summary["preempted"] == 0 and summary["reclaimed"] == 1
    assert owner.state == "placed" and owner.allocation.borrowed is False
    victims = [b for b in borrowers if b.state == "pending"]
    assert len(victims) == 2 and all(
        v.reason.startswith("requeued: reclaimed for a job of another tenant") for v in victims
    )
    assert Event.objects.filter(code="job.reclaimed", object_key=str(owner.pk)).count() == 1
    assert run_rebalance(dry_run=True)["actions"] == []  # nothing left for the periodic run
    assert run_pass()["reclaimed"] == 0  # the requeued borrowers wait (no guarantee of theirs)
    assert {b.state for b in borrowers if b not in victims} == {"placed"}


def test_a_preemptible_job_does_not_reclaim_from_a_higher_priority_one(db):
    c = gpu_cluster(1, 1, 8, name="pingpong")
    Pool.objects.filter(pk=c.pool.pk).update(guaranteed_gpus=8, quota_gpus=8)
    other = Pool.objects.create(name="p-hi", tenant=Tenant.objects.create(name="t-hi"), fabric=c.fabric)
    hi = submit(JobSpec(name="hi", pool_id=other.pk, count=8, preemptible=True, priority_class="high"))
    run_pass()
    low = submit(JobSpec(name="low", pool_id=c.pool.pk, count=8, preemptible=True, priority_class="batch"))
    # reclaimed, the batch job would be preempted again by the next pass for the high one
    assert run_pass()["reclaimed"] == 0 and plan_rebalance() == []
    _fresh(hi, low)
    assert (hi.state, low.state) == ("placed", "pending")
    # a job that cannot be preempted back takes its guarantee whatever the priorities
    Job.objects.filter(pk=low.pk).update(preemptible=False)
    assert run_pass()["reclaimed"] == 1
    _fresh(hi, low)
    assert (hi.state, low.state) == ("pending", "placed") and hi.preemptions == 1


# --- reclaim of MIG slices and shared fractions -----------------------------------------------------


def _mig_borrowed():
    """Four hosts, each with one MIG GPU holding two 1g.10gb slices (8 in all). The owner pool
    (``p-mig``) is guaranteed 2 slices; a second tenant's pool, guaranteed 2 of a quota of 8,
    holds all 8 with four preemptible 2-slice jobs: the first within its guarantee, the other
    three borrowed. The owner then submits a 2 × 1g.10gb job (no pass since). Returns ``(owner
    job, borrower jobs)``."""
    c = gpu_cluster(2, 2, 8, name="mig", mig_every=1)
    Pool.objects.filter(pk=c.pool.pk).update(guaranteed_slices=2, quota_slices=2)
    other = Pool.objects.create(
        name="p-mig-borrow", tenant=Tenant.objects.create(name="t-mig-borrow"), fabric=c.fabric,
        guaranteed_slices=2, quota_slices=8,
    )  # fmt: skip
    borrowers = [
        submit(
            JobSpec(
                name=f"m{i}", pool_id=other.pk, kind="mig", count=2, mig_profile="1g.10gb", preemptible=True
            )
        )
        for i in range(4)
    ]
    run_pass()
    _fresh(*borrowers)
    assert {b.state for b in borrowers} == {"placed"}
    assert [b.allocation.borrowed for b in borrowers] == [False, True, True, True]
    assert all(len(b.placement) == 1 and sum(b.placement.values()) == 2 for b in borrowers)
    owner = submit(JobSpec(name="owner", pool_id=c.pool.pk, kind="mig", count=2, mig_profile="1g.10gb"))
    return owner, borrowers


def test_reclaim_of_borrowed_mig_slices_preempts_one_borrower_and_places_the_owner(db, users):
    owner, borrowers = _mig_borrowed()
    first_borrowed = borrowers[1]  # the lowest id among the borrowed (borrowers[0] is guaranteed)
    dry = run_rebalance(dry_run=True)
    (action,) = dry["actions"]
    assert (action["kind"], action["job"], action["outcome"]) == ("reclaim", owner.pk, "would execute")
    assert action["victims"] == [first_borrowed.pk]  # one 2-slice job: the fewest
    assert action["placed"] == first_borrowed.placement
    assert action["details"]["kind"] == "mig" and action["details"]["unit"] == "MIG slices"
    assert (action["details"]["held"], action["details"]["guaranteed"]) == (0, 2)
    assert "holds 0 of the 2 MIG slices guaranteed" in action["reason"]
    assert (
        "waits for 2 × 1g.10gb: reclaim 2 borrowed 1g.10gb slices from 1 preemptible job" in action["reason"]
    )
    # the reason goes into the owner's events: the borrower is another tenant's, so unnamed
    assert action["reason"].endswith("(the fewest): a job of another tenant")
    assert "p-mig-borrow" not in action["reason"] and str(first_borrowed) not in action["reason"]
    assert (
        Job.objects.get(pk=owner.pk).state == "pending"
        and not Event.objects.filter(code="job.reclaimed").exists()
    )

    real = run_rebalance(dry_run=False, user=users["operator"])
    assert _plain(real) == _plain(dry)  # the dry run listed exactly what the real run did
    assert [a["outcome"] for a in real["actions"]] == ["done"]
    _fresh(owner, *borrowers)
    assert owner.state == "placed" and owner.placement == action["placed"]
    assert owner.allocation.kind == "mig" and owner.allocation.borrowed is False
    assert owner.allocation.items.filter(active=True, mig_slice__profile="1g.10gb").count() == 2
    victim = first_borrowed
    assert victim.state == "pending" and victim.preemptions == 1
    assert (
        victim.reason == "requeued: reclaimed for a job of another tenant: its pool's guaranteed MIG slices"
    )
    assert Allocation.objects.filter(job=victim.reference, state="released").count() == 1
    assert _codes(victim)[-2:] == ["job.preempted", "job.requeued"]
    assert [b.state for b in borrowers if b != victim] == ["placed"] * 3
    ev = Event.objects.get(code="job.reclaimed", object_key=str(owner.pk))
    assert ev.details["victims"] == [victim.pk] and ev.details["reason"] == action["reason"]
    assert ev.details["kind"] == "mig" and "reclaimed MIG slices" in ev.message
    assert AuditEntry.objects.get(action="job.reclaim", object_id=str(owner.pk)).user == users["operator"]
    # idempotent: the owner holds its guarantee; the requeued borrower's pool is over its own
    assert run_rebalance(dry_run=False)["actions"] == []
    run_pass()
    owner.refresh_from_db()
    victim.refresh_from_db()
    assert owner.state == "placed" and victim.state == "pending"


def test_a_pass_reclaims_borrowed_mig_slices_at_once(db):
    owner, borrowers = _mig_borrowed()
    assert run_pass()["reclaimed"] == 1
    _fresh(owner, *borrowers)
    assert owner.state == "placed" and [b.state for b in borrowers] == [
        "placed",
        "pending",
        "placed",
        "placed",
    ]
    assert plan_rebalance() == []


def test_no_reclaim_of_mig_slices_beyond_the_guarantee(db):
    owner, borrowers = _mig_borrowed()
    Job.objects.filter(pk=owner.pk).update(count=4)  # 0 + 4 > the 2 guaranteed
    Pool.objects.filter(pk=owner.pool_id).update(quota_slices=4)
    assert plan_rebalance() == [] and run_pass()["reclaimed"] == 0
    owner.refresh_from_db()
    assert owner.state == "pending"


def test_reclaim_of_borrowed_fractions_ends_the_fewest_on_one_gpu(db, users):
    """One host with two H100s (81080 MiB to share each). A pool without guarantee holds
    fractions: GPU 1 has m0 (60000 MiB, 60 %) and m2 (20000 MiB, 30 %), GPU 2 has m1 (60000 MiB,
    60 %). The owner pool, guaranteed 1 GPU, asks for 70000 MiB and 50 %: on GPU 1 that takes
    ending m0 and m2, on GPU 2 ending m1 alone — the fewest."""
    c = gpu_cluster(1, 1, 2, name="frac")
    Pool.objects.filter(pk=c.pool.pk).update(guaranteed_gpus=1, quota_gpus=1)
    other = Pool.objects.create(
        name="p-frac-borrow", tenant=Tenant.objects.create(name="t-frac-borrow"), fabric=c.fabric
    )
    spec = lambda n, mem, pct: JobSpec(  # noqa: E731
        name=n, pool_id=other.pk, kind="fraction", memory_mib=mem, compute_pct=pct, preemptible=True
    )
    m0, m1, m2 = [submit(spec("m0", 60000, 60)), submit(spec("m1", 60000, 60)), submit(spec("m2", 20000, 30))]
    run_pass()
    _fresh(m0, m1, m2)
    gpu = {j.name: j.allocation.items.get().gpu_id for j in (m0, m1, m2)}
    assert gpu["m0"] == gpu["m2"] != gpu["m1"] and all(j.allocation.borrowed for j in (m0, m1, m2))
    owner = submit(
        JobSpec(name="owner", pool_id=c.pool.pk, kind="fraction", memory_mib=70000, compute_pct=50)
    )

    dry = run_rebalance(dry_run=True)
    (action,) = dry["actions"]
    assert (action["job"], action["victims"], action["placed"]) == (owner.pk, [m1.pk], {"host001": 1})
    assert action["details"]["gpu"] == gpu["m1"] and action["details"]["unit"] == "GPUs"
    assert "holds 0 of the 1 GPUs guaranteed" in action["reason"]
    assert (
        f"waits for 70000 MiB + 50 % of one GPU: reclaim 1 borrowed share of GPU {gpu['m1']} on host001"
        in action["reason"]
    )
    real = run_rebalance(dry_run=False)
    assert _plain(real) == _plain(dry) and [a["outcome"] for a in real["actions"]] == ["done"]
    _fresh(owner, m0, m1, m2)
    assert owner.state == "placed" and owner.allocation.items.get(active=True).gpu_id == gpu["m1"]
    assert owner.allocation.borrowed is False
    assert (m0.state, m1.state, m2.state) == ("placed", "pending", "placed")
    assert m1.reason == "requeued: reclaimed for a job of another tenant: its pool's guaranteed GPUs"
    assert Event.objects.get(code="job.reclaimed", object_key=str(owner.pk)).details["victims"] == [m1.pk]
    assert run_rebalance(dry_run=False)["actions"] == []


def cluster_pool_name(job: Job) -> str:
    return job.pool.name


def test_a_real_run_waits_for_the_pass_lock(borrowed):
    owner, _, _ = borrowed
    with single_instance(PASS_LOCK) as mine:
        assert mine
        result = run_rebalance(dry_run=False)
        assert result["skipped"] and result["actions"] == []
        # a pass asked for meanwhile is skipped too: one holder at a time
        assert "skipped" in run_pass()
    owner.refresh_from_db()
    assert owner.state == "pending" and not Event.objects.filter(code="job.reclaimed").exists()
    assert run_rebalance(dry_run=False)["actions"][0]["outcome"] == "done"


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_real_run_while_a_pass_runs_in_another_worker_does_nothing(monkeypatch):
    """PostgreSQL + Redis (bin/test's second phase): a pass holds the lock in another thread
    (another connection) while a real run is asked for: the run is skipped and changes nothing;
    the pass, let go, reclaims for the owner itself."""
    assert connection.vendor == "postgresql"
    monkeypatch.setattr(receivers, "queue_pass", lambda: None)  # only the passes this test runs
    owner, _, _ = _borrow(gpu_cluster(2, 2, 8, name="lockrace"))
    inside, go, errors = threading.Event(), threading.Event(), []
    one_pass = passes._one_pass

    def held_open(now):
        inside.set()
        if not go.wait(timeout=30):
            raise TimeoutError("the test never let the pass go on")
        return one_pass(now)

    monkeypatch.setattr(passes, "_one_pass", held_open)

    def worker() -> None:
        try:
            queue.run_pass()
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    t = threading.Thread(target=worker)
    t.start()
    try:
        assert inside.wait(timeout=30)
        result = run_rebalance(dry_run=False)
        assert result["skipped"] and result["actions"] == []
        assert Job.objects.get(pk=owner.pk).state == "pending"
    finally:
        go.set()
        t.join(timeout=60)
    assert not errors, errors
    # the pass, once let go, reclaimed itself (under its lock): nothing left for the run
    assert Job.objects.get(pk=owner.pk).state == "placed"
    assert Event.objects.filter(code="job.reclaimed").count() == 1
    assert run_rebalance(dry_run=False)["actions"] == []


# --- a move that frees a leaf ---------------------------------------------------------------------


def _on(jobs: list[Job], host: str) -> Job:
    (job,) = [j for j in jobs if host in j.placement]
    return job


def _fragmented(cluster, preemptible: bool = True) -> tuple[Job, Job]:
    """leaf-01: host001 free, host002 half used by ``small`` (4 GPUs); leaf-02: host003 free,
    host004 full. 20 GPUs free, but no leaf has two free hosts: ``big`` (two whole hosts in one
    leaf, required) waits for fragmentation. Returns ``(small, big)``."""
    s = lambda n, **kw: JobSpec(name=kw.pop("name"), pool_id=cluster.pool.pk, count=n, **kw)  # noqa: E731
    fill = [submit(s(8, name=f"fill{i}", gpus_per_host=8)) for i in range(4)]
    run_pass()
    _fresh(*fill)
    finish(_on(fill, "host002").pk)
    small = submit(s(4, name="small", preemptible=preemptible, time_limit_s=3600))
    run_pass()
    small.refresh_from_db()
    assert small.placement == {"host002": 4}
    finish(_on(fill, "host001").pk)
    finish(_on(fill, "host003").pk)
    big = submit(s(16, name="big", gpus_per_host=8, tier="leaf", tier_mode="required"))
    run_pass()
    big.refresh_from_db()
    assert big.state == "pending" and big.pending_code == "fragmentation"
    return small, big


def test_a_preemptible_job_is_moved_so_that_a_whole_leaf_comes_free(cluster, users):
    small, big = _fragmented(cluster)
    dry = run_rebalance(dry_run=True)
    moves = [a for a in dry["actions"] if a["kind"] == "move"]
    (move,) = moves
    assert move["job"] == small.pk and move["execute"] and move["before"] == {"host002": 4}
    assert move["placed"] == {"host003": 4} and move["frees"] == [leaf_name(cluster, "host001")]
    assert "whole free units 0 → 1" in move["reason"]

    real = run_rebalance(dry_run=False, user=users["admin"])
    assert _plain(real) == _plain(dry)
    assert [a["outcome"] for a in real["actions"]] == ["done"]
    small.refresh_from_db()
    assert small.state == "placed" and small.placement == {"host003": 4}
    assert small.allocation.state == "active" and small.allocation.items.filter(active=True).count() == 4
    assert set(small.allocation.items.values_list("gpu__host__name", flat=True)) == {"host003"}
    assert _codes(small)[-1] == "job.moved"
    assert AuditEntry.objects.filter(action="job.move", object_id=str(small.pk)).count() == 1
    assert run_rebalance(dry_run=True)["actions"] == []  # idempotent: nothing more to free

    run_pass()  # the freed leaf takes the job that waited for it
    big.refresh_from_db()
    assert big.state == "placed" and set(big.placement) == {"host001", "host002"}


def test_a_move_whose_job_changed_after_the_plan_is_refused_and_changes_nothing(cluster, monkeypatch):
    from scheduler.services.rebalance import running as rebalance  # the module run_rebalance calls it in

    small, big = _fragmented(cluster)
    planned = rebalance.plan_rebalance

    def plan_then_cancel(now=None):
        actions = planned(now)
        queue.cancel(small.pk, reason="the user was quicker")  # between the plan and its execution
        return actions

    monkeypatch.setattr(rebalance, "plan_rebalance", plan_then_cancel)
    (move,) = run_rebalance(dry_run=False)["actions"]
    assert move["job"] == small.pk and move["outcome"].startswith("refused: ")
    assert "changed since the move was planned" in move["outcome"]
    small.refresh_from_db()
    assert small.state == "cancelled" and small.placement == {"host002": 4}
    assert not Event.objects.filter(code="job.moved").exists()
    assert not Allocation.objects.filter(job=small.reference, state="active").exists()


def leaf_name(cluster, host: str) -> str:
    from scheduler.services.state import current_locality

    loc = current_locality()
    return loc.domains[loc.hosts[host].unit].name


def test_a_move_of_a_job_that_is_not_preemptible_is_only_proposed(cluster):
    s = lambda n, **kw: JobSpec(name=kw.pop("name"), pool_id=cluster.pool.pk, count=n, **kw)  # noqa: E731
    fill = [submit(s(8, name=f"fill{i}", gpus_per_host=8)) for i in range(4)]
    run_pass()
    _fresh(*fill)
    finish(_on(fill, "host002").pk)
    pinned = submit(s(4, name="pinned"))  # not preemptible
    run_pass()
    finish(_on(fill, "host001").pk)
    finish(_on(fill, "host003").pk)
    result = run_rebalance(dry_run=False)
    # leaf-01 (the less used) can be freed by moving pinned to host003; that proposal holds
    # host003 in the plan, so host004's 8-GPU job is not also proposed onto host001 (the listed
    # proposals can all be made together)
    (move,) = result["actions"]
    assert move["kind"] == "move" and move["job"] == pinned.pk and move["outcome"] == "proposed"
    assert move["placed"] == {"host003": 4} and not move["execute"]
    assert "not preemptible" in move["reason"]
    pinned.refresh_from_db()
    assert pinned.placement == {"host002": 4}
    run_rebalance(dry_run=False)
    assert Event.objects.filter(code="job.move_proposed", object_key=str(pinned.pk)).count() == 1  # once


# --- congestion reports ---------------------------------------------------------------------------


def _uplink_port(cluster, leaf_key_host: str):
    from scheduler.services.state import current_locality

    loc = current_locality()
    guid = loc.domains[loc.hosts[leaf_key_host].unit].switches[0]
    leaf = Node.objects.get(fabric=cluster.fabric, node_guid=guid)
    link = Link.objects.filter(
        Q(port_a__node=leaf, port_b__node__tier__gt=leaf.tier)
        | Q(port_b__node=leaf, port_a__node__tier__gt=leaf.tier)
    ).first()
    return link.port_a if link.port_a.node_id == leaf.pk else link.port_b


def test_a_job_on_persistently_congested_uplinks_is_reported_with_a_better_placement(cluster):
    job = submit(JobSpec(name="train", pool_id=cluster.pool.pk, count=8, gpus_per_host=8))
    run_pass()
    job.refresh_from_db()
    (host,) = job.placement
    port = _uplink_port(cluster, host)
    # three counter sweeps with the congestion index over the policy's 0.5: the rule raises
    states = []
    for value in (0.9, 0.85, 0.95):
        sweep = Sweep.objects.create(fabric=cluster.fabric, started=timezone.now(), interval_s=10.0, ports=1)
        PortCounters.objects.update_or_create(
            port=port,
            defaults={"sweep": sweep, "sampled_at": sweep.started, "congestion": value, "error_deltas": {}},
        )
        evaluate_sweep(cluster.fabric.pk, sweep.pk)
        states.append(list(Alarm.objects.filter(code="port.congestion").values_list("state", flat=True)))
        if value == 0.9:  # one sweep is not persistent: nothing to report yet
            assert plan_rebalance() == []
    assert states[-1] == ["active"]

    result = run_rebalance(dry_run=False)
    (report,) = result["actions"]
    assert report["kind"] == "congested" and report["job"] == job.pk and report["outcome"] == "reported"
    assert report["before"] == job.placement and not report["execute"]
    other_leaf = {"host001", "host002"} if host in ("host003", "host004") else {"host003", "host004"}
    assert set(report["placed"]) <= other_leaf and sum(report["placed"].values()) == 8
    assert "crosses uplinks with congestion alarms" in report["reason"] and "index 0.95" in report["reason"]
    assert report["label"] == "congested" and report["details"]["alarms"] == ["port.congestion"]
    # the mark's score (0.95 over the policy's 0.5) says what it is and its unit, not a bare "score 1.9"
    assert "(1.9× the alarm's threshold)" in report["reason"] and "score" not in report["reason"]
    job.refresh_from_db()
    assert job.placement == report["before"]  # reported, not moved
    run_rebalance(dry_run=False)
    assert Event.objects.filter(code="job.congested", object_key=str(job.pk)).count() == 1


def _hca_link(cluster, host: str) -> Link:
    """The cable between ``host``'s HCA and its leaf switch."""
    (link,) = Link.objects.filter(
        Q(port_a__node__host__name=host, port_b__node__node_type="switch")
        | Q(port_b__node__host__name=host, port_a__node__node_type="switch"),
        fabric=cluster.fabric,
    ).select_related("port_a__node", "port_b__node")
    return link


def test_a_job_on_a_persistently_congested_hca_link_is_reported_naming_the_link(cluster):
    job = submit(JobSpec(name="train", pool_id=cluster.pool.pk, count=8, gpus_per_host=8))
    run_pass()
    job.refresh_from_db()
    (host,) = job.placement
    link = _hca_link(cluster, host)
    ca, leaf = (
        (link.port_a, link.port_b) if link.port_a.node.node_type != "switch" else (link.port_b, link.port_a)
    )
    # three counter sweeps with the leaf port towards the host's HCA over the policy's 0.5: only
    # that HCA link is congested (no uplink has counters)
    for value in (0.9, 0.85, 0.95):
        sweep = Sweep.objects.create(fabric=cluster.fabric, started=timezone.now(), interval_s=10.0, ports=1)
        PortCounters.objects.update_or_create(
            port=leaf,
            defaults={"sweep": sweep, "sampled_at": sweep.started, "congestion": value, "error_deltas": {}},
        )
        evaluate_sweep(cluster.fabric.pk, sweep.pk)
        if value == 0.9:  # one sweep is not persistent: nothing to report yet
            assert plan_rebalance() == []
    assert list(Alarm.objects.filter(code="port.congestion").values_list("port_id", "state")) == [
        (leaf.pk, "active")
    ]
    from scheduler.services.state import congestion_marks, current_locality

    assert congestion_marks(current_locality()).marks == {}  # no domain's uplinks are marked

    dry = run_rebalance(dry_run=True)
    result = run_rebalance(dry_run=False)
    assert _plain(result) == _plain(dry)
    (report,) = result["actions"]
    assert (report["kind"], report["job"], report["outcome"]) == ("congested", job.pk, "reported")
    assert (
        report["before"] == {host: 8} and host not in report["placed"] and sum(report["placed"].values()) == 8
    )
    name = f"{ca.node.name} [{ca.port_num}] <-> {leaf.node.name} [{leaf.port_num}]"  # both ends
    assert report["details"]["congested"] == []
    (hca,) = report["details"]["hca_links"]
    assert (hca["host"], hca["link"], hca["name"], hca["index"]) == (host, link.pk, name, 0.95)
    assert hca["score"] == round(0.95 / 0.5, 3)
    assert "crosses uplinks" not in report["reason"]
    assert (
        f"runs over HCA links with congestion alarms ({name}: Congestion on {leaf}: index 0.95 above 0.5"
        in report["reason"]
    )
    assert "(1.9× the alarm's threshold; congestion index now 0.95)" in report["reason"]
    job.refresh_from_db()
    assert job.placement == {host: 8}  # reported, not moved
    ev = Event.objects.get(code="job.congested", object_key=str(job.pk))
    assert ev.details["reason"] == report["reason"]
    run_rebalance(dry_run=False)
    assert Event.objects.filter(code="job.congested", object_key=str(job.pk)).count() == 1


# --- the API --------------------------------------------------------------------------------------


def test_rebalance_api_roles_and_lock(borrowed, client_for):
    url = reverse("scheduler-api:rebalance")
    assert client_for("viewer").post(url, {"dry_run": True}, format="json").status_code == 403
    r = client_for("operator").post(url, {"dry_run": True}, format="json")
    assert r.status_code == 200 and r.json()["dry_run"] is True
    assert [a["kind"] for a in r.json()["actions"]] == ["reclaim"]
    assert client_for("operator").post(url, {"dry_run": "maybe"}, format="json").status_code == 400
    with single_instance(PASS_LOCK):
        r = client_for("admin").post(url, {"dry_run": False}, format="json")
        assert r.status_code == 409 and "skipped" in r.json()
    r = client_for("admin").post(url, {"dry_run": False}, format="json")
    assert r.status_code == 200 and [a["outcome"] for a in r.json()["actions"]] == ["done"]


def test_the_beat_task_runs_a_real_rebalance(borrowed, settings):
    from scheduler.tasks import rebalance_task
    from weft.celery import app

    entry = settings.CELERY_BEAT_SCHEDULE["scheduler-rebalance"]
    assert entry["task"] == "scheduler.tasks.rebalance_task" and entry["task"] in app.tasks
    assert entry["schedule"].total_seconds() == settings.WEFT_SCHEDULER_REBALANCE_INTERVAL_S

    owner, _, _ = borrowed
    assert rebalance_task() == {"skipped": None, "counts": {"reclaim": 1}}
    owner.refresh_from_db()
    assert owner.state == "placed"
    assert rebalance_task() == {"skipped": None, "counts": {}}


def test_the_operator_include_renders_only_for_operators(rf, users):
    from django.contrib.staticfiles import finders
    from django.template.loader import render_to_string

    request = rf.get("/")
    request.user = users["operator"]
    html = render_to_string("scheduler/_rebalance.html", {"is_operator": True}, request=request)
    assert reverse("scheduler-api:rebalance") in html and "Dry run" in html and "csrfmiddlewaretoken" in html
    assert "scheduler/rebalance.js" in html and finders.find("scheduler/rebalance.js")
    assert (
        render_to_string("scheduler/_rebalance.html", {"is_operator": False}, request=request).strip() == ""
    )
