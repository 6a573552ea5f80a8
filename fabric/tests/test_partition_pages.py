"""The Admin's partition pages (``fabric.views.PartitionFormView``, ``PartitionDeleteView``,
``PartitionApplyView``): create and edit with members picked from the fabric's hosts (each adds its
HCA ports) and typed port GUIDs, through the API's writers (``fabric.services.partitions``, audited
as the API's), then an apply requested as ``POST /api/fabric/partitions/apply/`` does (a
``PartitionApply`` record, queued on commit); bad input under its field with nothing written;
roles and tenant scoping as the API's (Admin writes; a tenant member never sees another tenant's
pool partition); a pool's partition refused with the service's message.

The fabric is ``tests.support.topologies.RAILS`` (host001 and host002, two HCAs each): port GUIDs
``0x0002c9030000<hh><r>1``, node GUIDs ending in 0."""

from __future__ import annotations

import re
from html import unescape

import pytest

from accounts.models import AuditEntry
from fabric.choices import ApplyRunState
from fabric.models import Fabric, Host, Partition, PartitionApply
from fabric.services.ingest import import_topology_text
from fabric.services.partitions import save_partition, set_members
from tests.support.topologies import RAILS

pytestmark = pytest.mark.django_db

H1 = ["0x0002c90300000101", "0x0002c90300000111"]
H2 = ["0x0002c90300000201", "0x0002c90300000211"]
STORAGE = "0x0002c903000ab001"  # a GUID no port of the fabric has (an SR-IOV VF, a storage target)


@pytest.fixture
def rails(tmp_path) -> Fabric:
    fabric = import_topology_text("rails", RAILS, filename="rails.topo").fabric
    fabric.partitions_path = str(tmp_path / "partitions.conf")  # the worker would write it
    fabric.save(update_fields=["partitions_path"])
    return fabric


def host_ids(fabric) -> dict[str, str]:
    return {h.name: str(h.pk) for h in Host.objects.filter(fabric=fabric)}


def text(resp) -> str:
    return unescape(resp.content.decode())


def errors_of(html: str, field: str) -> list[str]:
    """The messages under the input of ``field`` (Django's ``errorlist`` of that field)."""
    m = re.search(rf'<ul class="errorlist" id="id_{field}_error">(.*?)</ul>', html, re.S)
    return [unescape(e) for e in re.findall(r"<li>(.*?)</li>", m.group(1), re.S)] if m else []


def form(fabric, **over) -> dict:
    hosts = host_ids(fabric)
    return {"fabric": fabric.pk, "name": "train", "pkey": "0x0123", "description": "", "ipoib": "on", "mtu": "4",
            "rate": "", "sl": "", "scope": "", "hosts": [hosts["host001"], hosts["host002"]],
            "host_membership": "full", "members": f"{STORAGE} limited\n"} | over  # fmt: skip


def members_of(p: Partition) -> list[tuple[str, str, str]]:
    return sorted(p.members.values_list("port_guid", "membership", "reason"))


def test_admin_creates_a_partition_of_two_hosts_and_its_apply_is_requested(rails, users, client_for):
    admin = client_for("admin")
    page = text(admin.get(f"/fabric/partitions/new/?fabric={rails.pk}"))
    assert '<option value="' in page and ">host001</option>" in page and 'data-ports="2"' in page
    assert '<script src="/static/fabric/partition.js"></script>' in page

    resp = admin.post("/fabric/partitions/new/", form(rails))
    assert resp.status_code == 302, text(resp)[:3000]
    p = Partition.objects.get(fabric=rails, name="train")
    rec = PartitionApply.objects.get(fabric=rails)
    assert resp["Location"] == f"/fabric/partitions/{p.pk}/?apply={rec.pk}"
    assert (p.pkey, p.ipoib, p.mtu, p.rate, p.applied_state) == (0x123, True, 4, None, "pending")
    assert members_of(p) == sorted([(g, "full", "extra") for g in H1 + H2] + [(STORAGE, "limited", "extra")])
    assert (rec.state, rec.source, rec.requested_by.username, rec.force) == ("queued", "page", "ada", True)
    # audited as the API's writes are: create, members, the apply request; all by the Admin
    entries = AuditEntry.objects.filter(action__startswith="partition.").order_by("id")
    assert [(e.action, e.username) for e in entries] == [
        ("partition.create", "ada"), ("partition.set_members", "ada"), ("partition.apply_request", "ada")
    ]  # fmt: skip
    assert entries[1].changes["added"] == 5

    shown = admin.get(resp["Location"])
    html = text(shown)
    assert f'data-url="/api/fabric/partition-applies/{rec.pk}/" data-follow="1"' in html
    assert 'data-state="queued"' in html and "Partition train (0x0123) saved." in html
    # the state the page follows, as the worker writes it
    PartitionApply.objects.filter(pk=rec.pk).update(state=ApplyRunState.FAILED, ok=False,
                                                     result={"error": "OpenSM pid file missing", "applies": 1})  # fmt: skip
    html = text(admin.get(resp["Location"]))
    assert 'data-state="failed"' in html and "data-follow" not in html
    assert "OpenSM pid file missing" in html and "not applied" in html


def test_the_edit_form_shows_hosts_and_lines_and_saves_only_what_changed(rails, users, client_for):
    admin = client_for("admin")
    p = save_partition(Partition(fabric=rails, name="train", pkey=0x0123))
    set_members(p, [(g, "full") for g in H1 + H2] + [(STORAGE, "limited")])
    hosts = host_ids(rails)
    page = text(admin.get(f"/fabric/partitions/{p.pk}/edit/"))
    picked = re.findall(r'<option value="(\d+)" data-ports="2" selected>', page)
    assert sorted(picked) == sorted(hosts.values())
    assert f"{STORAGE} limited</textarea>" in page
    before = AuditEntry.objects.filter(action__startswith="partition.").count()

    same = form(rails, hosts=list(hosts.values()), ipoib="", mtu="")
    resp = admin.post(f"/fabric/partitions/{p.pk}/edit/", same, follow=True)
    assert "Partition train (0x0123) unchanged." in text(resp)
    assert (
        AuditEntry.objects.filter(action__startswith="partition.").count() == before
        and not PartitionApply.objects.exists()
    )

    # host002 out, its first port kept limited on a line, the SL set
    changed = same | {
        "hosts": [hosts["host001"]],
        "sl": "3",
        "members": f"{STORAGE} limited\n{H2[0]} limited",
    }
    resp = admin.post(f"/fabric/partitions/{p.pk}/edit/", changed)
    assert resp.status_code == 302
    p.refresh_from_db()
    assert p.sl == 3 and members_of(p) == sorted(
        [(g, "full", "extra") for g in H1] + [(H2[0], "limited", "extra"), (STORAGE, "limited", "extra")]
    )
    update = AuditEntry.objects.get(action="partition.update")
    assert update.changes == {"sl": [None, 3]}
    assert PartitionApply.objects.filter(fabric=rails, source="page").count() == 1


@pytest.mark.parametrize(
    ("over", "field", "expected"),
    [
        ({"pkey": "0x8123"}, "pkey", "PKey must be 0x0001-0x7ffe"),
        ({"pkey": "zz"}, "pkey", "a PKey: an integer or 0x hex"),
        ({"name": "has space"}, "name", "letters, digits, _ . - (not first a digit)"),
        ({"name": "pool_7"}, "name", "pool_<n> and job_<n> are the names of the partitions Weft makes"),
        ({"sl": "16"}, "sl", "less than or equal to 15"),
        ({"scope": "two"}, "scope", "scope nibbles are numbers 1-15"),
        ({"members": "0x10 full\nnot-a-guid\n0x11 sometimes"}, "members", "line 2: 'not-a-guid'"),
        ({"members": "0x11 sometimes"}, "members", "line 1: membership 'sometimes' is not one of full, limited, both"),
        ({"members": "0x0002c90300000100"}, "members",
         "member 0x0002c90300000100 is the node GUID of host001 mlx5_0, not a port GUID"),
        ({"pkey": "0x0456"}, "pkey", "PKey 0x0456 is already used on fabric rails"),
        ({"name": "storage"}, "name", "name 'storage' is already used on fabric rails by PKey 0x0456"),
    ],
)  # fmt: skip
def test_bad_input_is_shown_under_its_field_and_nothing_is_written(
    rails, users, client_for, over, field, expected
):
    save_partition(Partition(fabric=rails, name="storage", pkey=0x0456))
    before = (AuditEntry.objects.filter(action__startswith="partition.").count(), Partition.objects.count())
    resp = client_for("admin").post("/fabric/partitions/new/", form(rails, **over))
    assert resp.status_code == 400
    got = errors_of(text(resp), field)
    assert any(expected in m for m in got), (field, got, text(resp)[:4000])
    assert (
        AuditEntry.objects.filter(action__startswith="partition.").count(),
        Partition.objects.count(),
    ) == before
    assert not PartitionApply.objects.exists()
    assert f'value="{form(rails, **over)["name"]}"' in text(resp)  # what was typed is kept


def test_only_an_admin_writes_partitions_from_the_pages(rails, users, client_for, client):
    p = save_partition(Partition(fabric=rails, name="train", pkey=0x0123))
    urls = ["/fabric/partitions/new/", f"/fabric/partitions/{p.pk}/edit/", f"/fabric/partitions/{p.pk}/delete/",
            f"/fabric/partitions/{p.pk}/apply/"]  # fmt: skip
    for role in ("viewer", "operator"):
        c = client_for(role, raise_request_exception=False)
        page = text(c.get(f"/fabric/partitions/{p.pk}/"))
        assert 'id="partition-edit"' not in page and 'id="partition-apply-form"' not in page
        assert 'id="partition-add"' not in text(c.get("/fabric/partitions/"))
        for url in urls:
            assert c.get(url).status_code == 403, (role, url)
            assert c.post(url, form(rails) | {"confirm": "1"}).status_code == 403, (role, url)
    for url in urls:
        assert client.get(url).status_code == 302  # to the sign-in page
    assert Partition.objects.get(pk=p.pk).name == "train" and not PartitionApply.objects.exists()
    assert (
        not AuditEntry.objects.filter(action__startswith="partition.")
        .exclude(action="partition.create")
        .exists()
    )
    admin = text(client_for("admin").get(f"/fabric/partitions/{p.pk}/"))
    assert 'id="partition-edit"' in admin and 'id="partition-apply-form"' in admin
    assert 'id="partition-add"' in text(client_for("admin").get("/fabric/partitions/"))


def test_a_pool_partition_keeps_name_pkey_and_pool_members_and_is_not_deleted(rails, users, client_for):
    from pools.models import Pool, Tenant, TenantMembership

    admin = client_for("admin")
    tenants = [Tenant.objects.create(name=n) for n in ("team-a", "team-b")]
    resp = admin.post("/api/pools/pools/", {"name": "vision", "tenant": tenants[0].pk, "fabric": rails.pk,
                                             "pkey": "0x0456"}, format="json")  # fmt: skip
    assert resp.status_code == 201, resp.json()
    pool = Pool.objects.get(name="vision")
    p = pool.partition
    set_members(p, [(g, "full") for g in H1], reason="pool", as_owner=True)
    owned = f"partition {p.name} (0x0456) belongs to pool vision"
    page = text(admin.get(f"/fabric/partitions/{p.pk}/edit/"))
    assert 'id="partition-owner"' in page and "<option" in page
    assert re.findall(r'<option value="\d+" data-ports="2" selected>', page) == []  # only extra members shown

    hosts = host_ids(rails)
    body = form(rails, name=p.name, pkey="0x0456", ipoib="", mtu="", hosts=[], members="")
    refused = admin.post(f"/fabric/partitions/{p.pk}/edit/", body | {"name": "renamed"})
    assert refused.status_code == 409 and owned in text(refused)
    assert Partition.objects.get(pk=p.pk).name == p.name
    # flags and extra members are the Admin's: host002 added as extra, host001 stays a pool member
    ok = admin.post(f"/fabric/partitions/{p.pk}/edit/", body | {"sl": "2", "hosts": [hosts["host002"]]})
    assert ok.status_code == 302, text(ok)[:3000]
    p.refresh_from_db()
    assert p.sl == 2
    assert members_of(p) == sorted([(g, "full", "pool") for g in H1] + [(g, "full", "extra") for g in H2])

    gone = admin.post(f"/fabric/partitions/{p.pk}/delete/", {"confirm": "1"})
    assert gone.status_code == 409 and owned in text(gone) and "only through the pool" in text(gone)
    assert Partition.objects.filter(pk=p.pk).exists()

    # tenant scoping as the API's: team-b's member does not see team-a's pool partition
    TenantMembership.objects.create(tenant=tenants[1], user=users["viewer"], role="viewer")
    viewer = client_for("viewer")
    assert viewer.get(f"/fabric/partitions/{p.pk}/").status_code == 404
    assert viewer.get(f"/api/fabric/partitions/{p.pk}/").status_code == 404
    assert f'href="/fabric/partitions/{p.pk}/"' not in text(viewer.get("/fabric/partitions/"))


def test_delete_needs_the_confirmation_then_requests_an_apply(rails, users, client_for):
    admin = client_for("admin")
    p = save_partition(Partition(fabric=rails, name="train", pkey=0x0123))
    assert "I confirm the deletion of partition train" in text(
        admin.get(f"/fabric/partitions/{p.pk}/delete/")
    )
    assert admin.post(f"/fabric/partitions/{p.pk}/delete/", {}).status_code == 400
    resp = admin.post(f"/fabric/partitions/{p.pk}/delete/", {"confirm": "1"}, follow=True)
    assert resp.redirect_chain[-1][0] == f"/fabric/partitions/?fabric={rails.pk}"
    assert not Partition.objects.filter(pk=p.pk).exists()
    rec = PartitionApply.objects.get(fabric=rails)
    assert f"Apply #{rec.pk} of fabric rails requested." in text(resp)
    assert AuditEntry.objects.get(action="partition.delete").username == "ada"


def test_apply_now_and_a_fabric_without_a_partitions_file(rails, users, client_for):
    admin = client_for("admin")
    p = save_partition(Partition(fabric=rails, name="train", pkey=0x0123))
    resp = admin.post(f"/fabric/partitions/{p.pk}/apply/")
    rec = PartitionApply.objects.get(fabric=rails)
    assert resp["Location"] == f"/fabric/partitions/{p.pk}/?apply={rec.pk}"
    assert admin.get(f"/fabric/partitions/{p.pk}/apply/")["Location"] == f"/fabric/partitions/{p.pk}/"

    Fabric.objects.filter(pk=rails.pk).update(partitions_path="")
    resp = admin.post("/fabric/partitions/new/", form(rails, name="other", pkey="0x0222"), follow=True)
    assert "Not applied: fabric rails has no partitions file" in text(resp)
    assert PartitionApply.objects.count() == 1  # none requested for a fabric OpenSM reads no file from
    assert 'id="apply-no-file"' in text(resp)
