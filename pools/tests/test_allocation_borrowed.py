"""Borrowed accounting and reclaim in ``pools.services.allocation``: what a pool holds above its
guaranteed share is borrowed (oldest first stays guaranteed), re-marked when allocations end or the
guarantee changes; whole-GPU, MIG-slice and shared-fraction requests within the guarantee reclaim
borrowed allocations of other pools (lowest weight, newest first). Property tests: random
sequences never double-book, never pass a quota, keep the flags as the rule says, and honour the
guarantee whenever reclaiming can."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounts.models import AuditEntry
from events.models import Event
from pools.models import Allocation, AllocationItem, Gpu, MigSlice, Pool, Tenant
from pools.services import allocation as service
from pools.services.allocation import (
    AllocationError,
    AllocationRequest,
    NotEnoughFree,
    allocate,
    expire_leases,
    grant,  # the module allocate() runs in
    pool_usage,
    rebalance_borrowed,
    release,
)
from tests.support.gpus import make_gpu_fabric

from .invariants import check_invariants


def _flags(alloc: Allocation) -> list[bool]:
    return list(alloc.items.filter(active=True).order_by("pk").values_list("borrowed", flat=True))


def _mig(gpu: Gpu, profiles: list[str]) -> list[MigSlice]:
    """Turn ``gpu`` into a MIG GPU with one free slice per profile (test inventory)."""
    Gpu.objects.filter(pk=gpu.pk).update(mig_mode_current="enabled")
    return [
        MigSlice.objects.create(gpu=gpu, gpu_instance_id=n + 1, compute_instance_id=0, profile=p)
        for n, p in enumerate(profiles)
    ]


@pytest.fixture
def tenants(db):
    return [Tenant.objects.create(name=n) for n in ("a", "b", "c")]


# --- borrowed accounting -------------------------------------------------------------------------


def test_release_of_guaranteed_gpus_re_marks_the_newer_ones(tenants, users, admin):
    make_gpu_fabric("g", hosts=2, per_host=4)
    pool = Pool.objects.create(name="pa", tenant=tenants[0], quota_gpus=6, guaranteed_gpus=4)
    first = allocate(pool.pk, AllocationRequest(count=3))
    second = allocate(pool.pk, AllocationRequest(count=3))
    assert (_flags(first), _flags(second), second.borrowed) == ([False] * 3, [False, True, True], True)
    assert pool_usage(pool.pk)["borrowed_gpus"] == 2
    release(first.pk, user=users["operator"])
    second.refresh_from_db()
    assert (_flags(second), second.borrowed) == ([False] * 3, False)
    entry = AuditEntry.objects.get(action="allocation.released")
    assert entry.changes["remarked"] == {"borrowed": [], "guaranteed": [second.pk]}
    # the API reads the flags
    body = admin.get(f"/api/pools/allocations/{second.pk}/").json()
    assert body["borrowed"] is False and [i["borrowed"] for i in body["items"]] == [False] * 3
    assert admin.get(f"/api/pools/pools/{pool.pk}/").json()["usage"] | {"free_gpus": 0} == {
        "gpus": 3, "slices": 0, "borrowed_gpus": 0, "borrowed_slices": 0, "free_gpus": 0,
    }  # fmt: skip
    check_invariants()


def test_oldest_first_stays_guaranteed_through_release_and_expiry(tenants):
    make_gpu_fabric("g", hosts=1, per_host=4)
    pool = Pool.objects.create(name="pb", tenant=tenants[1], quota_gpus=4, guaranteed_gpus=2)
    now = timezone.now()
    x = allocate(pool.pk, AllocationRequest(count=1), now=now)
    y = allocate(pool.pk, AllocationRequest(count=1, lease_s=60), now=now)
    z = allocate(pool.pk, AllocationRequest(count=1), now=now)
    w = allocate(pool.pk, AllocationRequest(count=1), now=now)
    assert [a.borrowed for a in (x, y, z, w)] == [False, False, True, True]
    release(x.pk)
    assert list(Allocation.objects.filter(pk__in=[y.pk, z.pk, w.pk]).order_by("pk").values_list("borrowed", flat=True)) == [
        False, False, True,
    ]  # fmt: skip
    assert expire_leases(now + timedelta(seconds=61)) == {"expired": 1}
    assert list(Allocation.objects.filter(pk__in=[z.pk, w.pk]).order_by("pk").values_list("borrowed", flat=True)) == [
        False, False,
    ]  # fmt: skip
    entry = AuditEntry.objects.get(action="allocation.expired")
    assert entry.changes["remarked"] == {"borrowed": [], "guaranteed": [w.pk]}
    # a release of a borrowed allocation changes nothing else, and says nothing of re-marking
    last = allocate(pool.pk, AllocationRequest(count=1))
    assert last.borrowed
    release(last.pk)
    assert "remarked" not in AuditEntry.objects.filter(action="allocation.released").latest("pk").changes
    check_invariants()


def test_fractions_of_one_gpu_share_their_unit_and_its_place(tenants):
    make_gpu_fabric("g", hosts=1, per_host=2, memory_mib=40000)
    pool = Pool.objects.create(name="p", tenant=tenants[0], quota_gpus=2, guaranteed_gpus=1)
    f1 = allocate(pool.pk, AllocationRequest(kind="fraction", memory_mib=10000, compute_pct=25))
    whole = allocate(pool.pk, AllocationRequest(count=1))
    f3 = allocate(pool.pk, AllocationRequest(kind="fraction", memory_mib=10000, compute_pct=25))
    shared_gpu = f1.items.get().gpu_id
    assert f3.items.get().gpu_id == shared_gpu  # packed on the GPU the pool already shares
    assert [f1.borrowed, whole.borrowed, f3.borrowed] == [False, True, False]
    assert pool_usage(pool.pk) == {"gpus": 2, "slices": 0, "borrowed_gpus": 1, "borrowed_slices": 0}
    # the shared GPU's place was f1's; without f1 it is f3's, after the whole GPU
    release(f1.pk)
    whole.refresh_from_db()
    f3.refresh_from_db()
    assert (whole.borrowed, f3.borrowed) == (False, True)
    assert pool_usage(pool.pk)["borrowed_gpus"] == 1
    check_invariants()


def test_a_guarantee_changed_through_the_api_re_marks_the_pool(tenants, admin):
    make_gpu_fabric("g", hosts=2, per_host=4)
    pool = Pool.objects.create(name="pa", tenant=tenants[0], quota_gpus=8, guaranteed_gpus=4)
    first = allocate(pool.pk, AllocationRequest(count=3))
    second = allocate(pool.pk, AllocationRequest(count=3))
    r = admin.patch(f"/api/pools/pools/{pool.pk}/", {"guaranteed_gpus": 6}, format="json")
    assert r.status_code == 200 and r.json()["usage"]["borrowed_gpus"] == 0
    assert _flags(second) == [False] * 3
    entry = AuditEntry.objects.get(action="pool.borrowed")
    assert (
        entry.changes == {"remarked": {"borrowed": [], "guaranteed": [second.pk]}} and entry.username == "ada"
    )
    r = admin.patch(f"/api/pools/pools/{pool.pk}/", {"guaranteed_gpus": 2}, format="json")
    assert r.json()["usage"]["borrowed_gpus"] == 4
    assert (_flags(first), _flags(second)) == ([False, False, True], [True] * 3)
    assert rebalance_borrowed(pool.pk) == {}  # already right: nothing written, nothing audited
    assert AuditEntry.objects.filter(action="pool.borrowed").count() == 2
    check_invariants()


# --- reclaim -------------------------------------------------------------------------------------


def test_whole_gpu_reclaim_locks_the_victims_pool_in_a_second_round(tenants, monkeypatch):
    make_gpu_fabric("g", hosts=1, per_host=4)
    borrower = Pool.objects.create(name="low", tenant=tenants[1], quota_gpus=4, priority_weight=1)
    owner = Pool.objects.create(name="owner", tenant=tenants[0], quota_gpus=4, guaranteed_gpus=2)
    victim = allocate(borrower.pk, AllocationRequest(count=2))
    allocate(borrower.pk, AllocationRequest(count=2))
    rounds: list[list[int]] = []
    lock = grant.lock_pools
    monkeypatch.setattr(grant, "lock_pools", lambda ids: rounds.append(sorted(ids)) or lock(ids))
    monkeypatch.setattr(grant, "_LOCK_ROUNDS", 1)  # one round: may reclaim only from pools it holds
    with pytest.raises(NotEnoughFree):
        allocate(owner.pk, AllocationRequest(count=2))
    assert rounds == [[owner.pk]] and not Allocation.objects.filter(state="reclaimed").exists()
    monkeypatch.setattr(grant, "_LOCK_ROUNDS", 3)
    rounds.clear()
    got = allocate(owner.pk, AllocationRequest(count=2))
    assert rounds == [[owner.pk], sorted([owner.pk, borrower.pk])]
    assert Allocation.objects.filter(state="reclaimed").get().pk != victim.pk  # the newest went
    assert got.state == "active" and not got.borrowed
    check_invariants()


def test_mig_request_reclaims_borrowed_slices_lowest_weight_newest_first(tenants, users):
    make_gpu_fabric("g", hosts=1, per_host=2)
    g0, g1 = Gpu.objects.order_by("pk")
    _mig(g0, ["1g.10gb"] * 4)
    _mig(g1, ["3g.40gb"] * 2)
    owner = Pool.objects.create(name="owner", tenant=tenants[0], quota_slices=4, guaranteed_slices=2,
                                priority_weight=5)  # fmt: skip
    low = Pool.objects.create(name="low", tenant=tenants[1], quota_slices=4, priority_weight=1)
    high = Pool.objects.create(name="high", tenant=tenants[2], quota_slices=4, priority_weight=3)
    h1 = allocate(high.pk, AllocationRequest(kind="mig", mig_profile="1g.10gb"))
    l1 = allocate(low.pk, AllocationRequest(kind="mig", mig_profile="1g.10gb"))
    l2 = allocate(low.pk, AllocationRequest(kind="mig", mig_profile="1g.10gb"))
    l3 = allocate(low.pk, AllocationRequest(kind="mig", mig_profile="3g.40gb"))  # newest, other profile
    assert all(a.borrowed for a in (h1, l1, l2, l3))
    got = allocate(
        owner.pk, AllocationRequest(kind="mig", count=2, mig_profile="1g.10gb"), user=users["operator"]
    )
    states = dict(Allocation.objects.filter(pk__in=[h1.pk, l1.pk, l2.pk, l3.pk]).values_list("pk", "state"))
    assert states == {h1.pk: "active", l1.pk: "active", l2.pk: "reclaimed", l3.pk: "active"}
    l2.refresh_from_db()
    assert (
        l2.end_reason == "reclaimed for the guaranteed share of another tenant's pool"
        and l2.ended_at is not None
    )
    assert got.items.count() == 2 and not got.borrowed
    assert set(got.items.values_list("mig_slice__profile", flat=True)) == {"1g.10gb"}
    assert Event.objects.get(code="allocation.reclaimed").details["allocation"] == l2.pk
    assert Event.objects.filter(code="allocation.created").latest("pk").details["reclaimed"] == [l2.pk]
    entry = AuditEntry.objects.get(action="allocation.reclaimed")
    assert entry.object_id == str(l2.pk) and entry.user == users["operator"]
    # above its guarantee the owner reclaims nothing
    with pytest.raises(NotEnoughFree):
        allocate(owner.pk, AllocationRequest(kind="mig", count=1, mig_profile="1g.10gb"))
    assert Allocation.objects.filter(state="reclaimed").count() == 1
    check_invariants()


def test_fraction_request_reclaims_the_lowest_weight_borrowed_fraction(tenants):
    make_gpu_fabric("g", hosts=1, per_host=2, memory_mib=40000)
    owner = Pool.objects.create(
        name="owner", tenant=tenants[0], quota_gpus=2, guaranteed_gpus=1, priority_weight=5
    )
    low = Pool.objects.create(name="low", tenant=tenants[1], quota_gpus=2, priority_weight=1)
    high = Pool.objects.create(name="high", tenant=tenants[2], quota_gpus=2, priority_weight=3)
    lf = allocate(low.pk, AllocationRequest(kind="fraction", memory_mib=30000, compute_pct=50))
    hf = allocate(high.pk, AllocationRequest(kind="fraction", memory_mib=30000, compute_pct=50))  # newer
    assert lf.items.get().gpu_id != hf.items.get().gpu_id
    got = allocate(owner.pk, AllocationRequest(kind="fraction", memory_mib=20000, compute_pct=30))
    lf.refresh_from_db()
    hf.refresh_from_db()
    assert (lf.state, hf.state) == ("reclaimed", "active")  # lower weight first, newer or not
    assert got.items.get().gpu_id == lf.items.get().gpu_id and not got.borrowed
    assert Gpu.objects.get(pk=got.items.get().gpu_id).state == "shared"
    # not within the guarantee: the owner's second fraction GPU would be borrowed, no reclaim
    with pytest.raises(NotEnoughFree):
        allocate(owner.pk, AllocationRequest(kind="fraction", memory_mib=30000, compute_pct=10))
    assert hf.items.filter(active=True).exists()
    check_invariants()


def test_fraction_request_reclaims_a_borrowed_whole_gpu(tenants):
    make_gpu_fabric("g", hosts=1, per_host=2, memory_mib=40000)
    owner = Pool.objects.create(name="owner", tenant=tenants[0], quota_gpus=1, guaranteed_gpus=1)
    low = Pool.objects.create(name="low", tenant=tenants[1], quota_gpus=2)
    older = allocate(low.pk, AllocationRequest(count=1))
    newer = allocate(low.pk, AllocationRequest(count=1))
    got = allocate(owner.pk, AllocationRequest(kind="fraction", memory_mib=8000, compute_pct=10))
    states = dict(Allocation.objects.filter(pk__in=[older.pk, newer.pk]).values_list("pk", "state"))
    assert states == {older.pk: "active", newer.pk: "reclaimed"}
    gpu = got.items.get().gpu_id
    assert gpu == newer.items.get().gpu_id and Gpu.objects.get(pk=gpu).state == "shared"
    check_invariants()


# --- properties ----------------------------------------------------------------------------------

POOL = st.integers(0, 2)
GPU_OP = st.tuples(st.just("gpu"), POOL, st.integers(1, 2), st.sampled_from([None, 5, 20]))
MIG_OP = st.tuples(st.just("mig"), POOL, st.integers(1, 2), st.sampled_from(["1g.10gb", "3g.40gb", ""]))
FRACTION_OP = st.tuples(
    st.just("fraction"), POOL, st.sampled_from([8000, 16000, 30000]), st.sampled_from([10, 60])
)
OPS = st.lists(
    st.one_of(  # allocations weigh more than the rest: pools fill up, borrow, and reclaim
        GPU_OP,
        GPU_OP,
        MIG_OP,
        MIG_OP,
        FRACTION_OP,
        st.tuples(st.just("release"), st.integers(0, 30)),
        st.tuples(st.just("expire")),
        st.tuples(st.just("guarantee"), POOL, st.integers(0, 3), st.integers(0, 2)),
    ),  # fmt: skip
    min_size=6,
    max_size=30,
)


def _reclaimable(pool: Pool, kind: str, profile: str = "") -> int:
    """Units ``pool`` could get now by count: free ones plus those in other pools' borrowed
    allocations of ``kind`` (what reclaiming may free)."""
    gpus = service.eligible_gpus(pool)
    if kind == "gpu":
        usable = gpus.filter(mig_mode_current__in=["disabled", "unsupported"])
        free = usable.filter(state="free").count()
        items = AllocationItem.objects.filter(active=True, kind="gpu", gpu__in=usable)
    else:
        usable = MigSlice.objects.present().filter(gpu__in=gpus)
        usable = usable.filter(profile=profile) if profile else usable
        free = usable.filter(state="free").count()
        items = AllocationItem.objects.filter(active=True, kind="mig", mig_slice__in=usable)
    return free + items.filter(allocation__borrowed=True).exclude(allocation__pool=pool).count()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_random_sequences_keep_every_invariant(db, ops):
    """Any sequence: nothing double-booked, no quota passed, flags as the rule says (after each
    step), and a request by count within the guarantee that reclaiming could serve is served."""
    with transaction.atomic():
        make_gpu_fabric("prop", hosts=1, per_host=4, memory_mib=40000)  # 3 whole GPUs and a MIG one
        _mig(Gpu.objects.order_by("pk").last(), ["1g.10gb"] * 4 + ["3g.40gb"])
        tenants = [Tenant.objects.create(name=f"t{n}") for n in range(3)]
        pools = [
            Pool.objects.create(name="p0", tenant=tenants[0], quota_gpus=3, guaranteed_gpus=2, quota_slices=3,
                                guaranteed_slices=2, priority_weight=3),
            Pool.objects.create(name="p1", tenant=tenants[1], quota_gpus=3, guaranteed_gpus=1, quota_slices=4,
                                guaranteed_slices=1, priority_weight=1),
            Pool.objects.create(name="p2", tenant=tenants[2], guaranteed_gpus=0, priority_weight=2),
        ]  # fmt: skip
        now = timezone.now()
        made: list[int] = []
        for op in ops:
            now += timedelta(seconds=1)
            kind = op[0]
            if kind in ("gpu", "mig", "fraction"):
                pool = Pool.objects.get(pk=pools[op[1]].pk)
                if kind == "gpu":
                    req = AllocationRequest(count=op[2], lease_s=op[3])
                elif kind == "mig":
                    req = AllocationRequest(kind="mig", count=op[2], mig_profile=op[3])
                else:
                    req = AllocationRequest(kind="fraction", memory_mib=op[2], compute_pct=op[3])
                usage = pool_usage(pool.pk)
                entitled = None
                if kind == "gpu" and usage["gpus"] + op[2] <= pool.guaranteed_gpus:
                    entitled = _reclaimable(pool, "gpu") >= op[2]
                elif kind == "mig" and usage["slices"] + op[2] <= pool.guaranteed_slices:
                    entitled = _reclaimable(pool, "mig", op[3]) >= op[2]
                try:
                    made.append(allocate(pool.pk, req, now=now).pk)
                except AllocationError as exc:
                    assert not entitled, (op, exc.as_dict())  # the guarantee is honoured
            elif kind == "release" and made:
                try:
                    release(made[op[1] % len(made)], now=now)
                except AllocationError:
                    pass  # ended already (released, expired, reclaimed)
            elif kind == "expire":
                expire_leases(now + timedelta(seconds=30))
            elif kind == "guarantee":
                pool = pools[op[1]]
                Pool.objects.filter(pk=pool.pk).update(
                    guaranteed_gpus=min(op[2], pool.quota_gpus or op[2]), guaranteed_slices=min(op[3], pool.quota_slices or op[3])
                )  # fmt: skip
                rebalance_borrowed(pool.pk)
            check_invariants(pools, with_usage=False)
        check_invariants(pools)
        transaction.set_rollback(True)
