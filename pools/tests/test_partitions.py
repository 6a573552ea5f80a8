"""Pools and their partitions (PKeys): members follow the hosts a pool holds GPUs on, extra
members stay, an apply is queued (and coalesced) when the fabric has a partitions file, and the
pool API sets the PKey (Admin, validated). OpenSM itself: test_partitions_lab.py."""

from __future__ import annotations

import json

import pytest

from accounts.models import AuditEntry
from core.locks import single_instance
from fabric.choices import ApplyState, NodeType
from fabric.models import Fabric, Partition, PartitionMember, Port
from fabric.services.ingest import import_topology_text
from fabric.services.partitions import add_members, apply_pending, conf_digest, is_current, set_members
from fabric.signals import partitions_changed
from lab import netgen
from pools.lab import seed_lab_gpus
from pools.models import Gpu, Pool, Tenant, TenantMembership
from pools.services.allocation import AllocationRequest, allocate, release
from pools.services.partitions import (
    PoolPKeyError,
    set_pool_pkey,
    sync_fabric_pools,
    sync_pool_members,
)

STORAGE = "0x0002c90300aa0001"  # a storage node's port, not on the fabric


@pytest.fixture
def pod(db):
    """3 hosts × 2 HCAs (rail pod), 8 GPUs each; a tenant pool on the fabric."""
    fabric = import_topology_text("pod", netgen.rail_pod(hosts=3, rails=2), filename="pod.net").fabric
    seed_lab_gpus(fabric)
    tenant = Tenant.objects.create(name="t")
    pool = Pool.objects.create(name="train h100", tenant=tenant, fabric=fabric, quota_gpus=24)
    return fabric, pool


def _host_guids(fabric: Fabric, *hosts: str) -> list[str]:
    return sorted(
        Port.objects.filter(
            node__fabric=fabric, node__node_type=NodeType.CA, node__host__name__in=hosts
        ).values_list("port_guid", flat=True)
    )


def _members(partition: Partition, reason: str | None = None) -> list[str]:
    qs = PartitionMember.objects.filter(partition=partition)
    if reason:
        qs = qs.filter(reason=reason)
    return sorted(qs.values_list("port_guid", flat=True))


def _gpus_of(host: str) -> list[int]:
    return list(Gpu.objects.filter(host__name=host).order_by("index").values_list("pk", flat=True))


def test_members_follow_the_hosts_held_and_extra_members_stay(pod, django_capture_on_commit_callbacks):
    fabric, pool = pod
    part = set_pool_pkey(pool, 0x0A01)
    # named by the pool's id: partitions are fabric-level, the pool's name is its tenant's
    assert (part.pkey, part.name, part.fabric_id, part.ipoib) == (0x0A01, f"pool_{pool.pk}", fabric.pk, True)
    assert pool.partition == part and Pool.objects.get(pk=pool.pk).pkey == 0x0A01
    assert _members(part) == [] and part.applied_state == ApplyState.PENDING
    set_members(part, [(STORAGE, "limited")], reason="extra")

    with django_capture_on_commit_callbacks(execute=True):
        a1 = allocate(pool.pk, AllocationRequest(count=2, gpu_ids=_gpus_of("host001")[:2]))
    assert _members(part, "pool") == _host_guids(fabric, "host001")
    with django_capture_on_commit_callbacks(execute=True):
        a2 = allocate(pool.pk, AllocationRequest(kind="gpu", count=1, gpu_ids=_gpus_of("host003")[5:6]))
    assert _members(part, "pool") == _host_guids(fabric, "host001", "host003")
    assert len(_members(part, "pool")) == 4  # both HCAs of each host
    # a second allocation on a host already in changes nothing: no write, no audit entry
    entries = AuditEntry.objects.filter(action="partition.set_members").count()
    with django_capture_on_commit_callbacks(execute=True):
        a3 = allocate(pool.pk, AllocationRequest(count=1, gpu_ids=_gpus_of("host001")[2:3]))
    assert AuditEntry.objects.filter(action="partition.set_members").count() == entries
    with django_capture_on_commit_callbacks(execute=True):
        release(a1.pk)
    assert _members(part, "pool") == _host_guids(fabric, "host001", "host003")  # a3 still holds host001
    with django_capture_on_commit_callbacks(execute=True):
        release(a3.pk)
        release(a2.pk)
    assert _members(part, "pool") == []
    # the configured member stayed throughout, limited
    assert list(
        PartitionMember.objects.filter(partition=part).values_list("port_guid", "membership", "reason")
    ) == [(STORAGE, "limited", "extra")]
    part.refresh_from_db()
    assert part.applied_state == ApplyState.PENDING  # no partitions file: nothing applied by itself
    last = AuditEntry.objects.filter(action="partition.set_members").latest("pk")
    assert last.changes["reason"] == "pool" and last.changes["removed"] == 4


def test_a_host_already_an_extra_member_keeps_its_row(pod, django_capture_on_commit_callbacks):
    fabric, pool = pod
    part = set_pool_pkey(pool, 0x0A02)
    login = _host_guids(fabric, "host002")[0]
    set_members(part, [(login, "limited")], reason="extra")
    with django_capture_on_commit_callbacks(execute=True):
        allocate(pool.pk, AllocationRequest(count=8, gpu_ids=_gpus_of("host002")))
    rows = dict(PartitionMember.objects.filter(partition=part).values_list("port_guid", "reason"))
    assert rows == {login: "extra", _host_guids(fabric, "host002")[1]: "pool"}


def test_a_sync_with_a_host_held_by_another_reason_writes_nothing(pod, django_capture_on_commit_callbacks):
    # the UFM-compatible API claims a pool host's port (reason extra): later syncs find the pool's
    # members as they should be and write nothing (no audit entry, no apply queued)
    fabric, pool = pod
    part = set_pool_pkey(pool, 0x0A03)
    with django_capture_on_commit_callbacks(execute=True):
        allocate(pool.pk, AllocationRequest(count=8, gpu_ids=_gpus_of("host002")))
    claimed = _host_guids(fabric, "host002")[0]
    add_members(part, [claimed], reason="extra")
    entries = AuditEntry.objects.filter(action="partition.set_members").count()
    assert sync_pool_members(pool.pk) is None
    assert sync_pool_members(pool.pk) is None
    assert AuditEntry.objects.filter(action="partition.set_members").count() == entries
    assert _members(part, "pool") == _host_guids(fabric, "host002")[1:] and _members(part, "extra") == [
        claimed
    ]


def test_pkey_set_changed_moved_and_taken_away(pod):
    fabric, pool = pod
    allocate(pool.pk, AllocationRequest(count=1, gpu_ids=_gpus_of("host002")[:1]))
    part = set_pool_pkey(pool, 0x0B00)  # the members of what the pool already holds come at once
    assert _members(part, "pool") == _host_guids(fabric, "host002")
    same = set_pool_pkey(pool, 0x0B01)
    assert same.pk == part.pk and Partition.objects.get(pk=part.pk).pkey == 0x0B01
    with pytest.raises(PoolPKeyError, match="outside"):
        set_pool_pkey(pool, 0x7FFF)
    Partition.objects.create(fabric=fabric, name="storage", pkey=0x0C00)
    with pytest.raises(PoolPKeyError, match="already used"):
        set_pool_pkey(pool, 0x0C00)
    assert Partition.objects.get(pk=part.pk).pkey == 0x0B01  # unchanged
    # the pool moves to another fabric: its partition goes along (a new one there)
    other = import_topology_text("other", netgen.rail_pod(hosts=1, rails=1), filename="o.net").fabric
    pool.fabric = other
    pool.save()
    moved = set_pool_pkey(pool, 0x0B01)
    assert moved.fabric_id == other.pk and not Partition.objects.filter(pk=part.pk).exists()
    assert set_pool_pkey(pool, None) is None
    assert (
        not Partition.objects.filter(pk=moved.pk).exists() and Pool.objects.get(pk=pool.pk).partition is None
    )
    shared = Pool.objects.create(name="anywhere")
    with pytest.raises(PoolPKeyError, match="needs a fabric"):
        set_pool_pkey(shared, 0x0B02)


def test_sync_after_a_discovery_restores_the_members(pod, django_capture_on_commit_callbacks):
    fabric, pool = pod
    part = set_pool_pkey(pool, 0x0A03)
    with django_capture_on_commit_callbacks(execute=True):
        allocate(pool.pk, AllocationRequest(count=1, gpu_ids=_gpus_of("host003")[:1]))
    assert sync_fabric_pools(fabric.pk) == 0  # already current
    set_members(part, [], reason="pool", as_owner=True)  # as if the hosts' ports had changed
    assert sync_fabric_pools(fabric.pk) == 1
    assert _members(part, "pool") == _host_guids(fabric, "host003")
    assert sync_pool_members(Pool.objects.create(name="no-pkey").pk) is None


# --- apply after a change, coalesced -----------------------------------------------------------


@pytest.fixture
def applying(pod, tmp_path, settings):
    """The pod fabric with a partitions file and a reload command that tells no OpenSM: applies
    write the file; verification finds no lab (drift after 1 s)."""
    fabric, pool = pod
    fabric.partitions_path = str(tmp_path / "partitions.conf")
    fabric.sm_reload_command = ["true"]
    fabric.save()
    settings.WEFT_PARTITIONS_VERIFY_TIMEOUT_S = 1
    return fabric, pool


@pytest.fixture
def portless(db, tmp_path):
    """A fabric without ports, a partitions file and a reload command that tells no OpenSM:
    applies write the file and verify nothing (no port to read), so they end ``applied``."""
    return Fabric.objects.create(
        name="portless", partitions_path=str(tmp_path / "partitions.conf"), sm_reload_command=["true"]
    )


@pytest.mark.django_db(transaction=True)
def test_a_change_queues_an_apply_that_writes_the_file(applying, settings):
    fabric, pool = applying
    settings.WEFT_PARTITIONS_VERIFY_SAMPLE = 1
    part = set_pool_pkey(pool, 0x0A04)  # on commit: the apply task (run at once: no worker here)
    text = open(fabric.partitions_path).read()
    assert f"pool_{pool.pk}=0x0a04" in text and "Default=0x7fff" in text
    allocate(pool.pk, AllocationRequest(count=1, gpu_ids=_gpus_of("host002")[:1]))
    text = open(fabric.partitions_path).read()
    assert all(f"{g}=full" in text for g in _host_guids(fabric, "host002"))
    release(Pool.objects.get(pk=pool.pk).allocations.get().pk)
    assert _host_guids(fabric, "host002")[0] not in open(fabric.partitions_path).read()
    assert Partition.objects.get(pk=part.pk).applied_hash == conf_digest(fabric)


@pytest.mark.django_db(transaction=True)
def test_apply_pending_coalesces_and_never_loses_a_change(portless):
    fabric = portless
    part = Partition.objects.create(fabric=fabric, name="p", pkey=0x0A05)
    set_members(part, [STORAGE])

    # an apply of this fabric is running elsewhere: this one returns at once
    with single_instance(f"fabric.partitions_apply.{fabric.pk}", 60) as mine:
        assert mine
        out = apply_pending(fabric)
    assert out["applies"] == 0 and "running" in out["skipped"]

    # a change that commits while the apply runs (after the file was written) is applied by a
    # second round of the same call
    changed = []

    def change_during_apply(sender, applied=False, **kwargs):
        if applied and not changed:
            changed.append(1)
            set_members(Partition.objects.get(pk=part.pk), [STORAGE, "0x0002c90300aa0002"])

    partitions_changed.connect(change_during_apply, weak=False, dispatch_uid="t.change")
    try:
        out = apply_pending(fabric)
    finally:
        partitions_changed.disconnect(dispatch_uid="t.change")
    assert changed and out["applies"] == 2 and out["ok"] and out["skipped"] == ""
    assert "0x0002c90300aa0002=full" in open(fabric.partitions_path).read()
    assert is_current(fabric)
    # nothing changed since: no apply at all, unless forced or the file was replaced (an OpenSM
    # restarted with another file)
    assert apply_pending(fabric)["applies"] == 0
    assert apply_pending(fabric, force=True)["applies"] == 1
    with open(fabric.partitions_path, "w") as fh:
        fh.write("Default=0x7fff, ipoib : ALL=full ;\n")
    assert not is_current(fabric)
    assert apply_pending(fabric)["applies"] == 1 and is_current(fabric)


def test_a_partition_changed_while_its_apply_ran_stays_pending(portless):
    """The outcome of an apply that read a partition before a change (``updated`` moved on) does
    not mark the changed partition applied: it stays pending for the next apply."""
    from fabric.services.partitions.opensm import ApplyResult, record_outcome

    fabric = portless
    part = Partition.objects.create(fabric=fabric, name="p", pkey=0x0A06)
    set_members(part, [STORAGE])
    read_by_the_apply = Partition.objects.get(pk=part.pk)
    set_members(part, [STORAGE, "0x0002c90300aa0003"])
    other = Partition.objects.create(fabric=fabric, name="q", pkey=0x0A07)
    result = ApplyResult(fabric=fabric.name, ok=True, state=ApplyState.APPLIED, sha256="ab" * 32)
    record_outcome(fabric, [read_by_the_apply, other], result, None)
    assert Partition.objects.get(pk=part.pk).applied_state == ApplyState.PENDING
    assert Partition.objects.get(pk=other.pk).applied_state == ApplyState.APPLIED


# --- API ---------------------------------------------------------------------------------------


def test_api_admin_sets_the_pkey_and_sees_the_applied_state(
    pod, client_for, admin, users, django_capture_on_commit_callbacks
):
    fabric, pool = pod
    TenantMembership.objects.create(tenant=pool.tenant, user=users["operator"], role="operator")
    url = f"/api/pools/pools/{pool.pk}/"
    r = admin.patch(url, {"pkey": "0x0a10"}, format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    part = Partition.objects.get(fabric=fabric, pkey=0x0A10)
    assert body["pkey"] == 0x0A10 and body["partition"]["id"] == part.pk
    assert (body["partition"]["pkey_hex"], body["partition"]["applied_state"]) == ("0x0a10", "pending")
    entry = AuditEntry.objects.filter(action="pool.update").latest("pk")
    assert entry.changes == {"pkey": [None, 0x0A10]} and entry.user == users["admin"]
    assert AuditEntry.objects.filter(action="partition.create", object_id=str(part.pk)).exists()
    # an Operator of the tenant reads it, may allocate, but not set a PKey
    op = client_for("operator")
    assert op.get(url).json()["partition"]["name"] == f"pool_{pool.pk}"
    r = op.patch(url, {"pkey": 0x0A11}, format="json")
    assert r.status_code == 403 and Pool.objects.get(pk=pool.pk).pkey == 0x0A10
    with django_capture_on_commit_callbacks(execute=True):
        r = op.post("/api/pools/allocations/allocate/", {"pool": pool.pk, "count": 1}, format="json")
    assert r.status_code == 201
    assert _members(part, "pool") == _host_guids(fabric, "host001")  # the API's on-commit sync
    assert admin.get("/api/pools/pools/", {"pkey": 0x0A10}).json()["count"] == 1
    assert [p["name"] for p in admin.get("/api/pools/pools/", {"has_pkey": "false"}).json()["results"]] == []
    # changed in place, then taken away
    assert admin.patch(url, {"pkey": 0x0A12}, format="json").json()["partition"]["id"] == part.pk
    r = admin.patch(url, {"pkey": None}, format="json")
    assert r.status_code == 200 and (r.json()["pkey"], r.json()["partition"]) == (None, None)
    assert not Partition.objects.filter(pk=part.pk).exists()


@pytest.mark.parametrize(
    "body, field, message",
    [
        ({"pkey": "0x7fff"}, "pkey", "0x0001-0x7ffe"),
        ({"pkey": 0}, "pkey", "0x0001-0x7ffe"),
        ({"pkey": 0x8001}, "pkey", "0x0001-0x7ffe"),
        ({"pkey": "zz"}, "pkey", "integer or 0x hex"),
        ({"pkey": "0x0c00"}, "pkey", "already used on fabric pod by partition storage"),
        ({"pkey": 0x0A20, "fabric": None}, "pkey", "needs a fabric"),
        ({"fabric": None}, "fabric", "needs a fabric"),  # the pool has a PKey: it cannot lose its fabric
    ],
)
def test_api_bad_pkeys_are_400_on_the_field(pod, admin, body, field, message):
    fabric, pool = pod
    set_pool_pkey(pool, 0x0A01)
    Partition.objects.create(fabric=fabric, name="storage", pkey=0x0C00)
    r = admin.patch(f"/api/pools/pools/{pool.pk}/", body, format="json")
    assert r.status_code == 400 and message in " ".join(r.json()[field]), r.content
    pool.refresh_from_db()
    assert (pool.pkey, pool.fabric_id) == (0x0A01, fabric.pk)


def test_api_create_with_pkey_move_and_delete(pod, admin):
    fabric, _ = pod
    r = admin.post("/api/pools/pools/", {"name": "infer", "fabric": fabric.pk, "pkey": 0x0A30}, format="json")
    assert r.status_code == 201 and r.json()["partition"]["pkey_hex"] == "0x0a30", r.content
    pool = Pool.objects.get(name="infer")
    r = admin.post("/api/pools/pools/", {"name": "clash", "fabric": fabric.pk, "pkey": 0x0A30}, format="json")
    assert r.status_code == 400 and "already used" in r.json()["pkey"][0]
    assert not Pool.objects.filter(name="clash").exists()
    other = import_topology_text("other", netgen.rail_pod(hosts=1, rails=1), filename="o.net").fabric
    r = admin.patch(f"/api/pools/pools/{pool.pk}/", {"fabric": other.pk}, format="json")
    assert r.status_code == 200 and r.json()["pkey"] == 0x0A30
    assert list(Partition.objects.filter(pkey=0x0A30).values_list("fabric__name", flat=True)) == ["other"]
    assert admin.delete(f"/api/pools/pools/{pool.pk}/").status_code == 204
    assert not Partition.objects.filter(pkey=0x0A30).exists()


def test_pages_show_the_pkey_and_the_owning_pool(pod, client_for, users):
    fabric, pool = pod
    part = set_pool_pkey(pool, 0x0A40)
    TenantMembership.objects.create(tenant=pool.tenant, user=users["viewer"])
    html = client_for("viewer").get("/pools/").content.decode()
    cell = html[html.index('data-pool="train h100"') :]
    cell = cell[cell.index('class="pool-pkey"') : cell.index("</td>", cell.index('class="pool-pkey"'))]
    assert f'href="/fabric/partitions/{part.pk}/"' in cell and "0x0a40" in cell and "Not applied yet" in cell
    detail = client_for("viewer").get(f"/pools/{pool.pk}/").content.decode()
    dd = detail[detail.index('id="pool-pkey"') : detail.index("</dd>", detail.index('id="pool-pkey"'))]
    assert f'href="/fabric/partitions/{part.pk}/">0x0a40</a>' in dd and "Not applied yet" in dd
    page = client_for("viewer").get(f"/fabric/partitions/{part.pk}/").content.decode()
    assert f"pool #{pool.pk}</a>" in page and "train h100" not in page


def test_api_deleting_a_tenant_deletes_its_pools_partitions(pod, admin):
    fabric, pool = pod
    part = set_pool_pkey(pool, 0x0A60)
    assert admin.delete(f"/api/pools/tenants/{pool.tenant_id}/").status_code == 204
    assert not Pool.objects.filter(pk=pool.pk).exists() and not Partition.objects.filter(pk=part.pk).exists()


def test_api_a_pool_partition_is_changed_only_through_its_pool(pod, admin):
    """PKey, name, pool members and deletion of a pool's partition: 409 naming the pool, nothing
    changed (pool.pkey stays); the extra members and flags stay editable there."""
    fabric, pool = pod
    part = set_pool_pkey(pool, 0x0A40)
    url = f"/api/fabric/partitions/{part.pk}/"
    for method, path, body in [
        ("patch", url, {"pkey": "0x0a41"}),
        ("put", url + "members/", {"members": []}),
        ("put", url + "members/", {"members": [{"guid": STORAGE}], "reason": "pool"}),
        ("delete", url, None),
    ]:
        r = getattr(admin, method)(path, body, format="json")
        assert r.status_code == 409, (method, path, r.content)
        assert (
            f"belongs to pool {pool.name}" in r.json()["detail"] and "through the pool" in r.json()["detail"]
        )
    pool.refresh_from_db()
    assert (pool.pkey, pool.partition_id) == (0x0A40, part.pk)
    assert not AuditEntry.objects.filter(action__in=["partition.delete", "partition.update"]).exists()
    r = admin.put(url + "members/", {"members": [{"guid": STORAGE, "membership": "limited"}], "reason": "extra"},
                  format="json")  # fmt: skip
    assert r.status_code == 200 and r.json()["added"] == 1, r.content
    assert admin.patch(url, {"description": "tenant t"}, format="json").status_code == 200
    # through the pool it goes
    assert admin.patch(f"/api/pools/pools/{pool.pk}/", {"pkey": None}, format="json").status_code == 200
    assert not Partition.objects.filter(pk=part.pk).exists()


def test_an_apply_record_shows_a_tenant_user_only_the_partitions_they_see(pod, client_for, users, admin):
    """An apply's ``drift``/``unverified`` rows name partitions: a tenant member (issue 22: another
    tenant's pool partitions do not exist for them) gets the rows of fabric-wide partitions and of
    their own tenant's, never another tenant's name, PKey or member GUIDs; staff see every row."""
    from fabric.models import PartitionApply

    fabric, pool = pod
    other = Pool.objects.create(name="rival", tenant=Tenant.objects.create(name="rival-t"), fabric=fabric)
    mine, theirs = set_pool_pkey(pool, 0x0A40), set_pool_pkey(other, 0x0A41)
    shared = Partition.objects.create(fabric=fabric, name="storage", pkey=0x0B00)
    rows = [
        {"partition": p.name, "pkey": p.pkey_hex, "guid": STORAGE, "expected": "full"}
        for p in (mine, theirs, shared)
    ]
    rec = PartitionApply.objects.create(fabric=fabric, state="done", ok=False,
                                        result={"drift": rows, "unverified": rows, "state": "drift"})  # fmt: skip
    TenantMembership.objects.create(tenant=pool.tenant, user=users["viewer"])
    for url in (f"/api/fabric/partition-applies/{rec.pk}/", "/api/fabric/partition-applies/"):
        body = client_for("viewer").get(url).json()
        result = body["result"] if "result" in body else body["results"][0]["result"]
        for key in ("drift", "unverified"):
            assert [r["pkey"] for r in result[key]] == ["0x0a40", "0x0b00"], (url, result)
        assert "0x0a41" not in json.dumps(body) and theirs.name not in json.dumps(body)
    staff = admin.get(f"/api/fabric/partition-applies/{rec.pk}/").json()["result"]
    assert [r["pkey"] for r in staff["drift"]] == ["0x0a40", "0x0a41", "0x0b00"]
