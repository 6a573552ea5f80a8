"""Tenants do not see each other through events (issue 22): job and allocation events carry their
tenant (``Event.tenant_id``, written by the services that record them) and a tenant member reads
the fabric-wide events and their own tenants' only — through the API, the events page and the
UFM-compatible events — a host agent the fabric-wide ones only; fabric-wide staff (Admins, users
of no tenant) read everything."""

from __future__ import annotations

import base64

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from rest_framework.test import APIClient

from accounts.roles import set_role
from events.models import Event
from events.services import EventSpec, record_events
from pools.api.permissions import AGENT_GROUP
from pools.models import Pool, Tenant, TenantMembership
from pools.services.allocation import AllocationRequest, allocate, release
from scheduler.services.queue import JobSpec, submit
from tests.support.gpus import make_gpu_fabric

pytestmark = pytest.mark.django_db


@pytest.fixture
def two(users):
    fabric = make_gpu_fabric("g", hosts=2, per_host=2)
    a, b = Tenant.objects.create(name="tenant-a"), Tenant.objects.create(name="tenant-b")
    pa = Pool.objects.create(name="pool-alpha", tenant=a, fabric=fabric, quota_gpus=2)
    pb = Pool.objects.create(name="pool-bravo", tenant=b, fabric=fabric, quota_gpus=2)
    alloc_a = allocate(pa.pk, AllocationRequest(count=1, job="alpha-run"), user=users["admin"])
    alloc_b = allocate(pb.pk, AllocationRequest(count=1, job="bravo-run"), user=users["admin"])
    release(alloc_b.pk, user=users["admin"])
    job_b = submit(JobSpec(name="bravo-secret-job", pool_id=pb.pk, count=1), user=users["admin"])
    record_events(fabric, [EventSpec(code="gpu.appeared", message="gpu0001 GPU9 appeared", object_type="gpu",
                                     object_key="GPU-x")])  # fmt: skip
    people = {}
    for name, tenant in (("member-a", a), ("member-b", b), ("staff", None), ("agent", None)):
        user = get_user_model().objects.create_user(name, password=f"pw-{name}-Long-1")
        set_role(user, "viewer")
        if tenant:
            TenantMembership.objects.create(tenant=tenant, user=user, role="viewer")
        if name == "agent":
            user.groups.add(Group.objects.get_or_create(name=AGENT_GROUP)[0])
        people[name] = user
    return {"a": a, "b": b, "alloc_a": alloc_a, "alloc_b": alloc_b, "job_b": job_b, "people": people}


def test_services_write_the_tenant_of_job_and_allocation_events(two):
    a, b = two["a"], two["b"]
    by_code = {}
    for code, tenant_id in Event.objects.values_list("code", "tenant_id"):
        by_code.setdefault(code, set()).add(tenant_id)
    assert by_code["allocation.created"] == {a.pk, b.pk}
    assert by_code["allocation.released"] == {b.pk}
    assert by_code["job.submitted"] == {b.pk}
    assert by_code["gpu.appeared"] == {None}


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_events_api_page_and_ufm_events_are_tenant_scoped(two, admin):
    a, b, people = two["a"], two["b"], two["people"]
    every = set(Event.objects.values_list("pk", flat=True))
    tenant_of = dict(Event.objects.values_list("pk", "tenant_id"))
    expect = {
        "member-a": {pk for pk in every if tenant_of[pk] in (None, a.pk)},
        "member-b": {pk for pk in every if tenant_of[pk] in (None, b.pk)},
        "agent": {pk for pk in every if tenant_of[pk] is None},
        "staff": every,
    }
    for name, ids in expect.items():
        body = _api(people[name]).get("/api/fabric/events/", {"limit": 1000}).json()
        assert {e["id"] for e in body["results"]} == ids, name
    assert {e["id"] for e in admin.get("/api/fabric/events/", {"limit": 1000}).json()["results"]} == every
    foreign = Event.objects.filter(tenant_id=b.pk).first()
    assert _api(people["member-a"]).get(f"/api/fabric/events/{foreign.pk}/").status_code == 404
    # the events page
    page = Client()
    page.force_login(people["member-a"])
    html = page.get("/events/").content.decode()
    assert "pool-alpha" in html and "pool-bravo" not in html and "bravo-secret-job" not in html
    page.force_login(people["staff"])
    assert "bravo-secret-job" in page.get("/events/").content.decode()
    # the UFM-compatible events (HTTP Basic)
    auth = "Basic " + base64.b64encode(b"member-a:pw-member-a-Long-1").decode()
    ufm = Client(HTTP_AUTHORIZATION=auth).get("/ufmRest/app/events")
    assert ufm.status_code == 200, ufm.content
    text = ufm.content.decode()
    assert "pool-alpha" in text and "pool-bravo" not in text and "bravo-secret-job" not in text
