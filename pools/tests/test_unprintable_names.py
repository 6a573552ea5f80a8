"""Names with control characters or right-to-left overrides are refused (issue 22): a 400 naming
the field, from the API (serializers) and from the pages (forms), through the one validator
``core.validators.printable_text``; nothing is stored."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from accounts.models import ApiToken
from core.validators import first_unprintable, printable_text
from devices.models import Device
from fabric.models import Fabric, Partition
from pools.models import Allocation, Pool, Tenant
from scheduler.models import Job

RLO = "gpu-job\u202egnp.exe"  # reads "gpu-jobexe.png"
BAD = [RLO, "nul\x00", "line\nforged", "esc\x1b[31m", "zero\u200bwidth", "iso\u2066late", "sep\u2028"]


@pytest.mark.parametrize("value", BAD)
def test_the_validator_names_the_character_and_its_position(value):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as exc:
        printable_text(value)
    i, ch = first_unprintable(value)
    assert f"U+{ord(ch):04X}" in exc.value.messages[0] and f"at character {i + 1}" in exc.value.messages[0]


@pytest.mark.parametrize("value", ["research", "Équipe données", "研究チーム", "a-b_c.d 1/2", "👩‍🔬"[0]])
def test_ordinary_names_pass(value):
    printable_text(value)


@pytest.fixture
def world(base_fabric, users):
    tenant = Tenant.objects.create(name="t-a")
    tenant.memberships.create(user=users["operator"], role="operator")
    pool = Pool.objects.create(name="p-a", tenant=tenant, fabric=base_fabric, quota_gpus=8)
    return tenant, pool


@pytest.mark.parametrize("bad", [RLO, "nul\x00", "tab\there"])
def test_api_refuses_unprintable_names_with_a_400_naming_the_field(world, base_fabric, admin, operator, bad):
    tenant, pool = world
    cases = [
        (admin, "post", "/api/pools/tenants/", {"name": bad}, "name"),
        (admin, "patch", f"/api/pools/tenants/{tenant.pk}/", {"description": bad}, "description"),
        (admin, "post", "/api/pools/pools/", {"name": bad, "fabric": base_fabric.pk}, "name"),
        (admin, "patch", f"/api/pools/pools/{pool.pk}/", {"description": bad}, "description"),
        (operator, "post", "/api/scheduler/jobs/", {"name": bad, "pool": pool.pk, "count": 1}, "name"),
        (operator, "post", "/api/pools/allocations/allocate/", {"pool": pool.pk, "job": bad}, "job"),
        (admin, "patch", f"/api/fabric/fabrics/{base_fabric.pk}/", {"description": bad}, "description"),
        (admin, "post", "/api/fabric/partitions/",
         {"fabric": base_fabric.pk, "name": "p5", "pkey": "0x0005", "description": bad}, "description"),
        (admin, "post", "/api/devices/devices/",
         {"name": bad, "fabric": base_fabric.pk, "address": "192.0.2.1", "community": "public"}, "name"),
        (operator, "post", "/api/accounts/users/token/", {"name": bad}, "name"),
    ]  # fmt: skip
    for client, method, url, body, field in cases:
        r = getattr(client, method)(url, body, format="json")
        assert r.status_code == 400, (url, r.status_code, r.content[:300])
        assert field in r.json(), (url, r.json())
        assert "not allowed" in str(r.json()[field]), (url, r.json())
    assert list(Tenant.objects.values_list("name", "description")) == [("t-a", "")]
    assert list(Pool.objects.values_list("name", "description")) == [("p-a", "")]
    assert not Job.objects.exists() and not Allocation.objects.exists() and not Device.objects.exists()
    assert Fabric.objects.get(pk=base_fabric.pk).description == base_fabric.description
    assert not Partition.objects.filter(pkey=5).exists() and not ApiToken.objects.exists()


def test_pages_refuse_unprintable_names_naming_the_field(world, users):
    tenant, pool = world
    admin = Client()
    admin.force_login(users["admin"])
    r = admin.post("/pools/tenants/new/", {"name": RLO})
    assert r.status_code == 400 and "not allowed" in r.content.decode()
    r = admin.post(f"/pools/{pool.pk}/edit/", {"name": "p-a", "description": RLO, "fabric": pool.fabric_id})
    assert r.status_code == 400 and "not allowed" in r.content.decode()
    operator = Client()
    operator.force_login(users["operator"])
    r = operator.post("/scheduler/submit/", {"name": RLO, "pool": pool.pk, "count": 1,
                                              "priority_class": "normal", "tier_mode": "preferred"})  # fmt: skip
    assert [str(m) for m in get_messages(r.wsgi_request)][0].startswith("Not submitted: name: Control")
    assert not Job.objects.exists() and Tenant.objects.count() == 1
    assert Pool.objects.get(pk=pool.pk).description == ""
