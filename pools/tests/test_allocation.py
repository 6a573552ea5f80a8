"""The allocation service (``pools.services.allocation``): whole GPUs, MIG slices and shared
fractions, quotas, guaranteed vs borrowed and reclaim, release and lease expiry, events, audit
and the on-commit signal. Concurrency on PostgreSQL: test_allocation_concurrency.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import AuditEntry
from events.models import Event
from pools.models import Allocation, AllocationItem, Gpu, MigSlice, Pool, Tenant
from pools.services.allocation import (
    AllocationRequest,
    InvalidRequest,
    NotEnoughFree,
    NotHolding,
    QuotaExceeded,
    allocate,
    expire_leases,
    pool_usage,
    release,
)
from pools.signals import allocation_changed
from tests.support.gpus import make_gpu_fabric

pytestmark = (
    pytest.mark.backend
)  # allocation: select_for_update and bulk inserts with ids (nextval on PostgreSQL)


@pytest.fixture
def setup(db):
    fabric = make_gpu_fabric("g", hosts=2, per_host=4)  # 8 GPUs
    a, b = Tenant.objects.create(name="a"), Tenant.objects.create(name="b")
    pa = Pool.objects.create(name="pa", tenant=a, quota_gpus=6, guaranteed_gpus=4, priority_weight=5)
    pb = Pool.objects.create(name="pb", tenant=b, quota_gpus=8, guaranteed_gpus=2, priority_weight=1)
    return fabric, a, b, pa, pb


def test_allocate_whole_gpus_event_audit_signal(setup, users, django_capture_on_commit_callbacks):
    _, a, _, pa, _ = setup
    seen = []
    allocation_changed.connect(lambda **kw: seen.append(kw), weak=False, dispatch_uid="t1")
    try:
        with django_capture_on_commit_callbacks(execute=True):
            alloc = allocate(pa.pk, AllocationRequest(count=3, job="slurm-42"), user=users["operator"])
    finally:
        allocation_changed.disconnect(dispatch_uid="t1")
    gpus = sorted(alloc.items.values_list("gpu_id", flat=True))
    assert (alloc.state, alloc.count, alloc.tenant_id, alloc.owner, alloc.borrowed) == (
        "active", 3, a.pk, users["operator"], False,
    )  # fmt: skip
    assert gpus == sorted(Gpu.objects.order_by("pk").values_list("pk", flat=True)[:3])
    assert Gpu.objects.filter(state="allocated").count() == 3
    ev = Event.objects.get(code="allocation.created")
    assert ev.details["gpus"] == gpus and ev.object_key == f"pa/{alloc.pk}" and ev.fabric_id == setup[0].pk
    entry = AuditEntry.objects.get(action="allocation.create")
    assert entry.user == users["operator"] and entry.changes["count"] == 3
    assert seen and seen[0]["allocation_id"] == alloc.pk and seen[0]["gpu_ids"] == gpus
    assert pool_usage(pa.pk) == {"gpus": 3, "slices": 0, "borrowed_gpus": 0, "borrowed_slices": 0}


def test_quota_refusal_changes_nothing(setup):
    _, _, _, pa, _ = setup
    allocate(pa.pk, AllocationRequest(count=5))
    with pytest.raises(QuotaExceeded) as exc:
        allocate(pa.pk, AllocationRequest(count=2))
    assert exc.value.as_dict() | {"detail": ""} == {
        "detail": "", "code": "quota_exceeded", "unit": "gpus", "quota": 6, "used": 5, "requested": 2,
    }  # fmt: skip
    assert Allocation.objects.count() == 1 and Gpu.objects.filter(state="allocated").count() == 5


def test_named_gpus_taken_is_409_unknown_is_400(setup):
    _, _, _, pa, pb = setup
    ids = list(Gpu.objects.order_by("pk").values_list("pk", flat=True))
    allocate(pa.pk, AllocationRequest(count=2, gpu_ids=ids[:2]))
    with pytest.raises(NotEnoughFree) as exc:
        allocate(pb.pk, AllocationRequest(count=2, gpu_ids=ids[1:3]))
    assert exc.value.details["gpus"] == [ids[1]]
    with pytest.raises(InvalidRequest):
        allocate(pb.pk, AllocationRequest(count=1, gpu_ids=[999999]))
    assert AllocationItem.objects.filter(active=True).count() == 2


@pytest.mark.parametrize(
    "req,field",
    [
        (AllocationRequest(count=0), "count"),
        (AllocationRequest(kind="tpu"), "kind"),
        (AllocationRequest(count=2, gpu_ids=[1]), "gpu_ids"),
        (AllocationRequest(kind="fraction", memory_mib=100, compute_pct=101), "compute_pct"),
        (AllocationRequest(lease_s=-1), "lease_s"),
        (AllocationRequest(memory_mib=5), "kind"),
    ],
)
def test_bad_input_is_400_with_field(setup, req, field):
    with pytest.raises(InvalidRequest) as exc:
        allocate(setup[3].pk, req)
    assert exc.value.status == 400 and exc.value.details["field"] == field


def test_not_enough_free(setup):
    _, _, _, pa, pb = setup
    allocate(pa.pk, AllocationRequest(count=5))  # 5 of 8, pa's guarantee (4) passed: 1 borrowed
    with pytest.raises(NotEnoughFree) as exc:
        allocate(pb.pk, AllocationRequest(count=4))  # above pb's guarantee (2): reclaims nothing
    assert (exc.value.details["requested"], exc.value.details["available"]) == (4, 3)
    assert Allocation.objects.filter(state="active").count() == 1


def test_borrowed_then_reclaimed_for_guaranteed_share(setup, django_capture_on_commit_callbacks):
    _, _, _, pa, pb = setup
    low = allocate(pb.pk, AllocationRequest(count=2))  # within pb's guarantee of 2
    borrowed = allocate(pb.pk, AllocationRequest(count=4))  # above it: borrowed
    assert (low.borrowed, borrowed.borrowed) == (False, True)
    assert pool_usage(pb.pk)["borrowed_gpus"] == 4
    allocate(pa.pk, AllocationRequest(count=2))  # the 2 free ones
    got = allocate(pa.pk, AllocationRequest(count=2))  # pa within guarantee (4): reclaims pb's borrowed
    borrowed.refresh_from_db()
    assert borrowed.state == "reclaimed" and borrowed.ended_at is not None
    assert not borrowed.items.filter(active=True).exists()
    assert got.state == "active" and pool_usage(pa.pk)["gpus"] == 4
    assert Event.objects.filter(code="allocation.reclaimed", details__allocation=borrowed.pk).count() == 1
    assert Gpu.objects.filter(state="allocated").count() == 6  # pb 2, pa 4; 2 free again
    # above its guarantee pa does not reclaim: pb's unborrowed allocation stays
    allocate(pa.pk, AllocationRequest(count=2))
    with pytest.raises(QuotaExceeded):
        allocate(pa.pk, AllocationRequest(count=1))
    low.refresh_from_db()
    assert low.state == "active"


def test_release_and_double_release(setup, users):
    _, _, _, pa, _ = setup
    alloc = allocate(pa.pk, AllocationRequest(count=2))
    release(alloc.pk, user=users["operator"])
    alloc.refresh_from_db()
    assert alloc.state == "released" and Gpu.objects.filter(state="free").count() == 8
    with pytest.raises(NotHolding):
        release(alloc.pk)
    assert Event.objects.filter(code="allocation.released").count() == 1


def test_lease_expiry_frees_gpus(setup):
    _, _, _, pa, _ = setup
    now = timezone.now()
    short = allocate(pa.pk, AllocationRequest(count=2, lease_s=60), now=now)
    allocate(pa.pk, AllocationRequest(count=1, lease_s=3600), now=now)
    assert expire_leases(now + timedelta(seconds=59)) == {"expired": 0}
    assert expire_leases(now + timedelta(seconds=61)) == {"expired": 1}
    short.refresh_from_db()
    assert short.state == "expired" and Gpu.objects.filter(state="allocated").count() == 1
    assert AuditEntry.objects.filter(action="allocation.expired", user=None).count() == 1


def test_shared_fractions_never_oversubscribed(setup):
    _, _, _, pa, pb = setup
    Gpu.objects.update(memory_total_mib=40000, memory_reserved_mib=0)
    first = allocate(pa.pk, AllocationRequest(kind="fraction", memory_mib=30000, compute_pct=50))
    gpu = first.items.get().gpu
    assert Gpu.objects.get(pk=gpu.pk).state == "shared"
    # 10,000 MiB fits on the same GPU (packing); 20,000 MiB does not, goes to another GPU
    second = allocate(pb.pk, AllocationRequest(kind="fraction", memory_mib=10000, compute_pct=50))
    third = allocate(pb.pk, AllocationRequest(kind="fraction", memory_mib=20000, compute_pct=10))
    assert second.items.get().gpu_id == gpu.pk and third.items.get().gpu_id != gpu.pk
    with pytest.raises(NotEnoughFree):  # compute full on gpu
        allocate(pb.pk, AllocationRequest(kind="fraction", memory_mib=1, compute_pct=1, gpu_ids=[gpu.pk]))
    with pytest.raises(NotEnoughFree):  # a shared GPU is not handed out whole
        allocate(pa.pk, AllocationRequest(count=1, gpu_ids=[gpu.pk]))
    assert pool_usage(pb.pk)["gpus"] == 2 and pool_usage(pa.pk)["gpus"] == 1
    release(first.pk)
    assert Gpu.objects.get(pk=gpu.pk).state == "shared"  # second still there
    release(second.pk)
    assert Gpu.objects.get(pk=gpu.pk).state == "free"


def test_mig_slices_and_slice_quota(setup):
    _, _, _, pa, _ = setup
    gpu = Gpu.objects.order_by("pk").first()
    Gpu.objects.filter(pk=gpu.pk).update(mig_mode_current="enabled")
    for gi in range(3):
        MigSlice.objects.create(gpu=gpu, gpu_instance_id=gi + 1, compute_instance_id=0, profile="2g.20gb")
    Pool.objects.filter(pk=pa.pk).update(quota_slices=2)
    alloc = allocate(pa.pk, AllocationRequest(kind="mig", count=2, mig_profile="2g.20gb"))
    assert MigSlice.objects.filter(state="allocated").count() == 2 and alloc.items.count() == 2
    with pytest.raises(QuotaExceeded):
        allocate(pa.pk, AllocationRequest(kind="mig", count=1))
    with pytest.raises(NotEnoughFree):  # a MIG GPU is not allocatable whole
        allocate(pa.pk, AllocationRequest(count=1, gpu_ids=[gpu.pk]))
    release(alloc.pk)
    assert MigSlice.objects.filter(state="free").count() == 3


def test_shared_pool_needs_a_tenant(setup):
    _, a, _, _, _ = setup
    shared = Pool.objects.create(name="shared")
    with pytest.raises(InvalidRequest):
        allocate(shared.pk, AllocationRequest(count=1))
    assert allocate(shared.pk, AllocationRequest(count=1, tenant_id=a.pk)).tenant_id == a.pk


def test_model_filter(setup):
    _, _, _, pa, _ = setup
    Pool.objects.filter(pk=pa.pk).update(gpu_model="a100")
    with pytest.raises(NotEnoughFree):
        allocate(pa.pk, AllocationRequest(count=1))


def test_expire_leases_task_is_the_service_and_on_beat(setup, settings):
    from pools.tasks import expire_leases_task

    _, _, _, pa, _ = setup
    allocate(pa.pk, AllocationRequest(count=1, lease_s=1), now=timezone.now() - timedelta(seconds=5))
    assert expire_leases_task() == {"expired": 1}
    assert Gpu.objects.filter(state="allocated").count() == 0
    entry = settings.CELERY_BEAT_SCHEDULE["allocation-leases"]
    assert entry["task"] == "pools.tasks.expire_leases_task"
    assert entry["schedule"].total_seconds() == settings.WEFT_LEASE_CHECK_INTERVAL_S
