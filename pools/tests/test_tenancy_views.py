"""The tenant list and the Admin's tenant and pool forms (``pools.views``, ``pools.forms``): by
role as the API allows (Admin writes, Operator and Viewer read, a tenant's member sees only their
tenants), the serializer's messages under their field with nothing written, the 409 of a delete
refused by ``pools.services.tenancy`` shown without a traceback, and each change audited.

Jobs go through the scheduler's submit service; allocations through the allocation service on a
GPU fabric made by ``tests.support.gpus.make_gpu_fabric``."""

from __future__ import annotations

import re
from html import unescape

import pytest

from accounts.models import AuditEntry
from fabric.models import Fabric, Partition
from pools.models import Pool, Tenant, TenantMembership
from pools.services.allocation import AllocationRequest, allocate
from scheduler.services.queue import JobSpec, submit
from tests.support.gpus import make_gpu_fabric

pytestmark = pytest.mark.django_db

POOL_FORM = {"name": "", "description": "", "tenant": "", "fabric": "", "gpu_model": "", "quota_gpus": "",
             "guaranteed_gpus": "", "quota_slices": "", "guaranteed_slices": "", "priority_weight": "",
             "pkey": "", "job_pkey_min": "", "job_pkey_max": ""}  # fmt: skip


def text(resp) -> str:
    return unescape(resp.content.decode())


def errors_of(html: str, field: str) -> list[str]:
    """The messages shown under the input of ``field`` (Django's ``errorlist`` of that field)."""
    m = re.search(rf'<ul class="errorlist" id="id_{field}_error">(.*?)</ul>', html, re.S)
    return re.findall(r"<li>(.*?)</li>", m.group(1)) if m else []


def test_admin_creates_edits_and_deletes_a_tenant_audited(users, client_for):
    admin = client_for("admin")
    assert 'id="tenant-add"' in text(admin.get("/pools/tenants/"))
    form = text(admin.get("/pools/tenants/new/"))
    assert 'name="members"' in form
    resp = admin.post(
        "/pools/tenants/new/",
        {"name": "team-a", "description": "vision", "members": "vic\nolga operator\n"},
    )
    assert resp.status_code == 302, text(resp)[:2000]
    t = Tenant.objects.get(name="team-a")
    assert resp["Location"] == f"/pools/tenants/#tenant-{t.pk}"
    assert sorted(t.memberships.values_list("user__username", "role")) == [
        ("olga", "operator"),
        ("vic", "viewer"),
    ]
    entry = AuditEntry.objects.get(action="tenant.create")
    assert entry.username == "ada" and entry.object_id == str(t.pk)
    assert entry.changes == {"name": "team-a", "description": "vision", "members": [
        {"user": users["viewer"].pk, "role": "viewer"}, {"user": users["operator"].pk, "role": "operator"}]}  # fmt: skip
    listing = text(admin.get("/pools/tenants/"))
    assert 'data-tenant="team-a"' in listing and f'href="/pools/tenants/{t.pk}/edit/"' in listing

    edit = text(admin.get(f"/pools/tenants/{t.pk}/edit/"))
    assert 'value="team-a"' in edit and "olga operator\nvic viewer" in edit
    resp = admin.post(
        f"/pools/tenants/{t.pk}/edit/", {"name": "team-b", "description": "vision", "members": "vic operator"}
    )
    assert resp.status_code == 302
    t.refresh_from_db()
    assert t.name == "team-b" and list(t.memberships.values_list("user__username", "role")) == [
        ("vic", "operator")
    ]
    upd = AuditEntry.objects.get(action="tenant.update")
    # only what changed is sent (and audited): the description is not
    assert upd.changes == {
        "name": ["team-a", "team-b"],
        "members": [{"user": users["viewer"].pk, "role": "operator"}],
    }

    page = text(admin.get(f"/pools/tenants/{t.pk}/delete/"))
    assert "it owns no pool" in page and "1 membership(s)" in page
    resp = admin.post(f"/pools/tenants/{t.pk}/delete/", {})  # no confirmation: nothing deleted
    assert resp.status_code == 400 and "Confirm the deletion" in text(resp)
    assert Tenant.objects.filter(pk=t.pk).exists()
    resp = admin.post(f"/pools/tenants/{t.pk}/delete/", {"confirm": "1"})
    assert resp.status_code == 302 and resp["Location"] == "/pools/tenants/"
    assert not Tenant.objects.filter(pk=t.pk).exists()
    assert AuditEntry.objects.filter(action="tenant.delete", object_id=str(t.pk), username="ada").count() == 1


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_viewer_and_operator_read_only_their_tenants_no_buttons_403_on_writes(users, client_for, role):
    mine = Tenant.objects.create(name="mine")
    Tenant.objects.create(name="theirs")
    TenantMembership.objects.create(tenant=mine, user=users[role], role="operator")
    pool = Pool.objects.create(name="p-mine", tenant=mine, quota_gpus=4, guaranteed_gpus=1)
    client = client_for(role)
    html = text(client.get("/pools/tenants/"))
    assert 'data-tenant="mine"' in html and "theirs" not in html  # as GET /api/pools/tenants/
    api = client.get("/api/pools/tenants/").json()
    assert [t["name"] for t in api["results"]] == ["mine"]
    assert 'data-pool="p-mine"' in html and "4 / 1 GPUs" in html
    for marker in ('id="tenant-add"', 'id="pool-add"', "tenant-edit", "tenant-delete"):
        assert marker not in html
    assert 'id="pool-edit"' not in text(client.get(f"/pools/{pool.pk}/"))
    assert 'id="pool-add"' not in text(client.get("/pools/"))
    # the API's write role for tenants and pools is Admin: the pages refuse the same
    assert client.post("/api/pools/tenants/", {"name": "x"}, format="json").status_code == 403
    writes = [("/pools/tenants/new/", {"name": "x"}), (f"/pools/tenants/{mine.pk}/edit/", {"name": "x"}),
              (f"/pools/tenants/{mine.pk}/delete/", {"confirm": "1"}), ("/pools/new/", {**POOL_FORM, "name": "x"}),
              (f"/pools/{pool.pk}/edit/", {**POOL_FORM, "name": "x"}), (f"/pools/{pool.pk}/delete/", {"confirm": "1"})]  # fmt: skip
    for url, data in writes:
        assert client.get(url).status_code == 403, url
        assert client.post(url, data).status_code == 403, url
    assert client.get("/pools/tenants/999999/edit/").status_code == 403  # the role first: no id probing
    assert client_for("admin").get("/pools/tenants/999999/edit/").status_code == 404
    assert sorted(Tenant.objects.values_list("name", flat=True)) == ["mine", "theirs"]
    assert list(Pool.objects.values_list("name", flat=True)) == ["p-mine"]
    assert not AuditEntry.objects.filter(action__startswith="tenant.").exists()


def test_admin_creates_and_edits_a_pool_with_a_pkey_audited(users, client_for):
    fabric = Fabric.objects.create(name="ib0")
    t = Tenant.objects.create(name="team-a")
    admin = client_for("admin")
    form = text(admin.get("/pools/new/"))
    assert (
        f'<option value="{t.pk}">team-a</option>' in form
        and f'<option value="{fabric.pk}">ib0</option>' in form
    )
    data = {**POOL_FORM, "name": "train", "tenant": str(t.pk), "fabric": str(fabric.pk), "gpu_model": "H100",
            "quota_gpus": "8", "guaranteed_gpus": "4", "priority_weight": "3", "pkey": "0x0123"}  # fmt: skip
    resp = admin.post("/pools/new/", data)
    assert resp.status_code == 302, re.findall(r"errorlist.{0,300}", text(resp))
    pool = Pool.objects.select_related("partition").get(name="train")
    assert resp["Location"] == f"/pools/{pool.pk}/"
    assert (pool.tenant, pool.fabric, pool.gpu_model, pool.quota_gpus, pool.guaranteed_gpus) == (
        t,
        fabric,
        "H100",
        8,
        4,
    )
    assert (pool.priority_weight, pool.pkey, pool.quota_slices, pool.job_pkey_min) == (3, 0x123, None, 0x6000)
    created = AuditEntry.objects.get(action="pool.create")
    assert created.changes["quota_gpus"] == 8 and created.changes["tenant"] == t.pk
    assert Partition.objects.get(fabric=fabric, pkey=0x123).pool == pool
    page = text(admin.get(f"/pools/{pool.pk}/"))
    assert f'href="/pools/{pool.pk}/edit/"' in page and f'href="/pools/{pool.pk}/delete/"' in page
    listing = text(admin.get("/pools/tenants/"))
    assert re.search(r'data-pool="train">.*?0x0123</a>\s*· 8 / 4 GPUs', listing, re.S), listing

    edit = text(admin.get(f"/pools/{pool.pk}/edit/"))
    assert 'value="0x0123"' in edit and 'value="8"' in edit
    shown = {**data, "guaranteed_slices": "0", "job_pkey_min": "0x6000", "job_pkey_max": "0x6fff"}
    for name, value in shown.items():  # the form shows what is stored
        field = re.search(rf'<(?:input|select)[^>]*name="{name}".*?>(?:.*?</select>)?', edit, re.S).group(0)
        mark = f'value="{value}" selected' if field.startswith("<select") else f'value="{value}"'
        assert (mark in field) if value else 'value="' not in field.split(">")[0], (name, field)
    resp = admin.post(
        f"/pools/{pool.pk}/edit/", {**shown, "guaranteed_gpus": "2", "pkey": "", "job_isolation": "on"}
    )
    assert resp.status_code == 302, re.findall(r"errorlist.{0,300}", text(resp))
    pool.refresh_from_db()
    assert (pool.guaranteed_gpus, pool.pkey, pool.job_isolation) == (2, None, True)
    upd = AuditEntry.objects.get(action="pool.update")
    assert upd.changes == {"guaranteed_gpus": [4, 2], "job_isolation": [False, True], "pkey": [0x123, None]}


def test_bad_input_shows_the_serializers_messages_under_their_fields_and_writes_nothing(users, client_for):
    admin = client_for("admin")
    Tenant.objects.create(name="taken")
    entries = AuditEntry.objects.count()
    bad = {**POOL_FORM, "name": "p", "quota_gpus": "2", "guaranteed_gpus": "5"}
    resp = admin.post("/pools/new/", bad)
    assert resp.status_code == 400
    api = admin.post("/api/pools/pools/", {"name": "p", "quota_gpus": 2, "guaranteed_gpus": 5}, format="json")
    assert api.status_code == 400
    assert (
        errors_of(text(resp), "guaranteed_gpus")
        == api.json()["guaranteed_gpus"]
        == ["the guaranteed share (5) is above the quota (2)"]
    )
    resp = admin.post("/pools/new/", {**POOL_FORM, "name": "p", "pkey": "0x0123", "quota_gpus": "many"})
    html = text(resp)
    assert resp.status_code == 400 and "Traceback" not in html
    assert errors_of(html, "quota_gpus") == ["A valid integer is required."]
    resp = admin.post("/pools/new/", {**POOL_FORM, "name": "p", "pkey": "0x0123"})
    assert errors_of(text(resp), "pkey") == [
        "a pool needs a fabric to own a PKey (PKeys are per fabric): set fabric, or pkey null"
    ]
    resp = admin.post("/pools/tenants/new/", {"name": "taken", "members": "vic\nghost operator\nolga boss"})
    html = text(resp)
    assert resp.status_code == 400
    assert errors_of(html, "name") == ["tenant with this name already exists."]
    assert errors_of(html, "members") == [
        "line 2: no user 'ghost'",
        'line 3: role: "boss" is not a valid choice.',
    ]
    assert 'value="taken"' in html and "ghost operator" in html  # what was typed is kept
    resp = admin.post("/pools/tenants/new/", {"name": "t2", "members": "vic\nvic operator"})
    assert errors_of(text(resp), "members") == ["a user is listed twice"]
    # a bad contact is named by what was typed (it was "1: Enter a valid email address.")
    resp = admin.post("/pools/tenants/new/", {"name": "t3", "contacts": "ops@example.org, not-an-email"})
    assert resp.status_code == 400
    assert errors_of(text(resp), "contacts") == ["'not-an-email': Enter a valid email address."]
    assert not Pool.objects.exists() and list(Tenant.objects.values_list("name", flat=True)) == ["taken"]
    assert AuditEntry.objects.count() == entries


def test_delete_refused_with_409_and_the_services_message(users, client_for):
    make_gpu_fabric("g", hosts=1, per_host=2)
    t = Tenant.objects.create(name="busy")
    waiting = Pool.objects.create(name="waiting", tenant=t)
    holding = Pool.objects.create(name="holding", tenant=t)
    submit(JobSpec(name="big", pool_id=waiting.pk, count=2), user=users["admin"])  # no pass here: pending
    allocate(holding.pk, AllocationRequest(count=1))
    admin = client_for("admin")
    resp = admin.post(f"/pools/tenants/{t.pk}/delete/", {"confirm": "1"})
    html = text(resp)
    assert resp.status_code == 409 and "Traceback" not in html
    assert "tenant busy has 1 active allocations: release them first" in html
    api = admin.delete(f"/api/pools/pools/{waiting.pk}/")
    assert api.status_code == 409
    resp = admin.post(f"/pools/{waiting.pk}/delete/", {"confirm": "1"})
    assert resp.status_code == 409
    assert api.json()["detail"] in text(resp)
    assert "pool waiting has 1 queued job(s) waiting to be placed: cancel them first" in text(resp)
    assert Pool.objects.filter(tenant=t).count() == 2 and Tenant.objects.filter(pk=t.pk).exists()
    assert not AuditEntry.objects.filter(action__in=["tenant.delete", "pool.delete"]).exists()
    listing = text(admin.get("/pools/tenants/"))
    assert re.search(r'data-tenant="busy" data-held-gpus="1" data-running="0" data-pending="1"', listing)


def test_the_menu_reaches_the_tenant_list_for_every_role(client_for):
    for role in ("viewer", "operator", "admin"):
        client = client_for(role)
        nav = re.search(r'<nav id="nav">(.*?)</nav>', text(client.get("/pools/")), re.S).group(1)
        assert 'href="/pools/tenants/"' in nav
        assert client.get("/pools/tenants/").status_code == 200


def test_a_name_taken_by_a_request_that_committed_meanwhile_is_a_form_error(users, client_for, monkeypatch):
    """Two Admins add "team-x" at once: both forms validate, the second insert meets the unique
    name in the database. The page answers 400 with a message, not a 500; one tenant stored."""
    from pools.services import tenancy

    real = tenancy.write_tenant

    def the_other_request_first(serializer):
        Tenant.objects.create(name="team-x")  # committed between this form's check and its insert
        return real(serializer)

    monkeypatch.setattr(tenancy, "write_tenant", the_other_request_first)
    resp = client_for("admin").post(
        "/pools/tenants/new/", {"name": "team-x", "description": "", "members": ""}
    )
    assert resp.status_code == 400
    assert "Another change saved meanwhile took this name or PKey" in text(resp)
    assert Tenant.objects.filter(name="team-x").count() == 1
    assert not AuditEntry.objects.filter(action="tenant.create").exists()


def test_tenant_contacts_and_webhook_by_api_and_form_the_secret_write_only(users, client_for):
    admin = client_for("admin")
    resp = admin.post(
        "/api/pools/tenants/",
        {"name": "team-c", "contacts": ["ops@c.example", "OPS@c.example", "lead@c.example"],
         "webhook_url": "https://runner.c.example/hook", "webhook_secret": "k3y"},
        format="json",
    )  # fmt: skip
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body["contacts"] == ["ops@c.example", "lead@c.example"] and "webhook_secret" not in body
    assert body["webhook_secret_set"] is True and body["webhook_url"] == "https://runner.c.example/hook"
    t = Tenant.objects.get(name="team-c")
    assert t.webhook_secret == "k3y"
    entry = AuditEntry.objects.get(action="tenant.create", object_id=str(t.pk))
    assert entry.changes["webhook_secret"] == "(set)" and "k3y" not in str(entry.changes)
    bad = admin.patch(f"/api/pools/tenants/{t.pk}/", {"contacts": ["not-an-address"]}, format="json")
    assert bad.status_code == 400 and "contacts" in bad.json()
    # only http(s) targets (no delivery could use ftp:); "" means none, and answers as ""
    ftp = admin.patch(
        f"/api/pools/tenants/{t.pk}/", {"webhook_url": "ftp://runner.c.example/x"}, format="json"
    )
    assert ftp.status_code == 400 and "webhook_url" in ftp.json()
    none = admin.patch(f"/api/pools/tenants/{t.pk}/", {"webhook_url": ""}, format="json")
    assert none.status_code == 200 and none.json()["webhook_url"] == ""
    t.refresh_from_db()
    assert t.webhook_url == ""
    assert admin.patch(f"/api/pools/tenants/{t.pk}/", {"webhook_url": "https://runner.c.example/hook"},
                       format="json").status_code == 200  # fmt: skip
    # the form: contacts one per line, the secret blank = unchanged
    form = text(admin.get(f"/pools/tenants/{t.pk}/edit/"))
    assert "ops@c.example\nlead@c.example" in form and "k3y" not in form
    resp = admin.post(
        f"/pools/tenants/{t.pk}/edit/",
        {"name": "team-c", "description": "", "members": "", "contacts": "ops@c.example, new@c.example",
         "webhook_url": "https://runner.c.example/hook", "webhook_secret": ""},
    )  # fmt: skip
    assert resp.status_code == 302, text(resp)[:2000]
    t.refresh_from_db()
    assert t.contacts == ["ops@c.example", "new@c.example"] and t.webhook_secret == "k3y"


@pytest.mark.parametrize("method", ["put", "patch"])
def test_tenant_members_by_username_is_a_400_for_put_and_patch_alike(users, client_for, method):
    """Members must be given by user id; ``username`` is read-only. PATCH once crashed (500,
    ``KeyError: 'user'``) because a partial update does not make nested fields required."""
    admin = client_for("admin")
    t = Tenant.objects.create(name="team-p")
    TenantMembership.objects.create(tenant=t, user=users["viewer"], role="viewer")
    body = {"name": "team-p", "members": [{"username": "olga", "role": "operator"}]}
    resp = getattr(admin, method)(f"/api/pools/tenants/{t.pk}/", body, format="json")
    assert resp.status_code == 400, resp.content
    assert resp.json() == {"members": [{"user": ["This field is required."]}]}
    assert list(t.memberships.values_list("user__username", "role")) == [("vic", "viewer")]


def test_the_tenant_list_shows_contacts_and_the_webhook_never_its_secret(users, client_for):
    """The walkthrough: the tenant list had no contacts or webhook columns. Each tenant's row shows
    its contacts (mailto links) and its webhook URL, signed or not; the HMAC key never."""
    signed = Tenant.objects.create(name="t-hook", contacts=["ops@example.org", "oncall@example.org"],
                                   webhook_url="https://hooks.example.org/weft", webhook_secret="s3cr3t-key")  # fmt: skip
    bare = Tenant.objects.create(name="t-bare")
    page = text(client_for("admin").get("/pools/tenants/"))
    row = re.search(rf'<tr id="tenant-{signed.pk}".*?</tr>', page, re.S).group(0)
    contacts = re.search(r'<td class="tenant-contacts">(.*?)</td>', row, re.S).group(1)
    assert re.findall(r'href="mailto:([^"]+)"', contacts) == ["ops@example.org", "oncall@example.org"]
    webhook = re.search(r'<td class="tenant-webhook">(.*?)</td>', row, re.S).group(1)
    assert "https://hooks.example.org/weft" in webhook and "(signed)" in webhook
    assert "s3cr3t-key" not in page
    other = re.search(rf'<tr id="tenant-{bare.pk}".*?</tr>', page, re.S).group(0)
    assert (
        re.findall(r'<td class="tenant-(?:contacts|webhook)"><span class="muted">none</span></td>', other)
        != []
    )
    assert other.count('<span class="muted">none</span>') == 2
