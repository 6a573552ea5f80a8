"""Allocate and release from the pool page (``pools.views.PoolAllocateView``, ``ReleaseView``): the
allocate API's rules (the Operator role and an operator membership of the tenant, another
tenant's pool or allocation a 404), its serializer's checks under their fields, the service's
refusals (quota, not enough free GPUs) as their messages, the new allocation's hosts and
``CUDA_VISIBLE_DEVICES`` shown as the API gives them, and the writes audited by the service."""

from __future__ import annotations

import re
from html import unescape

import pytest

from accounts.models import AuditEntry
from pools.models import Allocation, Gpu, Pool, Tenant, TenantMembership
from tests.support.gpus import make_gpu_fabric

pytestmark = pytest.mark.django_db


@pytest.fixture
def tenants(users):
    """GPU fabric ``g`` (one host ``gpu0001``, 4 GPUs); ``mine`` (Olga the Operator and Vic the
    Viewer are its operators), ``theirs``; pools ``p-mine`` (quota 2), ``p-theirs``, ``p-shared``."""
    make_gpu_fabric("g", hosts=1, per_host=4)
    mine, theirs = Tenant.objects.create(name="mine"), Tenant.objects.create(name="theirs")
    TenantMembership.objects.create(tenant=mine, user=users["operator"], role="operator")
    TenantMembership.objects.create(tenant=mine, user=users["viewer"], role="operator")  # site Viewer
    pools = {
        "mine": Pool.objects.create(name="p-mine", tenant=mine, quota_gpus=2),
        "theirs": Pool.objects.create(name="p-theirs", tenant=theirs),
        "shared": Pool.objects.create(name="p-shared"),
    }
    return mine, theirs, pools


def text(resp) -> str:
    return unescape(resp.content.decode())


def errors_of(html: str, field: str | None) -> list[str]:
    """Messages under ``field``'s input, or the form's own (``field`` None)."""
    pattern = (
        rf'<ul class="errorlist" id="id_{field}_error">(.*?)</ul>'
        if field
        else r'<ul class="errorlist nonfield">(.*?)</ul>'
    )
    m = re.search(pattern, html, re.S)
    return [unescape(e) for e in re.findall(r"<li>(.*?)</li>", m.group(1), re.S)] if m else []


def test_operator_allocates_sees_the_environment_and_releases(tenants, users, client_for):
    mine, _, pools = tenants
    op = client_for("operator")
    page = text(op.get(f"/pools/{pools['mine'].pk}/"))
    assert 'id="allocate-form"' in page and 'name="tenant"' not in page  # a tenant's pool takes its own

    resp = op.post(f"/pools/{pools['mine'].pk}/allocate/", {"kind": "gpu", "count": "2", "job": "train-7"})
    alloc = Allocation.objects.get()
    assert resp.status_code == 302 and resp["Location"] == (
        f"/pools/{pools['mine'].pk}/?allocation={alloc.pk}#allocation-result"
    )
    assert (alloc.tenant, alloc.count, alloc.job, alloc.owner, alloc.state) == (
        mine, 2, "train-7", users["operator"], "active"
    )  # fmt: skip
    entry = AuditEntry.objects.get(action="allocation.create")
    assert entry.username == "olga" and entry.changes["gpus"] == sorted(entry.changes["gpus"])
    html = text(op.get(resp["Location"].split("#")[0]))  # a browser sends no fragment
    uuids = sorted(Gpu.objects.filter(state="allocated").values_list("uuid", flat=True))
    api = op.get(f"/api/pools/allocations/{alloc.pk}/").json()["environment"]
    assert api == [{"host": "gpu0001", "env": {"CUDA_VISIBLE_DEVICES": ",".join(uuids)}}]
    assert (
        f'<div class="env" data-name="CUDA_VISIBLE_DEVICES">CUDA_VISIBLE_DEVICES={",".join(uuids)}</div>'
        in html
    )
    assert (
        '<tr data-host="gpu0001"><td>gpu0001</td>' in html
        and f"Allocation #{alloc.pk}: 2 GPUs for mine" in html
    )

    # quota: a readable message, nothing written
    refused = op.post(f"/pools/{pools['mine'].pk}/allocate/", {"kind": "gpu", "count": "1"})
    assert refused.status_code == 409
    assert errors_of(text(refused), None) == ["pool p-mine: 2 gpus held + 1 asked > quota 2"]
    assert Allocation.objects.count() == 1

    released = op.post(f"/pools/allocations/{alloc.pk}/release/", follow=True)
    alloc.refresh_from_db()
    assert alloc.state == "released" and not Gpu.objects.filter(state="allocated").exists()
    assert f"Allocation #{alloc.pk} released: its GPUs are free." in text(released)
    assert AuditEntry.objects.get(action="allocation.released").username == "olga"
    again = op.post(f"/pools/allocations/{alloc.pk}/release/", follow=True)
    assert f"Allocation #{alloc.pk} not released: allocation {alloc.pk} is released." in text(again)


def test_capacity_and_bad_input_are_shown_under_their_fields(tenants, users, client_for):
    _, _, pools = tenants
    op = client_for("operator")
    url = f"/pools/{pools['shared'].pk}/allocate/"
    page = text(op.get(f"/pools/{pools['shared'].pk}/"))
    assert re.search(r'<select name="tenant"[^>]*>\s*<option value="\d+">mine</option>\s*</select>', page)
    cases = [
        ({"kind": "gpu", "count": "9"}, None, 409, "pool p-shared: 9 GPUs asked, 4 free"),
        ({"kind": "gpu", "count": "many"}, "count", 400, "A valid integer is required."),
        ({"kind": "gpu", "count": "0"}, "count", 400, "Ensure this value is greater than or equal to 1."),
        ({"kind": "fraction", "count": "1"}, "memory_mib", 400, "a fraction needs memory_mib ≥ 1"),
        ({"kind": "gpu", "count": "1", "lease_h": "soon"}, "lease_h", 400, "a number of hours, e.g. 2 or 0.5"),
        ({"kind": "tpu", "count": "1"}, "kind", 400, "Select a valid choice. tpu is not one of the available choices."),
        ({"kind": "gpu", "count": "1", "tenant": "999"}, "tenant", 400, "Select a valid choice. 999 is not one"),
    ]  # fmt: skip
    for body, field, status, expected in cases:
        resp = op.post(url, body)
        assert resp.status_code == status, (body, resp.status_code)
        got = errors_of(text(resp), field)
        assert any(expected in m for m in got), (body, got)
    assert not Allocation.objects.exists()
    # a fraction of one GPU, with HAMi's limits in the environment
    resp = op.post(url, {"kind": "fraction", "memory_mib": "8000", "compute_pct": "25", "lease_h": "2"})
    alloc = Allocation.objects.get()
    env = text(op.get(resp["Location"].split("#")[0]))
    assert "CUDA_DEVICE_MEMORY_LIMIT=8000m" in env and "CUDA_DEVICE_SM_LIMIT=25" in env
    assert alloc.tenant.name == "mine" and alloc.lease_expires_at is not None


def test_who_may_allocate_and_release_from_the_pages(tenants, users, client_for):
    mine, theirs, pools = tenants
    admin = client_for("admin")
    # the Admin allocates for any tenant (the shared pool names it)
    resp = admin.post(
        f"/pools/{pools['shared'].pk}/allocate/", {"kind": "gpu", "count": "1", "tenant": theirs.pk}
    )
    theirs_alloc = Allocation.objects.get(tenant=theirs)
    assert resp.status_code == 302
    resp = admin.post(f"/pools/{pools['mine'].pk}/allocate/", {"kind": "gpu", "count": "1"})
    mine_alloc = Allocation.objects.get(tenant=mine)

    # a site Viewer is refused whatever their tenant role; no form, no Release button
    viewer = client_for("viewer")
    page = text(viewer.get(f"/pools/{pools['mine'].pk}/"))
    assert 'id="allocate-form"' not in page and 'class="release"' not in page
    assert (
        viewer.post(f"/pools/{pools['mine'].pk}/allocate/", {"kind": "gpu", "count": "1"}).status_code == 403
    )
    assert viewer.post(f"/pools/allocations/{mine_alloc.pk}/release/").status_code == 403

    # another tenant's pool and allocation do not exist for Olga; her own allocation has the button
    op = client_for("operator")
    assert op.get(f"/pools/{pools['theirs'].pk}/").status_code == 404
    assert op.post(f"/pools/{pools['theirs'].pk}/allocate/", {"kind": "gpu", "count": "1"}).status_code == 404
    assert op.post(f"/pools/allocations/{theirs_alloc.pk}/release/").status_code == 404
    page = text(op.get(f"/pools/{pools['mine'].pk}/"))
    assert f'data-allocation="{mine_alloc.pk}">Release</button>' in page

    # an Operator who is only a viewer of the tenant: the API's 403, with its message
    TenantMembership.objects.filter(user=users["operator"]).update(role="viewer")
    assert 'id="allocate-form"' not in text(op.get(f"/pools/{pools['mine'].pk}/"))
    refused = op.post(f"/pools/{pools['mine'].pk}/allocate/", {"kind": "gpu", "count": "1"})
    assert refused.status_code == 403
    assert errors_of(text(refused), None) == ["allocating needs an operator membership of the tenant"]
    assert op.post(f"/pools/allocations/{mine_alloc.pk}/release/").status_code == 403
    assert Allocation.objects.filter(state="active").count() == 2
    assert client_for("admin").get(f"/pools/allocations/{mine_alloc.pk}/release/")["Location"] == (
        f"/pools/{pools['mine'].pk}/"
    )
