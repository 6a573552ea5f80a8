"""The job queue's API: tenant scoping (another tenant's job is a 404), roles and memberships,
400s that name the field, the queue in pass order with its reasons, decisions, and the OpenAPI
description of the scheduler endpoints."""

from __future__ import annotations

import pytest
from django.urls import include, path

from pools.models import Pool, Tenant, TenantMembership
from scheduler.models import Job, TenantShare
from scheduler.services.queue import JobSpec, run_pass, submit
from tests.support.jobs import gpu_cluster


@pytest.fixture
def setup(db, users):
    c = gpu_cluster(2, 2, 8)  # 32 GPUs, tenant t-jobs with pool p-jobs
    other = Tenant.objects.create(name="t-other")
    other_pool = Pool.objects.create(name="p-other", tenant=other, fabric=c.fabric)
    TenantMembership.objects.create(tenant=c.tenant, user=users["operator"], role="operator")
    TenantMembership.objects.create(tenant=c.tenant, user=users["viewer"], role="viewer")
    return c, other, other_pool


def body(pool, **kw):
    return {"name": kw.pop("name", "train"), "pool": pool.pk, "count": kw.pop("count", 8), **kw}


def test_submit_read_and_scoping(setup, client_for, users):
    c, other, other_pool = setup
    op = client_for("operator")
    resp = op.post(
        "/api/scheduler/jobs/",
        body(c.pool, tier="block", tier_mode="required", time_limit_s=3600),
        format="json",
    )
    assert resp.status_code == 201, resp.content
    job = resp.json()
    assert (job["state"], job["tier"], job["tier_name"], job["tenant"]["name"], job["owner"]) == (
        "pending", 2, "block", "t-jobs", users["operator"].username,
    )  # fmt: skip
    assert job["request"] == "8 GPUs, within one block (required)"
    assert (job["preemptible"], job["requeue"], job["preemptions"]) == (False, False, 0)
    # requeue defaults to preemptible, and may be asked for either way
    for extra, want in (({"preemptible": True}, True), ({"preemptible": True, "requeue": False}, False),
                        ({"requeue": True}, True)):  # fmt: skip
        resp = op.post("/api/scheduler/jobs/", body(c.pool, name="rq", **extra), format="json")
        assert resp.status_code == 201 and resp.json()["requeue"] is want, (extra, resp.content)
        Job.objects.filter(pk=resp.json()["id"]).delete()
    # another tenant's job does not exist for the operator (404), nor in their lists
    theirs = submit(JobSpec(name="secret", pool_id=other_pool.pk, count=1))
    assert op.get(f"/api/scheduler/jobs/{theirs.pk}/").status_code == 404
    assert op.post(f"/api/scheduler/jobs/{theirs.pk}/cancel/", {}, format="json").status_code == 404
    assert [j["id"] for j in op.get("/api/scheduler/jobs/").json()["results"]] == [job["id"]]
    admin = client_for("admin")
    assert admin.get("/api/scheduler/jobs/").json()["count"] == 2
    # a pool of another tenant cannot be named at submit
    resp = op.post("/api/scheduler/jobs/", body(other_pool), format="json")
    assert (resp.status_code, resp.json()) == (400, {"pool": [f"no pool {other_pool.pk}"]})
    # filters
    assert op.get("/api/scheduler/jobs/", {"state": "placed"}).json()["count"] == 0
    assert op.get("/api/scheduler/jobs/", {"tenant_name": "t-jobs", "state": "pending"}).json()["count"] == 1


def test_roles_and_memberships(setup, client_for, users):
    c, other, other_pool = setup
    viewer = client_for("viewer")
    resp = viewer.post("/api/scheduler/jobs/", body(c.pool), format="json")
    assert resp.status_code == 403
    # an Operator who is only a viewer of the tenant reads but may not submit or cancel
    TenantMembership.objects.filter(user=users["operator"]).update(role="viewer")
    op = client_for("operator")
    resp = op.post("/api/scheduler/jobs/", body(c.pool), format="json")
    assert resp.status_code == 403 and "operator membership" in resp.json()["detail"]
    job = submit(JobSpec(name="mine", pool_id=c.pool.pk, count=1))
    assert viewer.get(f"/api/scheduler/jobs/{job.pk}/").status_code == 200
    resp = op.post(f"/api/scheduler/jobs/{job.pk}/cancel/", {}, format="json")
    assert resp.status_code == 403
    assert Job.objects.get(pk=job.pk).state == "pending"
    assert not Job.objects.exclude(pk=job.pk).exists()


@pytest.mark.parametrize(
    "extra, field, text",
    [
        ({"tier": "rack", "tier_mode": "required"}, "tier", "unknown tier 'rack'"),
        ({"tier": "9"}, "tier", "unknown tier 9"),
        (
            {"segments": 2, "segment_hosts": 1, "segment_tier": "row", "gpus_per_host": 4},
            "segment_tier",
            "unknown tier 'row'",
        ),
        ({"gpus_per_host": 3}, "gpus_per_host", "not a multiple"),
        ({"kind": "fraction", "count": 1}, "memory_mib", "memory_mib"),
        ({"priority_class": "vip"}, "priority_class", "is not a valid choice"),
        ({"count": 0}, "count", "greater than or equal to 1"),
    ],
)
def test_bad_submits_are_400_naming_the_field(setup, client_for, extra, field, text):
    c, _, _ = setup
    resp = client_for("operator").post("/api/scheduler/jobs/", body(c.pool, **extra), format="json")
    assert resp.status_code == 400, resp.content
    assert list(resp.json()) == [field] and text in resp.json()[field][0]
    assert not Job.objects.exists()


def test_cancel_start_finish_and_409(setup, client_for):
    c, _, _ = setup
    op = client_for("operator")
    job = op.post("/api/scheduler/jobs/", body(c.pool, count=4), format="json").json()
    resp = op.post(f"/api/scheduler/jobs/{job['id']}/start/", format="json")
    assert (
        resp.status_code == 409 and resp.json()["code"] == "wrong_state" and resp.json()["state"] == "pending"
    )
    run_pass()
    placed = op.get(f"/api/scheduler/jobs/{job['id']}/").json()
    assert placed["state"] == "placed" and sum(placed["placement"].values()) == 4
    assert placed["allocation"]["state"] == "active" and placed["decision"]["code"] == "placed"
    assert op.post(f"/api/scheduler/jobs/{job['id']}/start/", format="json").json()["state"] == "running"
    done = op.post(
        f"/api/scheduler/jobs/{job['id']}/finish/", {"ok": True, "reason": "exit 0"}, format="json"
    ).json()
    assert (done["state"], done["reason"], done["allocation"]["state"]) == ("completed", "exit 0", "released")
    resp = op.post(f"/api/scheduler/jobs/{job['id']}/cancel/", {}, format="json")
    assert resp.status_code == 409 and resp.json()["state"] == "completed"


def test_queue_in_pass_order_with_reasons_and_decisions(setup, client_for, users):
    c, other, other_pool = setup
    TenantMembership.objects.create(tenant=other, user=users["viewer"], role="viewer")
    Pool.objects.filter(pk=c.pool.pk).update(quota_gpus=16)
    TenantShare.objects.create(tenant=c.tenant, weight=1)
    big = submit(JobSpec(name="big", pool_id=c.pool.pk, count=24))  # over quota
    low = submit(JobSpec(name="low", pool_id=other_pool.pk, count=24, priority_class="batch"))
    high = submit(JobSpec(name="high", pool_id=other_pool.pk, count=32, priority_class="high"))
    run_pass()
    viewer = client_for("viewer")
    rows = viewer.get("/api/scheduler/queue/").json()
    assert rows["count"] == 2  # high was placed; big and low wait
    (first, second) = rows["results"]
    assert (first["job"]["id"], first["position"], first["pending_code"]) == (big.pk, 0, "quota")
    assert first["reasons"][0] == "pool p-jobs: 0 GPUs held + 24 asked > quota 16"
    assert (second["job"]["id"], second["priority_class"], second["pending_code"]) == (
        low.pk,
        "batch",
        "capacity",
    )
    assert second["reasons"][0] == "24 GPUs asked, 0 free in the best eligible fabric"
    assert second["reserved_hosts"] == [] or second["reserved_start"] is not None
    # the operator only sees their tenant's entries, with the global position
    mine = client_for("operator").get("/api/scheduler/queue/").json()
    assert [(r["job"]["id"], r["position"]) for r in mine["results"]] == [(big.pk, 0)]
    assert viewer.get("/api/scheduler/queue/", {"pool": other_pool.pk}).json()["count"] == 1
    assert viewer.get("/api/scheduler/queue/", {"pool": "x"}).status_code == 400
    # decisions: why the high job went where it went
    decisions = viewer.get("/api/scheduler/decisions/", {"job": high.pk}).json()["results"]
    (placed,) = decisions
    assert placed["code"] == "placed" and placed["reasons"][0].startswith("placed 32 GPUs on 4 hosts")
    assert placed["details"]["lower_bound"] == 2 and placed["details"]["tier_name"] == "block"
    # another tenant's decisions are 404 to the operator
    assert client_for("operator").get(f"/api/scheduler/decisions/{placed['id']}/").status_code == 404


def test_openapi_schema_of_scheduler_endpoints_has_no_warnings(db, capsys):
    from drf_spectacular.drainage import GENERATOR_STATS
    from drf_spectacular.generators import SchemaGenerator

    GENERATOR_STATS.reset()
    capsys.readouterr()
    generator = SchemaGenerator(patterns=[path("api/scheduler/", include("scheduler.api.urls"))])
    schema = generator.get_schema(request=None, public=True)
    emitted = capsys.readouterr().err
    assert not GENERATOR_STATS, emitted
    for p in ("/api/scheduler/jobs/", "/api/scheduler/jobs/{id}/cancel/", "/api/scheduler/jobs/{id}/finish/",
              "/api/scheduler/jobs/{id}/start/", "/api/scheduler/queue/", "/api/scheduler/decisions/"):  # fmt: skip
        assert p in schema["paths"], p
    submit_body = schema["components"]["schemas"]["SubmitJob"]["properties"]
    assert {"tier", "tier_mode", "segments", "priority_class", "time_limit_s"} <= set(submit_body)
    submit_op = schema["paths"]["/api/scheduler/jobs/"]["post"]
    assert set(submit_op["responses"]) == {"200", "201", "400", "401", "403", "409", "415"}
    assert [(p["name"], p["in"]) for p in submit_op["parameters"]] == [("Idempotency-Key", "header")]


def test_fair_share_weight_in_the_admin_is_audited_and_jobs_are_read_only(setup, django_user_model):
    from django.test import Client

    from accounts.models import AuditEntry

    c, _, _ = setup
    root = django_user_model.objects.create_superuser("root", "root@example.org", "pw")
    client = Client()
    client.force_login(root)
    resp = client.post("/admin/scheduler/tenantshare/add/", {"tenant": c.tenant.pk, "weight": 4})
    assert resp.status_code == 302, resp.content[:500]
    share = TenantShare.objects.get(tenant=c.tenant)
    assert share.weight == 4
    entry = AuditEntry.objects.get(action="tenant_share.create")
    assert entry.changes == {"weight": [None, 4]} and entry.user == root
    job = submit(JobSpec(name="ro", pool_id=c.pool.pk, count=1))
    assert client.get(f"/admin/scheduler/job/{job.pk}/change/").status_code == 200  # view only
    resp = client.post(f"/admin/scheduler/job/{job.pk}/change/", {"name": "renamed"})
    assert resp.status_code == 403 and Job.objects.get(pk=job.pk).name == "ro"


def test_count_is_bounded_by_what_the_pool_can_ever_hold_with_a_400_naming_it(setup, client_for):
    """The old fixed cap (4,096) is gone: the bound is the pool's present GPUs matching its
    filters (and the job's model), whatever their state."""
    c, other, other_pool = setup
    op = client_for("operator")
    cases = [
        (dict(count=33), "count 33 is more than pool p-jobs can ever hold: 32 GPUs"),
        (dict(count=5000), "count 5000 is more than pool p-jobs can ever hold: 32 GPUs"),
        (dict(count=1, gpu_model="A100"), "count 1 is more than pool p-jobs can ever hold: 0 GPUs of model 'A100'"),
        (dict(kind="mig", mig_profile="1g.10gb", count=225), "count 225 is more than pool p-jobs can ever hold: 224 MIG slices"),
    ]  # fmt: skip
    for kw, text in cases:
        resp = op.post("/api/scheduler/jobs/", body(c.pool, **kw), format="json")
        assert resp.status_code == 400, (kw, resp.content)
        (message,) = resp.json()["count"]
        assert message.startswith(text), (kw, message)
    assert not Job.objects.exists()
    resp = op.post("/api/scheduler/jobs/", body(c.pool, count=32, gpus_per_host=8), format="json")
    assert resp.status_code == 201, resp.content
    # busy GPUs still count: the pool can hold them once they are free
    run_pass()
    assert Job.objects.get().state == "placed"
    resp = op.post("/api/scheduler/jobs/", body(c.pool, count=32, name="again"), format="json")
    assert resp.status_code == 201 and resp.json()["state"] == "pending"
    # segments and segment_hosts are bounded by their columns, naming the field
    resp = op.post(
        "/api/scheduler/jobs/",
        body(c.pool, count=8, gpus_per_host=8, segments=40000, segment_hosts=1, segment_tier="leaf"),
        format="json",
    )
    assert resp.status_code == 400 and "segments" in resp.json()


def test_a_gang_beyond_the_old_cap_is_a_valid_request():
    """8,000 GPUs as 100 segments of 10 hosts × 8, each in one leaf: the request's own checks
    accept it (only the pool's capacity bounds it at submit)."""
    spec = JobSpec(name="gang", pool_id=1, count=8000, gpus_per_host=8, segments=100, segment_hosts=10, segment_tier="leaf")  # fmt: skip
    assert spec.validate() == (None, 1)
