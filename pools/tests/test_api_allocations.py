"""Tenant scoping of /api/pools/tenants|pools|allocations (another tenant's rows are 404), the
tenant-level operator right, and the HTTP form of the service's refusals (409 quota / not enough
free, 400 bad input). The generic role matrix is in tests/test_api_viewsets.py."""

from __future__ import annotations

import pytest

from pools.models import Allocation, Gpu, Pool, Tenant, TenantMembership
from tests.support.gpus import make_gpu_fabric


@pytest.fixture
def two_tenants(users):
    make_gpu_fabric("g", hosts=1, per_host=4)
    mine, theirs = Tenant.objects.create(name="mine"), Tenant.objects.create(name="theirs")
    TenantMembership.objects.create(tenant=mine, user=users["operator"], role="operator")
    TenantMembership.objects.create(tenant=mine, user=users["viewer"], role="operator")  # site Viewer
    p_mine = Pool.objects.create(name="p-mine", tenant=mine, quota_gpus=2)
    p_theirs = Pool.objects.create(name="p-theirs", tenant=theirs, quota_gpus=4)
    shared = Pool.objects.create(name="p-shared", quota_gpus=1)
    return mine, theirs, p_mine, p_theirs, shared


def test_other_tenants_rows_are_404(two_tenants, client_for, admin):
    mine, theirs, p_mine, p_theirs, shared = two_tenants
    r = admin.post("/api/pools/allocations/allocate/", {"pool": p_theirs.pk, "count": 1}, format="json")
    assert r.status_code == 201, r.content
    theirs_alloc = r.json()["id"]
    op = client_for("operator")
    assert [t["name"] for t in op.get("/api/pools/tenants/").json()["results"]] == ["mine"]
    assert {p["name"] for p in op.get("/api/pools/pools/").json()["results"]} == {"p-mine", "p-shared"}
    assert op.get(f"/api/pools/tenants/{theirs.pk}/").status_code == 404
    assert op.get(f"/api/pools/pools/{p_theirs.pk}/").status_code == 404
    assert op.get(f"/api/pools/allocations/{theirs_alloc}/").status_code == 404
    assert op.get("/api/pools/allocations/").json()["count"] == 0
    r = op.post(f"/api/pools/allocations/{theirs_alloc}/release/", {}, format="json")
    assert r.status_code == 404 and Allocation.objects.get(pk=theirs_alloc).state == "active"
    r = op.post("/api/pools/allocations/allocate/", {"pool": p_theirs.pk, "count": 1}, format="json")
    assert r.status_code == 404 and Allocation.objects.count() == 1


def test_operator_allocates_in_own_tenant_and_refusals(two_tenants, client_for):
    mine, theirs, p_mine, _, shared = two_tenants
    op = client_for("operator")
    r = op.post(
        "/api/pools/allocations/allocate/", {"pool": p_mine.pk, "count": 2, "job": "j1"}, format="json"
    )
    assert r.status_code == 201, r.content
    body = r.json()
    uuids = sorted(Gpu.objects.filter(state="allocated").values_list("uuid", flat=True))
    assert body["environment"] == [{"host": "gpu0001", "env": {"CUDA_VISIBLE_DEVICES": ",".join(uuids)}}]
    r = op.post("/api/pools/allocations/allocate/", {"pool": p_mine.pk, "count": 1}, format="json")
    assert r.status_code == 409 and r.json()["code"] == "quota_exceeded" and r.json()["quota"] == 2
    # the shared pool: the operator's one operator tenant is taken
    r = op.post("/api/pools/allocations/allocate/", {"pool": shared.pk, "count": 2}, format="json")
    assert r.status_code == 409 and r.json()["code"] == "quota_exceeded"
    r = op.post("/api/pools/allocations/allocate/", {"pool": shared.pk, "count": 1}, format="json")
    assert r.status_code == 201 and r.json()["tenant"]["name"] == "mine"
    r = op.post("/api/pools/allocations/allocate/", {"pool": p_mine.pk, "count": 0}, format="json")
    assert r.status_code == 400 and "count" in r.json()
    r = op.post("/api/pools/allocations/allocate/", {"pool": p_mine.pk, "kind": "fraction", "memory_mib": 5},
                format="json")  # fmt: skip
    assert r.status_code == 400 and r.json()["field"] == "compute_pct"
    alloc = Allocation.objects.filter(pool=p_mine).get()
    r = op.post(f"/api/pools/allocations/{alloc.pk}/release/", {"reason": "done"}, format="json")
    assert r.status_code == 200 and r.json()["state"] == "released" and r.json()["environment"] == []
    r = op.post(f"/api/pools/allocations/{alloc.pk}/release/", {}, format="json")
    assert r.status_code == 409 and r.json()["code"] == "not_holding"


def test_tenant_viewer_member_and_site_viewer_cannot_allocate(two_tenants, users, client_for):
    mine, _, p_mine, _, _ = two_tenants
    TenantMembership.objects.filter(user=users["operator"]).update(role="viewer")
    r = client_for("operator").post("/api/pools/allocations/allocate/", {"pool": p_mine.pk}, format="json")
    assert r.status_code == 403 and not Allocation.objects.exists()
    # a site Viewer with an operator membership: the lower right counts
    r = client_for("viewer").post("/api/pools/allocations/allocate/", {"pool": p_mine.pk}, format="json")
    assert r.status_code == 403 and not Allocation.objects.exists()
    assert client_for("viewer").get(f"/api/pools/pools/{p_mine.pk}/").json()["usage"]["free_gpus"] == 4


def test_pool_config_validation_and_delete_with_active_allocations(two_tenants, admin):
    mine, _, p_mine, _, _ = two_tenants
    r = admin.post("/api/pools/pools/", {"name": "bad", "quota_gpus": 2, "guaranteed_gpus": 3}, format="json")
    assert r.status_code == 400 and "guaranteed_gpus" in r.json()
    assert (
        admin.post("/api/pools/allocations/allocate/", {"pool": p_mine.pk}, format="json").status_code == 201
    )
    r = admin.delete(f"/api/pools/pools/{p_mine.pk}/")
    assert r.status_code == 409 and Pool.objects.filter(pk=p_mine.pk).exists()
    assert admin.delete(f"/api/pools/tenants/{mine.pk}/").status_code == 409


def test_a_tenant_that_is_not_the_pools_is_a_400_on_tenant_for_allocate_and_submit(two_tenants, admin):
    """Issue 22: allocate ignored a ``tenant`` that does not match the pool (the allocation went to
    the pool's tenant), where job submit refused it. Both refuse it now, naming the field."""
    from scheduler.models import Job

    mine, theirs, p_mine, _, shared = two_tenants
    r = admin.post("/api/pools/allocations/allocate/", {"pool": p_mine.pk, "count": 1, "tenant": theirs.pk},
                   format="json")  # fmt: skip
    assert r.status_code == 400, r.content
    assert r.json()["field"] == "tenant" and f"not tenant {theirs.pk}'s" in r.json()["detail"]
    r = admin.post("/api/scheduler/jobs/", {"name": "j", "pool": p_mine.pk, "count": 1, "tenant": theirs.pk},
                   format="json")  # fmt: skip
    assert r.status_code == 400 and "tenant" in r.json(), r.content  # {field: [message]}
    assert not Allocation.objects.exists() and not Job.objects.exists()
    # the pool's own tenant, or none, is accepted; a shared pool takes any tenant
    r = admin.post("/api/pools/allocations/allocate/", {"pool": p_mine.pk, "count": 1, "tenant": mine.pk},
                   format="json")  # fmt: skip
    assert r.status_code == 201 and r.json()["tenant"]["name"] == "mine"
    r = admin.post("/api/pools/allocations/allocate/", {"pool": shared.pk, "count": 1, "tenant": theirs.pk},
                   format="json")  # fmt: skip
    assert r.status_code == 201 and r.json()["tenant"]["name"] == "theirs"
