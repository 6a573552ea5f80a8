"""A pool's PKey never lies inside a job PKey range in force on its fabric (issue 12, job PKeys:
job partitions take the lowest free PKey of their pool's ``job_pkey_min``-``job_pkey_max``), from
both sides: the pools API and service refuse a pool PKey inside a range (the pool's own when it
isolates jobs, another isolating pool's of the fabric or of none) and a range (or turning
isolation on) that holds a pool PKey, 400 on the field naming the range; stored overlaps are
reported by ``manage.py check --database default`` (``pools.W001``)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from fabric.models import Partition
from fabric.services.ingest import import_topology_text
from lab import netgen
from pools.models import Pool, Tenant
from pools.services.partitions import KEEP, PoolPKeyError, job_range_overlaps, save_pool, set_pool_pkey


@pytest.fixture
def fab(db):
    """Two fabrics; an isolating pool ``iso`` on ``pod`` (jobs 0x6000-0x60ff) and a plain pool."""
    pod = import_topology_text("pod", netgen.rail_pod(hosts=2, rails=1), filename="pod.net").fabric
    other = import_topology_text("other", netgen.rail_pod(hosts=1, rails=1), filename="o.net").fabric
    tenant = Tenant.objects.create(name="t")
    iso = Pool.objects.create(
        name="iso", tenant=tenant, fabric=pod, job_isolation=True, job_pkey_min=0x6000, job_pkey_max=0x60FF
    )
    plain = Pool.objects.create(name="plain", tenant=tenant, fabric=pod)
    return pod, other, iso, plain


def _url(pool: Pool) -> str:
    return f"/api/pools/pools/{pool.pk}/"


def test_api_refuses_a_pool_pkey_inside_a_job_range(fab, admin):
    pod, other, iso, plain = fab
    r = admin.patch(_url(plain), {"pkey": "0x6010"}, format="json")
    assert r.status_code == 400, r.content
    (msg,) = r.json()["pkey"]
    assert "0x6010" in msg and "job PKey range 0x6000-0x60ff of pool iso" in msg
    assert Pool.objects.get(pk=plain.pk).pkey is None and not Partition.objects.filter(pkey=0x6010).exists()
    # just outside the range: accepted
    r = admin.patch(_url(plain), {"pkey": "0x6100"}, format="json")
    assert r.status_code == 200 and r.json()["pkey"] == 0x6100
    # the pool's own range, when it isolates jobs (even a range given in the same request)
    r = admin.patch(_url(iso), {"pkey": "0x6001"}, format="json")
    assert r.status_code == 400 and "this pool's own job PKey range 0x6000-0x60ff" in r.json()["pkey"][0]
    r = admin.patch(
        _url(iso), {"pkey": "0x0a01", "job_pkey_min": "0x0a00", "job_pkey_max": "0x0a0f"}, format="json"
    )
    assert r.status_code == 400 and "own job PKey range 0x0a00-0x0a0f" in r.json()["pkey"][0]
    # a new pool on the fabric, created with a PKey in the range: 400, nothing created
    r = admin.post("/api/pools/pools/", {"name": "new", "fabric": pod.pk, "pkey": 0x60FF}, format="json")
    assert r.status_code == 400 and "0x6000-0x60ff" in r.json()["pkey"][0]
    assert not Pool.objects.filter(name="new").exists()
    # another fabric is not covered by iso's range; a pool without a fabric isolates on every one
    r = admin.post("/api/pools/pools/", {"name": "new", "fabric": other.pk, "pkey": 0x6010}, format="json")
    assert r.status_code == 201, r.content
    Pool.objects.create(name="anywhere", job_isolation=True, job_pkey_min=0x7000, job_pkey_max=0x7001)
    r = admin.patch(f"/api/pools/pools/{Pool.objects.get(name='new').pk}/", {"pkey": 0x7001}, format="json")
    assert (
        r.status_code == 400
        and "of pool anywhere" in r.json()["pkey"][0]
        and "any fabric" in r.json()["pkey"][0]
    )
    # a pool that does not isolate jobs has no range in force: its default 0x6000-0x6fff is free
    Pool.objects.filter(pk=iso.pk).update(job_isolation=False)
    assert admin.patch(_url(plain), {"pkey": "0x6010"}, format="json").status_code == 200


def test_api_refuses_a_job_range_holding_a_pool_pkey(fab, admin):
    pod, other, iso, plain = fab
    set_pool_pkey(plain, 0x0A01)
    before = Pool.objects.values("job_isolation", "job_pkey_min", "job_pkey_max").get(pk=iso.pk)
    r = admin.patch(_url(iso), {"job_pkey_min": "0x0a00"}, format="json")
    assert r.status_code == 400, r.content
    (msg,) = r.json()["job_pkey_min"]
    assert "job PKey range 0x0a00-0x60ff holds pool PKeys: 0x0a01 (pool plain, fabric pod)" in msg
    r = admin.patch(_url(iso), {"job_pkey_max": "0x0a02", "job_pkey_min": "0x0a01"}, format="json")
    assert r.status_code == 400 and "0x0a01 (pool plain" in r.json()["job_pkey_min"][0]
    assert Pool.objects.values("job_isolation", "job_pkey_min", "job_pkey_max").get(pk=iso.pk) == before
    # turning isolation on is the change that brings a range in force
    r = admin.patch(
        _url(plain), {"job_isolation": True, "job_pkey_min": 1, "job_pkey_max": 0x0FFF}, format="json"
    )
    assert r.status_code == 400 and "0x0a01 (pool plain" in r.json()["job_pkey_min"][0]  # its own PKey
    Pool.objects.filter(pk=plain.pk).update(job_pkey_min=1, job_pkey_max=0x0FFF)
    r = admin.patch(_url(plain), {"job_isolation": True}, format="json")
    assert r.status_code == 400 and "0x0001-0x0fff holds pool PKeys" in r.json()["job_isolation"][0]
    assert Pool.objects.get(pk=plain.pk).job_isolation is False
    # moving the isolating pool to the fabric of a pool PKey in its range: 400 on fabric
    set_pool_pkey(Pool.objects.create(name="o", fabric=other), 0x6005)
    r = admin.patch(_url(iso), {"fabric": other.pk}, format="json")
    assert r.status_code == 400 and "0x6005 (pool o, fabric other)" in r.json()["fabric"][0]
    # a range clear of every pool PKey is fine; so is an unrelated edit
    r = admin.patch(_url(iso), {"job_pkey_min": "0x6100", "job_pkey_max": "0x61ff"}, format="json")
    assert r.status_code == 200 and r.json()["job_pkey_min"] == 0x6100
    assert admin.patch(_url(plain), {"description": "x"}, format="json").status_code == 200


def test_service_refuses_too(fab):
    pod, other, iso, plain = fab
    with pytest.raises(PoolPKeyError, match=r"job PKey range 0x6000-0x60ff of pool iso") as err:
        set_pool_pkey(plain, 0x6042)
    assert err.value.field == "pkey"
    assert Pool.objects.get(pk=plain.pk).pkey is None and not Partition.objects.filter(pkey=0x6042).exists()
    assert set_pool_pkey(plain, 0x6100).pkey == 0x6100
    # a pool keeping a PKey it has is not judged again (an overlap stored before stays editable)
    Pool.objects.filter(pk=iso.pk).update(job_pkey_max=0x61FF)
    plain.refresh_from_db()
    assert set_pool_pkey(plain, 0x6100).pkey == 0x6100


def test_save_pool_judges_again_and_writes_only_the_fields_given(fab):
    """``save_pool`` (the API's create and update) checks again itself, whatever was validated
    before, and an update writes the fields given onto what is stored: a copy read before the
    pool got its PKey neither drops the partition nor puts old values back."""
    pod, other, iso, plain = fab
    stale = Pool.objects.get(pk=plain.pk)
    set_pool_pkey(plain, 0x0A01)
    Pool.objects.filter(pk=plain.pk).update(description="set meanwhile")
    with pytest.raises(PoolPKeyError) as err:
        save_pool(Pool.objects.get(pk=iso.pk), {"job_pkey_min": 0x0A00})
    assert err.value.field == "job_pkey_min" and "0x0a01 (pool plain, fabric pod)" in str(err.value)
    assert Pool.objects.get(pk=iso.pk).job_pkey_min == 0x6000
    Pool.objects.create(
        name="iso2", fabric=other, job_isolation=True, job_pkey_min=0x0A00, job_pkey_max=0x0AFF
    )
    with pytest.raises(PoolPKeyError) as err:  # moving with its PKey into a range in force there
        save_pool(Pool.objects.get(pk=plain.pk), {"fabric": other}, pkey=KEEP)
    assert (
        err.value.field == "fabric"
        and "PKey 0x0a01 lies in the job PKey range 0x0a00-0x0aff of pool iso2" in str(err.value)
    )
    save_pool(stale, {"priority_weight": 3})
    stored = Pool.objects.get(pk=plain.pk)
    assert (stored.fabric_id, stored.pkey, stored.description, stored.priority_weight) == (
        pod.pk, 0x0A01, "set meanwhile", 3
    )  # fmt: skip
    created = save_pool(Pool(), {"name": "new", "fabric": pod, "job_isolation": True}, pkey=0x0B01)
    assert (created.pkey, created.job_pkey_min, created.job_pkey_max) == (0x0B01, 0x6000, 0x6FFF)


def test_check_reports_stored_overlaps(fab):
    pod, other, iso, plain = fab
    set_pool_pkey(plain, 0x0A01)
    out = StringIO()
    call_command("check", "--database", "default", stdout=out, stderr=out)
    assert "pools.W001" not in out.getvalue()
    # written past the API: a range widened in the database
    Pool.objects.filter(pk=iso.pk).update(job_pkey_min=0x0A00)
    assert job_range_overlaps() == [
        f"pool iso (id {iso.pk}): its job PKey range 0x0a00-0x60ff holds the PKey of pool plain "
        f"(id {plain.pk}), 0x0a01 on fabric pod"
    ]
    out = StringIO()
    call_command("check", "--database", "default", stdout=out, stderr=out)
    text = out.getvalue()
    assert "pools.W001" in text and "0x0a00-0x60ff holds the PKey of pool plain" in text
    # a plain check (no database) does not query
    out = StringIO()
    call_command("check", stdout=out, stderr=out)
    assert "pools.W001" not in out.getvalue()
