"""The bulk path of the allocation service (``pools.services.allocation.allocate_many``): one
transaction for a batch with the guarantees of ``allocate`` request by request — a GPU named
twice in the batch or already held goes to nobody twice, quotas and borrowed flags carried across
the batch, each refusal its own (the others are allocated), one audit entry, one event and one
on-commit signal per allocation; requests by count, MIG or fraction go through ``allocate``."""

from __future__ import annotations

import pytest

from accounts.models import AuditEntry
from events.models import Event
from pools.models import Allocation, AllocationItem, Gpu, Pool, Tenant
from pools.services.allocation import (
    AllocationRequest,
    InvalidRequest,
    NotEnoughFree,
    QuotaExceeded,
    allocate,
    allocate_many,
    pool_usage,
)
from pools.signals import allocation_changed
from tests.support.gpus import make_gpu_fabric

pytestmark = pytest.mark.backend  # bulk allocation rows (COPY / nextval on PostgreSQL)


@pytest.fixture
def setup(db):
    fabric = make_gpu_fabric("bulk", hosts=4, per_host=4)  # 16 GPUs
    a, b = Tenant.objects.create(name="a"), Tenant.objects.create(name="b")
    pa = Pool.objects.create(name="pa", tenant=a, quota_gpus=8, guaranteed_gpus=4, fabric=fabric)
    pb = Pool.objects.create(name="pb", tenant=b)
    ids = list(Gpu.objects.order_by("pk").values_list("pk", flat=True))
    return fabric, pa, pb, ids


def req(ids, job: str = "") -> AllocationRequest:
    return AllocationRequest(count=len(ids), gpu_ids=list(ids), job=job)


def test_a_gpu_named_twice_in_the_batch_or_already_held_is_given_once(
    setup, django_capture_on_commit_callbacks
):
    fabric, pa, pb, ids = setup
    held = allocate(pb.pk, req(ids[12:14]))
    seen = []
    allocation_changed.connect(lambda **kw: seen.append(kw), weak=False, dispatch_uid="bulk")
    try:
        with django_capture_on_commit_callbacks(execute=True):
            out = allocate_many(
                [
                    (pa.pk, req(ids[0:2], "j1")),
                    (pb.pk, req(ids[1:3], "j2")),  # ids[1] is j1's
                    (pb.pk, req([ids[3], ids[13]], "j3")),  # ids[13] is held outside the batch
                    (pb.pk, req(ids[4:6], "j4")),
                ]
            )
    finally:
        allocation_changed.disconnect(dispatch_uid="bulk")
    assert [type(r).__name__ for r in out] == ["Allocation", "NotEnoughFree", "NotEnoughFree", "Allocation"]
    assert out[1].details["gpus"] == [ids[1]] and out[2].details["gpus"] == [ids[13]]
    j1, j4 = out[0], out[3]
    assert sorted(j1.items.values_list("gpu_id", flat=True)) == ids[0:2]
    assert sorted(j4.items.values_list("gpu_id", flat=True)) == ids[4:6]
    assert (j1.pool_id, j1.job, j1.state, j4.pool_id) == (pa.pk, "j1", "active", pb.pk)
    # nothing of the refused ones was written: ids[2] and ids[3] are free, each GPU held once
    assert set(Gpu.objects.filter(state="allocated").values_list("pk", flat=True)) == {
        *ids[0:2],
        *ids[4:6],
        *ids[12:14],
    }
    active = list(AllocationItem.objects.filter(active=True).values_list("gpu_id", flat=True))
    assert len(active) == len(set(active)) == 6
    assert Allocation.objects.filter(state="active").count() == 3
    # one event, audit entry and signal per allocation
    created = Event.objects.filter(code="allocation.created").exclude(details__allocation=held.pk)
    assert sorted(e.details["allocation"] for e in created) == sorted([j1.pk, j4.pk])
    assert all(e.fabric_id == fabric.pk for e in created)
    audits = AuditEntry.objects.filter(action="allocation.create").exclude(object_id=str(held.pk))
    assert sorted(int(a.object_id) for a in audits) == sorted([j1.pk, j4.pk])
    assert {a.object_id: a.changes["gpus"] for a in audits} == {str(j1.pk): ids[0:2], str(j4.pk): ids[4:6]}
    assert sorted((s["allocation_id"], s["state"], s["gpu_ids"]) for s in seen) == sorted(
        [(j1.pk, "active", ids[0:2]), (j4.pk, "active", ids[4:6])]
    )


def test_quota_and_borrowed_flags_are_carried_across_the_batch(setup):
    _, pa, pb, ids = setup
    allocate(pa.pk, req(ids[0:1]))  # 1 held: quota 8, guaranteed 4
    out = allocate_many(
        [
            (pa.pk, req(ids[1:4])),  # 1 + 3 = 4: guaranteed
            (pa.pk, req(ids[4:7])),  # 7: borrowed (above the guaranteed 4)
            (pa.pk, req(ids[7:9])),  # 9 > quota 8: refused
            (pb.pk, req(ids[9:11])),  # another pool (no quota): not affected
            (pa.pk, req(ids[11:12])),  # 8: still within the quota after the refusal
        ]
    )
    assert isinstance(out[2], QuotaExceeded)
    assert out[2].as_dict() | {"detail": ""} == {
        "detail": "", "code": "quota_exceeded", "unit": "gpus", "quota": 8, "used": 7, "requested": 2,
    }  # fmt: skip
    # pb guarantees nothing: all it holds is borrowed
    assert [r.borrowed for i, r in enumerate(out) if i != 2] == [False, True, True, True]
    assert list(out[1].items.order_by("gpu_id").values_list("borrowed", flat=True)) == [True, True, True]
    assert pool_usage(pa.pk) == {"gpus": 8, "slices": 0, "borrowed_gpus": 4, "borrowed_slices": 0}
    assert not Gpu.objects.filter(pk__in=ids[7:9], state="allocated").exists()


def test_other_kinds_bad_requests_and_missing_pools_are_refused_one_by_one(setup):
    _, pa, pb, ids = setup
    out = allocate_many(
        [
            (pb.pk, AllocationRequest(count=2)),  # by count: through allocate
            (pb.pk, AllocationRequest(kind="fraction", memory_mib=1000, compute_pct=10)),
            (pb.pk, AllocationRequest(count=0)),  # invalid
            (999999, req(ids[14:15])),  # no such pool
            (pa.pk, AllocationRequest(count=9)),  # by count, over pa's quota
            (pa.pk, req([ids[0], 10**9])),  # an unknown GPU
        ]
    )
    assert isinstance(out[0], Allocation) and out[0].count == 2
    assert isinstance(out[1], Allocation) and out[1].kind == "fraction"
    assert isinstance(out[2], InvalidRequest) and out[2].details["field"] == "count"
    assert isinstance(out[3], InvalidRequest) and out[3].details["field"] == "pool"
    assert isinstance(out[4], QuotaExceeded)
    assert isinstance(out[5], InvalidRequest) and out[5].details["field"] == "gpu_ids"
    assert Allocation.objects.filter(state="active").count() == 2
    assert not isinstance(out[0], NotEnoughFree)
