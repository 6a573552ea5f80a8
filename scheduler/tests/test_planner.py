"""The pass planner (``scheduler.planner``), pure: order, quota, in-pass accounting, backfill
around the head job's reservation, preemption with the fewest victims, unusable hosts."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.placement import Congestion, FreeState, Mark, Request, place
from scheduler.planner import (
    HeldJob,
    Inventory,
    PoolInfo,
    QueuedJob,
    fair_order,
    gpu_equivalents,
    plan_pass,
)
from tests.support.localities import fat_tree

H100 = "nvidia h100 80gb hbm3"


def inventory(loc, free: dict[str, int], model: str = H100) -> Inventory:
    """Free whole GPUs per host."""
    return Inventory(gpus={h: {model: n} for h, n in free.items() if n})


def held(job_id: int, prio: int, preemptible: bool, ends_at: float, *gpus: tuple[str, int], tenant: int = 2):
    """A held job with ``(host, count)`` H100s."""
    return HeldJob(job_id, tenant, 1, prio, preemptible, ends_at, tuple((h, H100, n) for h, n in gpus))


def free_now(inv: Inventory) -> dict[str, int]:
    return {h: sum(m.values()) for h, m in inv.gpus.items() if sum(m.values())}


def job(
    job_id: int, count: int, *, tenant: int = 1, prio: int = 500, limit: float = 3600.0, **kw
) -> QueuedJob:
    return QueuedJob(job_id, tenant, 1, prio, count=count, time_limit_s=limit, submitted=float(job_id), **kw)


POOL = {1: PoolInfo(1, "p")}


def test_fair_order_priority_first_then_usage_over_weight():
    jobs = [job(1, 8, tenant=1), job(2, 8, tenant=1), job(3, 8, tenant=2), job(4, 1, tenant=2, prio=900)]
    # tenant 1 used a lot, tenant 2 nothing: tenant 2 first, then turns by charged usage
    order = fair_order(jobs, {1: (1.0, 10 * 8 * 3600.0), 2: (1.0, 0.0)})
    assert [j.job_id for j in order] == [4, 3, 1, 2]
    # weight 20: tenant 1 counts 14,400 (+1,440 per 8-GPU hour charged), tenant 2 28,800
    order = fair_order(jobs, {1: (20.0, 10 * 8 * 3600.0), 2: (1.0, 8 * 3600.0)})
    assert [j.job_id for j in order] == [4, 1, 2, 3]
    # equal scores: the lower tenant id; then the charge alternates them
    order = fair_order(jobs, {})
    assert [j.job_id for j in order] == [4, 1, 3, 2]
    assert gpu_equivalents("mig", 7) == 1.0 and gpu_equivalents("fraction", 1, 25) == 0.25


def test_two_jobs_of_one_pass_never_get_the_same_gpu():
    loc = fat_tree(2, 2, gpus=8)  # 4 hosts, 32 GPUs
    inv = inventory(loc, {h: 8 for h in loc.hosts})
    plan = plan_pass(loc, inv, [job(i, 6) for i in range(1, 7)], pools=POOL, now=0)
    placed = [o for o in plan.outcomes if o.ok]
    assert len(placed) == 5  # 5 × 6 = 30 of 32
    per_host: dict[str, int] = {}
    for o in placed:
        for h, n in o.placed.items():
            per_host[h] = per_host.get(h, 0) + n
    assert sum(per_host.values()) == 30 and all(n <= 8 for n in per_host.values())  # no GPU twice
    assert plan.outcomes[-1].code == "capacity" and "6 GPUs asked, 2 free" in plan.outcomes[-1].reasons[0]
    assert sum(free_now(inv).values()) == 2


def test_quota_before_the_engine_and_counted_as_the_pass_goes():
    loc = fat_tree(2, 2, gpus=8)
    inv = inventory(loc, {h: 8 for h in loc.hosts})
    pools = {1: PoolInfo(1, "p", quota_gpus=18, used_gpus=4)}
    plan = plan_pass(loc, inv, [job(1, 8), job(2, 8), job(3, 4)], pools=pools, now=0)
    assert [o.code for o in plan.outcomes] == ["placed", "quota", "placed"]
    assert plan.outcomes[1].reasons[0] == "pool p: 12 GPUs held + 8 asked > quota 18"
    assert plan.outcomes[1].reservation is None  # quota is not fragmentation: no reservation


def test_unusable_host_is_never_chosen():
    loc = fat_tree(2, 2, gpus=8)
    hosts = sorted(loc.hosts)
    inv = inventory(loc, {h: 8 for h in hosts})
    plan = plan_pass(
        loc, inv, [job(1, 8), job(2, 8), job(3, 8), job(4, 8)], pools=POOL,
        unusable={hosts[0]: "link down"}, now=0,
    )  # fmt: skip
    assert [o.code for o in plan.outcomes] == ["placed", "placed", "placed", "capacity"]
    assert all(hosts[0] not in o.placed for o in plan.outcomes)


def test_backfill_does_not_delay_the_head_jobs_reservation():
    """A 16-GPU job (two whole hosts) waits for a running job; smaller jobs fill the rest of the
    fabric, and only one whose time limit ends first may use the reserved hosts."""
    loc = fat_tree(2, 2, gpus=8)  # leaf 1: h1 h2, leaf 2: h3 h4
    h1, h2, h3, h4 = sorted(loc.hosts)
    inv = inventory(loc, {h1: 8, h2: 0, h3: 4, h4: 0})
    holders = [
        held(100, 500, False, 1000.0, (h2, 8)),
        held(101, 500, False, 50_000.0, (h3, 4)),
        held(102, 500, False, 60_000.0, (h4, 8)),
    ]
    queued = [
        job(1, 16, gpus_per_host=8, prio=800),  # head: fits on leaf 1 once job 100 ends at t=1000
        job(2, 4, limit=5000),  # must not take h1: it would run past t=1000
        job(3, 4, limit=500),  # ends at 500 < 1000: may backfill on h1
        job(4, 4, limit=5000),
    ]
    plan = plan_pass(loc, inv, queued, pools=POOL, held=holders, now=0.0)
    head, j2, j3, j4 = plan.outcomes
    assert head.code == "capacity" and head.reservation is not None
    assert head.reservation.start == 1000.0 and head.reservation.hosts == {h1, h2}
    assert head.reservation.waits_for == (100,)
    assert j2.ok and set(j2.placed) == {h3} and not j2.backfilled
    assert j3.ok and j3.backfilled and set(j3.placed) == {h1}
    assert any("backfilled on hosts reserved for job 1" in r for r in j3.reasons)
    assert j4.code == "capacity" and any("reserved for job 1 are not counted" in r for r in j4.reasons)
    # at t=1000 the head places on its reserved hosts: job 3 has ended, job 100 too
    free = free_now(inv)
    free[h1] = free.get(h1, 0) + 4  # job 3 ended
    free[h2] = free.get(h2, 0) + 8  # job 100 ended
    assert place(loc, FreeState(gpus=free), Request(16, gpus_per_host=8)).ok


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000))
def test_backfill_never_holds_reserved_hosts_past_the_reserved_start(seed):
    """Random states: whatever the later jobs got, the GPUs they hold past the head's reserved
    start leave the head's reserved placement feasible at that time."""
    rng = random.Random(seed)
    loc = fat_tree(4, 4, gpus=4)  # 16 hosts, 64 GPUs
    hosts = sorted(loc.hosts)
    busy = {h: rng.randint(0, 4) for h in hosts}
    holders = [
        held(1000 + n, 100, False, float(rng.randint(100, 5000)), (h, busy[h]))
        for n, h in enumerate(hosts)
        if busy[h]
    ]
    inv = inventory(loc, {h: 4 - busy[h] for h in hosts})
    queued = [job(1, rng.choice([24, 32, 40]), prio=900)] + [
        job(i, rng.choice([1, 2, 4, 8]), limit=float(rng.choice([50, 500, 5000, 50_000])))
        for i in range(2, 14)
    ]
    plan = plan_pass(loc, inv, queued, pools=POOL, held=holders, now=0.0)
    head = plan.outcomes[0]
    if head.ok or head.reservation is None:
        return
    start = head.reservation.start
    free = free_now(inv)
    for h in holders:  # what has ended by the reserved start is free again
        if h.ends_at <= start:
            for host, _, n in h.gpus:
                free[host] = free.get(host, 0) + n
    for o, q in zip(plan.outcomes[1:], queued[1:], strict=True):
        if o.ok and q.time_limit_s <= start:
            for host, n in o.placed.items():
                free[host] = free.get(host, 0) + n
    assert place(loc, FreeState(gpus=free), Request(queued[0].count)).ok, (seed, head.reasons)


def test_preemption_picks_the_fewest_victims_and_places_in_the_same_pass():
    loc = fat_tree(1, 2, gpus=8)  # 2 hosts, 16 GPUs, all held
    h1, h2 = sorted(loc.hosts)
    holders = [
        held(10, 100, True, 9e9, (h1, 2)),
        held(11, 100, True, 9e9, (h1, 6)),
        held(12, 100, True, 9e9, (h2, 8)),
        held(13, 900, True, 9e9),
    ]
    inv = inventory(loc, {})
    plan = plan_pass(loc, inv, [job(1, 8, prio=800), job(2, 1, prio=50)], pools=POOL, held=holders, now=0)
    first, second = plan.outcomes
    assert first.ok and first.victims == [12] and first.placed == {h2: 8}
    assert any("preempts 1 lower-priority preemptible job: job 12" in r for r in first.reasons)
    # the low-priority job may not preempt and finds nothing free: the victims' GPUs went to job 1
    assert second.code == "capacity" and not second.victims


def test_non_preemptible_and_higher_priority_jobs_are_never_victims():
    loc = fat_tree(1, 1, gpus=8)
    (h1,) = loc.hosts
    holders = [held(10, 100, False, 9e9, (h1, 4)), held(11, 900, True, 9e9, (h1, 4))]
    plan = plan_pass(loc, inventory(loc, {}), [job(1, 4, prio=800)], pools=POOL, held=holders, now=0)
    assert plan.outcomes[0].code == "capacity" and plan.outcomes[0].victims == []


def test_congestion_marks_reach_the_decision():
    loc = fat_tree(2, 1, gpus=8)
    h1, h2 = sorted(loc.hosts)
    leaf1 = loc.hosts[h1].unit
    cong = Congestion({leaf1: Mark(1.6, "port.congestion on leaf-1 uplink")}, threshold=0.0)
    plan = plan_pass(loc, inventory(loc, {h1: 8, h2: 8}), [job(1, 8)], pools=POOL, congestion=cong, now=0)
    (o,) = plan.outcomes
    assert o.ok and set(o.placed) == {h2} and o.decision["avoided"] == [leaf1]


def test_model_filters_and_mig_and_fractions():
    loc = fat_tree(1, 2, gpus=8)
    h1, h2 = sorted(loc.hosts)
    inv = Inventory(
        gpus={h1: {"nvidia a100": 1, H100: 1}, h2: {H100: 1}},
        mig={h2: {("1g.10gb", H100): 2}},
        shared={
            h1: [[1, "nvidia a100", 40000, 100, True], [2, H100, 80000, 100, True]],
            h2: [[3, H100, 80000, 100, True]],
        },
    )
    pools = {1: PoolInfo(1, "p", gpu_model="h100")}
    queued = [
        job(1, 2),  # two H100s: one per host (the A100 does not match the pool)
        job(2, 2, kind="mig", mig_profile="1g.10gb"),
        job(3, 1, kind="fraction", memory_mib=10000, compute_pct=50),
    ]
    plan = plan_pass(loc, inv, queued, pools=pools, now=0)
    a, b, c = plan.outcomes
    assert a.ok and a.placed == {h1: 1, h2: 1} and inv.gpus[h1] == {"nvidia a100": 1}
    assert b.ok and b.placed == {h2: 2} and inv.mig[h2] == {("1g.10gb", H100): 0}
    assert c.code == "capacity"  # the only H100s were taken whole by job 1


def _carry(plan, queued, held_before, pools, now: float):
    """The state the next pass loads after ``plan`` was bound: placed jobs held (ending at their
    placement time + time limit) and counted in their pool's usage."""
    by_id = {q.job_id: q for q in queued}
    held_after = list(held_before)
    used: dict[int, int] = {}
    for o in plan.outcomes:
        if o.ok:
            q = by_id[o.job_id]
            gpus = tuple((h, H100, n) for h, n in sorted(o.placed.items()))
            held_after.append(
                HeldJob(q.job_id, q.tenant_id, q.pool_id, q.priority, False, now + q.time_limit_s, gpus)
            )
            used[q.pool_id] = used.get(q.pool_id, 0) + q.count
    pools_after = {
        p: PoolInfo(p, info.name, quota_gpus=info.quota_gpus, used_gpus=info.used_gpus + used.get(p, 0))
        for p, info in pools.items()
    }
    return held_after, pools_after


def test_a_head_job_keeps_its_reservation_over_passes_when_a_backfilled_job_of_its_pool_ends_first():
    """Pool 1 (quota 16) has a 16-GPU head job waiting for host h2; a 4-GPU job of the same
    pool backfills on the reserved h1 because it ends first. On the next pass the backfilled job
    does not count against the head's quota at its reserved start, so the head keeps its
    reservation (not relabelled ``quota``) and a later long job of another pool does not take
    the 4 GPUs left on h1. A later long job of pool 1 that would leave no quota for the head at
    its start waits for quota; a short one that ends first is placed."""
    loc = fat_tree(2, 2, gpus=8)  # leaf 1: h1 h2, leaf 2: h3 h4
    h1, h2, h3, h4 = sorted(loc.hosts)
    other = lambda job_id, ends, host: HeldJob(job_id, 9, 2, 500, False, ends, ((host, H100, 8),))  # noqa: E731
    held0 = [other(100, 1000.0, h2), other(101, 50_000.0, h3), other(102, 50_000.0, h4)]
    pools = {1: PoolInfo(1, "p", quota_gpus=16), 2: PoolInfo(2, "q")}
    inv = inventory(loc, {h1: 8})
    head = job(1, 16, gpus_per_host=8, prio=800, tier=1, tier_required=True)  # two hosts of one leaf
    short = job(2, 4, limit=500)
    plan1 = plan_pass(loc, inv, [head, short], pools=pools, held=held0, now=0.0)
    o_head, o_short = plan1.outcomes
    assert o_head.code == "capacity" and o_head.reservation is not None
    assert (o_head.reservation.start, o_head.reservation.hosts) == (1000.0, {h1, h2})
    assert o_short.ok and o_short.backfilled and o_short.placed == {h1: 4}

    # pass 2, 10 s later: the head as the queue loads it (its reservation's start stored)
    held1, pools1 = _carry(plan1, [head, short], held0, pools, 0.0)
    assert pools1[1].used_gpus == 4
    head2 = job(1, 16, gpus_per_host=8, prio=800, tier=1, tier_required=True, reserved_start=1000.0)
    long_other = QueuedJob(3, 9, 2, 500, count=4, time_limit_s=50_000.0, submitted=3.0)
    plan2 = plan_pass(loc, inv, [head2, long_other], pools=pools1, held=held1, now=10.0)
    o_head, o_long = plan2.outcomes
    assert o_head.code == "capacity", o_head.reasons  # not "quota": job 2 ends at 500, before 1000
    assert o_head.reservation is not None
    assert (o_head.reservation.start, o_head.reservation.hosts) == (1000.0, {h1, h2})
    assert any("ends before" in r and "job 2" in r for r in o_head.reasons), o_head.reasons
    assert o_long.code == "capacity" and not o_long.placed  # h1's 4 free GPUs stay for the head
    assert any("reserved for job 1 are not counted" in r for r in o_long.reasons)

    # pass 3: job 102 ended early, h4 is free; pool 1 submits a long and a short 4-GPU job
    held2 = [h for h in held1 if h.job_id != 102]
    inv.gpus[h4] = {H100: 8}
    long_mine = job(4, 4, limit=50_000.0)
    short_mine = job(5, 4, limit=100.0)
    plan3 = plan_pass(loc, inv, [head2, long_mine, short_mine], pools=pools1, held=held2, now=20.0)
    o_head, o_lm, o_sm = plan3.outcomes
    assert o_head.code == "capacity" and o_head.reservation is not None
    assert o_head.reservation.hosts == {h1, h2} and o_head.reservation.start == 1000.0
    assert o_lm.code == "quota" and not o_lm.placed, o_lm.reasons
    assert o_lm.reasons[0] == (
        "pool p: 0 GPUs held at job 1's reserved start + 16 reserved for it + 4 asked > quota 16"
    )
    assert o_sm.ok and o_sm.placed == {h4: 4} and not o_sm.backfilled  # ends at 120, before 1000


def test_a_job_whose_quota_stays_short_past_its_reserved_start_is_pending_for_quota():
    """The quota exception only covers jobs that end before the reserved start: a pool-1 job
    that runs past it still counts, and the head is pending ``quota`` without a reservation."""
    loc = fat_tree(2, 2, gpus=8)
    h1, h2, h3, h4 = sorted(loc.hosts)
    held0 = [
        HeldJob(100, 9, 2, 500, False, 1000.0, ((h2, H100, 8),)),
        HeldJob(101, 1, 1, 500, False, 5000.0, ((h3, H100, 4),)),  # pool 1, past 1000
    ]
    pools = {1: PoolInfo(1, "p", quota_gpus=16, used_gpus=4), 2: PoolInfo(2, "q")}
    inv = inventory(loc, {h1: 8, h3: 4})
    head = job(1, 16, gpus_per_host=8, prio=800, reserved_start=1000.0)
    later = job(2, 8, limit=50_000.0)
    plan = plan_pass(loc, inv, [head, later], pools=pools, held=held0, now=10.0)
    o_head, o_later = plan.outcomes
    assert o_head.code == "quota" and o_head.reservation is None and plan.reservation is None
    assert o_head.reasons[0] == "pool p: 4 GPUs held + 16 asked > quota 16"
    assert o_later.ok  # nothing is reserved: it may take h1 (quota 4 + 8 ≤ 16)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000))
def test_the_next_pass_keeps_the_heads_reservation_no_later_and_never_relabels_it_quota(seed):
    """Random states and quotas: whatever a pass placed around (or backfilled on) the head's
    reservation, the next pass — nothing ended in between — still reserves for the head, from no
    later than before, and never calls it pending for ``quota``."""
    rng = random.Random(seed)
    loc = fat_tree(4, 4, gpus=4)  # 16 hosts, 64 GPUs
    hosts = sorted(loc.hosts)
    busy = {h: rng.randint(0, 4) for h in hosts}
    held0 = [
        HeldJob(
            1000 + n, 9, rng.choice([1, 2]), 100, False, float(rng.randint(100, 5000)), ((h, H100, busy[h]),)
        )
        for n, h in enumerate(hosts)
        if busy[h]
    ]
    inv = inventory(loc, {h: 4 - busy[h] for h in hosts})
    used1 = sum(k for h in held0 if h.pool_id == 1 for _, _, k in h.gpus)
    head_count = rng.choice([24, 32, 40])
    pools = {
        1: PoolInfo(1, "p", quota_gpus=used1 + head_count + rng.choice([0, 4, 8, 16]), used_gpus=used1),
        2: PoolInfo(2, "q", used_gpus=sum(k for h in held0 if h.pool_id == 2 for _, _, k in h.gpus)),
    }
    head = job(1, head_count, prio=900)
    later = [
        QueuedJob(i, 1 + i % 2, rng.choice([1, 2]), 500, count=rng.choice([1, 2, 4, 8]),
                  time_limit_s=float(rng.choice([50, 500, 5000, 50_000])), submitted=float(i))
        for i in range(2, 14)
    ]  # fmt: skip
    plan1 = plan_pass(loc, inv, [head, *later], pools=pools, held=held0, now=0.0)
    res = plan1.outcomes[0].reservation
    if res is None:
        return
    held1, pools1 = _carry(plan1, [head, *later], held0, pools, 0.0)
    placed = {o.job_id for o in plan1.outcomes if o.ok}
    head2 = job(1, head_count, prio=900, reserved_start=res.start)
    plan2 = plan_pass(
        loc, inv, [head2, *(q for q in later if q.job_id not in placed)], pools=pools1, held=held1, now=1.0
    )
    o = plan2.outcomes[0]
    assert o.code != "quota" and o.reservation is not None, (seed, o.code, o.reasons)
    assert o.reservation.start <= res.start, (seed, o.reservation, res)
