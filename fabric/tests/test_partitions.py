"""Partitions service, commands and REST API on the database (no lab: the lab tests are in
``test_partitions_lab.py``). Real files from ``$WEFT_REALDATA/opensm``."""

from __future__ import annotations

import json
import logging

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.models import AuditEntry
from events.models import Event
from fabric.choices import ApplyState
from fabric.models import Fabric, Partition, PartitionApply, PartitionMember
from fabric.parsers.partitions import PartitionsParseError, parse_partitions
from fabric.services.partitions import (
    MERGE,
    REPLACE,
    PartitionError,
    add_members,
    apply,
    generate_conf,
    import_partitions,
    remove_members,
    save_partition,
    set_members,
)

pytestmark = pytest.mark.django_db

BENTWIRE = "opensm/bentwire_partitions.conf"
CEPH = "opensm/linuxrdma_2021-03_ceph.partitions.conf"


@pytest.fixture
def fabric(db) -> Fabric:
    return Fabric.objects.create(name="site")


def _state(fabric):
    return sorted(
        (p.pkey, p.name, p.source, sorted((m.port_guid, m.membership, m.reason) for m in p.members.all()))
        for p in Partition.objects.filter(fabric=fabric)
    )


def test_import_real_file_then_export_round_trips(fabric, realdata):
    raw = (realdata / BENTWIRE).read_text()
    # the file's Default=0xffff is 0x7fff with the membership bit: refused at its line (issue 22),
    # nothing written; the site writes 0x7fff and the file imports
    line = next(i for i, t in enumerate(raw.splitlines(), 1) if t.startswith("Default=0xffff"))
    with pytest.raises(PartitionsParseError) as err:
        import_partitions(fabric, raw, source=BENTWIRE)
    assert (err.value.line, "PKey 0xffff is the default" in err.value.message) == (line, True)
    assert not Partition.objects.filter(fabric=fabric).exists()
    text = raw.replace("Default=0xffff", "Default=0x7fff")
    summary = import_partitions(fabric, text, source=BENTWIRE)
    assert (summary.partitions, summary.members, summary.created) == (
        5,
        10,
        ["0x7fff", "0x0001", "0x0002", "0x0003", "0x1000"],
    )
    assert len(summary.warnings) == 4  # the four other PKeys with the membership bit set
    default = Partition.objects.get(fabric=fabric, pkey=0x7FFF)
    assert (default.name, default.is_default, default.ipoib, default.source) == (
        "Default",
        True,
        True,
        "imported",
    )
    exported = generate_conf(fabric)
    assert parse_partitions(exported).semantics() == parse_partitions(text).semantics()
    assert AuditEntry.objects.filter(action="partition.import").count() == 1


def test_import_ceph_keeps_flags_and_multicast_groups(fabric, realdata):
    text = (realdata / CEPH).read_text()
    import_partitions(fabric, text, source=CEPH)
    p = Partition.objects.get(fabric=fabric)
    assert (p.pkey, p.mtu, p.rate, p.scope, p.ipoib, len(p.mcast_groups)) == (0x7FFF, 4, 7, [2], True, 16)
    assert parse_partitions(generate_conf(fabric)).semantics() == parse_partitions(text).semantics()


def test_merge_keeps_others_replace_deletes_them_bad_file_writes_nothing(fabric, realdata):
    own = save_partition(Partition(fabric=fabric, name="pool_a", pkey=0x0123))
    set_members(own, ["0x10", ("0x11", "limited")], reason="pool")
    import_partitions(fabric, (realdata / BENTWIRE).read_text().replace("=0xffff", "=0x7fff"), mode=MERGE)
    assert Partition.objects.filter(fabric=fabric).count() == 6
    before = _state(fabric)
    bad = "Default=0x7fff : ALL=full ;\nX=0x0123 :\n 0x10=full,\n 0xnothex ;\n"
    with pytest.raises(PartitionsParseError) as err:
        import_partitions(fabric, bad, source="bad.conf", mode=REPLACE)
    assert (err.value.line, err.value.message) == (4, "bad PortGUID '0xnothex'")
    assert _state(fabric) == before
    summary = import_partitions(
        fabric, "Default=0x7fff, ipoib : ALL=full ;\nX=0x0123 : 0x10=full ;\n", mode=REPLACE
    )
    assert sorted(summary.deleted) == ["0x0001", "0x0002", "0x0003", "0x1000"]
    assert _state(fabric) == [
        (0x0123, "X", "imported", [("0x0000000000000010", "full", "imported")]),
        (0x7FFF, "Default", "imported", [("ALL", "full", "imported")]),
    ]


def test_import_refuses_a_partition_without_pkey_or_with_an_unstorable_name(fabric):
    with pytest.raises(PartitionsParseError, match="has no PKey"):
        import_partitions(fabric, "Default=0x7fff : ALL ;\nstorage, ipoib : ALL=full ;\n", source="s.conf")
    with pytest.raises(PartitionsParseError) as err:
        import_partitions(fabric, "Default=0x7fff : ALL ;\n\n2nd=0x10 : ALL=full ;\n", source="s.conf")
    assert (err.value.line, err.value.message.split(":")[0]) == (3, "partition '2nd' cannot be stored")
    assert not Partition.objects.exists()


def test_set_members_replaces_per_reason_and_marks_pending(fabric):
    p = save_partition(Partition(fabric=fabric, name="pool_a", pkey=0x22))
    set_members(p, [("0x20", "limited")], reason="extra")
    Partition.objects.filter(pk=p.pk).update(applied_state=ApplyState.APPLIED)
    change = set_members(p, ["0x1", "0x2", "0x20"], reason="pool")
    assert (change.added, change.kept) == (
        ["0x0000000000000001", "0x0000000000000002"],
        ["0x0000000000000020"],
    )
    change = set_members(p, ["0x2", "0x3"], reason="pool")
    assert (change.added, change.removed) == (["0x0000000000000003"], ["0x0000000000000001"])
    rows = sorted(
        PartitionMember.objects.filter(partition=p).values_list("port_guid", "membership", "reason")
    )
    assert rows == [
        ("0x0000000000000002", "full", "pool"),
        ("0x0000000000000003", "full", "pool"),
        ("0x0000000000000020", "limited", "extra"),
    ]
    p.refresh_from_db()
    assert p.applied_state == ApplyState.PENDING
    with pytest.raises(PartitionError, match="not a GUID"):
        set_members(p, ["host1"], reason="pool")
    assert PartitionMember.objects.filter(partition=p).count() == 3  # nothing half-written
    assert AuditEntry.objects.filter(action="partition.set_members").count() == 3


def test_add_and_remove_members_leave_the_others_and_claim_pool_rows(fabric):
    p = save_partition(Partition(fabric=fabric, name="jobs", pkey=0x23))
    set_members(p, ["0x1", "0x2"], reason="pool")
    Partition.objects.filter(pk=p.pk).update(applied_state=ApplyState.APPLIED)
    change = add_members(p, [("0x2", "full"), ("0x3", "limited")])
    # 0x2 was the pool's: an explicit add claims it, so the pool's next sync keeps it
    assert (change.added, change.changed, change.kept) == (
        ["0x0000000000000003"], ["0x0000000000000002"], [],
    )  # fmt: skip
    p.refresh_from_db()
    assert p.applied_state == ApplyState.PENDING
    set_members(p, [], reason="pool")  # the pool lets its hosts go
    rows = sorted(
        PartitionMember.objects.filter(partition=p).values_list("port_guid", "membership", "reason")
    )
    assert rows == [("0x0000000000000002", "full", "extra"), ("0x0000000000000003", "limited", "extra")]

    Partition.objects.filter(pk=p.pk).update(applied_state=ApplyState.APPLIED)
    assert add_members(p, [("0x3", "limited")]).as_dict() == {
        "added": 0,
        "removed": 0,
        "changed": 0,
        "kept": 1,
    }
    p.refresh_from_db()
    assert p.applied_state == ApplyState.APPLIED  # nothing changed: nothing to apply

    set_members(p, ["0x9"], reason="pool")
    change = remove_members(p, ["0x3", "0x9", "0x77"])
    assert (change.removed, change.kept) == (["0x0000000000000003"], ["0x0000000000000009"])
    assert sorted(PartitionMember.objects.filter(partition=p).values_list("port_guid", flat=True)) == [
        "0x0000000000000002", "0x0000000000000009",
    ]  # fmt: skip
    with pytest.raises(PartitionError, match="not a GUID"):
        remove_members(p, ["0x2", "nope"])
    with pytest.raises(PartitionError, match="membership"):
        add_members(p, [("0x5", "fullish")])
    assert PartitionMember.objects.filter(partition=p).count() == 2  # refusals wrote nothing
    actions = list(
        AuditEntry.objects.filter(action__startswith="partition.").values_list("action", flat=True)
    )
    assert actions.count("partition.add_members") == 2 and actions.count("partition.remove_members") == 1


def test_pkey_rules(fabric):
    save_partition(Partition(fabric=fabric, name="a", pkey=0x22))
    with pytest.raises(PartitionError, match="already used"):
        save_partition(Partition(fabric=fabric, name="b", pkey=0x22))
    with pytest.raises(PartitionError, match="outside"):
        save_partition(Partition(fabric=fabric, name="c", pkey=0x7FFF))
    other = Fabric.objects.create(name="other")
    save_partition(Partition(fabric=other, name="a", pkey=0x22))  # unique per fabric only


def test_apply_without_path_fails_with_event_and_no_write(fabric, settings):
    settings.WEFT_PARTITIONS_PATH = ""
    save_partition(Partition(fabric=fabric, name="a", pkey=0x22))
    result = apply(fabric, timeout=1)
    assert not result.ok and "no partitions file configured" in result.error
    assert Event.objects.filter(fabric=fabric, code="partition.apply_failed").count() == 1
    assert Partition.objects.get(fabric=fabric).applied_state == ApplyState.FAILED


def test_apply_without_signal_fails_after_writing_atomically(fabric, tmp_path, settings):
    settings.WEFT_SM_PID_FILE = ""
    target = tmp_path / "partitions.conf"
    target.write_text("old\n")
    fabric.partitions_path = str(target)
    fabric.save()
    result = apply(fabric, timeout=1)
    assert "no way to make OpenSM re-read" in result.error
    assert target.read_text() == generate_conf(fabric)
    assert [p.name for p in tmp_path.iterdir()] == ["partitions.conf"]  # no temporary file left


# --- commands -----------------------------------------------------------------------------------


def test_import_partitions_command(fabric, realdata, capsys, tmp_path):
    with pytest.raises(CommandError, match=r"bentwire_partitions.conf:1: PKey 0xffff is the default"):
        call_command("import_partitions", str(realdata / BENTWIRE), "--fabric", "site")
    fixed = tmp_path / "bentwire_partitions.conf"
    fixed.write_text((realdata / BENTWIRE).read_text().replace("Default=0xffff", "Default=0x7fff"))
    call_command("import_partitions", str(fixed), "--fabric", "site")
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (out["partitions"], out["members"], out["warnings"], out["mode"]) == (5, 10, 4, "merge")
    call_command("partitions", "--fabric", "site")
    printed = capsys.readouterr().out
    assert parse_partitions(printed).semantics() == parse_partitions(fixed.read_text()).semantics()


def test_import_partitions_command_bad_file(fabric, tmp_path):
    bad = tmp_path / "p.conf"
    bad.write_text("Default=0x7fff : ALL ;\nno header here ;\n")
    with pytest.raises(CommandError, match=rf"{bad}:2: no partition definition found"):
        call_command("import_partitions", str(bad), "--fabric", "site")
    assert not Partition.objects.exists()


# --- REST API -----------------------------------------------------------------------------------


def test_api_pkey_filter_takes_either_membership_and_refuses_what_is_not_16_bits(fabric, client_for):
    save_partition(Partition(fabric=fabric, name="a", pkey=0x0A01))
    viewer = client_for("viewer")

    def names(q):
        resp = viewer.get(f"/api/fabric/partitions/?fabric={fabric.pk}&pkey={q}")
        return resp.status_code, sorted(r["name"] for r in resp.json().get("results", []))

    assert names("0x0a01") == names("0x8a01") == names(str(0x0A01)) == (200, ["a"])
    for bad in ("-1", "0x18a01", "98303", "99999999999999999999"):  # masked to 15 bits before
        code, _ = names(bad)
        assert code == 400, bad
    assert viewer.get("/api/fabric/partitions/?pkey=abc").status_code == 400


def test_api_roles_crud_members_and_brief(fabric, client_for):
    viewer, admin = client_for("viewer"), client_for("admin")
    body = {"fabric": fabric.pk, "name": "pool_a", "pkey": "0x0123", "mtu": 4, "rate": 7}
    assert viewer.post("/api/fabric/partitions/", body, format="json").status_code == 403
    resp = admin.post("/api/fabric/partitions/", body, format="json")
    assert resp.status_code == 201, resp.json()
    pid = resp.json()["id"]
    assert (resp.json()["pkey"], resp.json()["pkey_hex"], resp.json()["applied_state"]) == (
        0x123,
        "0x0123",
        "pending",
    )
    clash = admin.post("/api/fabric/partitions/", body | {"name": "b"}, format="json")
    assert clash.status_code == 400 and "fabric, pkey must make a unique set" in str(clash.json()), (
        clash.json()
    )
    for bad in ({"pkey": "0x8123"}, {"pkey": 0}, {"mtu": 6}, {"rate": 1}, {"name": "has space"}):
        assert admin.post("/api/fabric/partitions/", body | bad, format="json").status_code == 400, bad
    members = {"members": [{"guid": "0x10"}, {"guid": "0x11", "membership": "limited"}], "reason": "pool"}
    assert viewer.put(f"/api/fabric/partitions/{pid}/members/", members, format="json").status_code == 403
    resp = admin.put(f"/api/fabric/partitions/{pid}/members/", members, format="json")
    assert resp.json() == {"added": 2, "removed": 0, "changed": 0, "kept": 0}
    got = viewer.get(f"/api/fabric/partitions/{pid}/members/").json()
    assert [(m["port_guid"], m["membership"], m["reason"], m["port"]) for m in got] == [
        ("0x0000000000000010", "full", "pool", None),
        ("0x0000000000000011", "limited", "pool", None),
    ]
    listed = viewer.get("/api/fabric/partitions/", {"fabric": fabric.pk, "pkey": "0x123"}).json()
    assert listed["count"] == 1 and listed["results"][0]["member_count"] == 2
    brief = viewer.get("/api/fabric/partitions/", {"brief": 1, "member": "0x11"}).json()["results"]
    assert set(brief[0]) == {"id", "url", "display", "name", "pkey", "pkey_hex", "applied_state"}
    assert admin.patch(f"/api/fabric/partitions/{pid}/", {"sl": 3}, format="json").json()["sl"] == 3
    conf = viewer.get(f"/api/fabric/fabrics/{fabric.pk}/partitions-conf/").json()
    assert "pool_a=0x0123, mtu=4, rate=7, sl=3 :" in conf["text"]
    assert conf["text"].startswith("# OpenSM partitions of fabric site") and conf["longest_line"] <= 100
    assert viewer.delete(f"/api/fabric/partitions/{pid}/").status_code == 403
    assert admin.delete(f"/api/fabric/partitions/{pid}/").status_code == 204
    assert {e.action for e in AuditEntry.objects.filter(object_type="fabric.partition")} >= {
        "partition.create", "partition.update", "partition.set_members", "partition.delete"
    }  # fmt: skip


def test_api_import_located_error_and_apply_failure(
    fabric, client_for, users, realdata, settings, django_capture_on_commit_callbacks
):
    settings.WEFT_PARTITIONS_PATH = ""
    admin = client_for("admin")
    bad = admin.post(
        "/api/fabric/partitions/import/",
        {"fabric": fabric.pk, "text": "Default=0x7fff : ALL ;\nP=0x5 : 0x0=full ;\n", "filename": "x.conf"},
        format="json",
    )
    assert bad.status_code == 400 and bad.json() == {
        "error": "x.conf:2: bad PortGUID '0x0'",
        "source": "x.conf",
        "line": 2,
    }
    raw = (realdata / BENTWIRE).read_text()
    refused = admin.post("/api/fabric/partitions/import/", {"fabric": fabric.pk, "text": raw}, format="json")
    assert refused.status_code == 400 and refused.json()["line"] == 1, refused.json()
    ok = admin.post(
        "/api/fabric/partitions/import/",
        {"fabric": fabric.pk, "text": raw.replace("Default=0xffff", "Default=0x7fff")},
        format="json",
    )
    assert ok.status_code == 201 and ok.json()["partitions"] == 5
    assert (
        client_for("viewer")
        .post("/api/fabric/partitions/apply/", {"fabric": fabric.pk}, format="json")
        .status_code
        == 403
    )
    # 202 at once with the apply's record; the worker (here: at commit, eagerly) runs it through
    # the coalesced path and the record says why it failed
    with django_capture_on_commit_callbacks(execute=True):
        resp = admin.post("/api/fabric/partitions/apply/", {"fabric": fabric.pk}, format="json")
    assert resp.status_code == 202 and resp.json()["state"] == "queued", resp.json()
    record = admin.get(f"/api/fabric/partition-applies/{resp.json()['id']}/").json()
    assert (record["state"], record["ok"], record["source"], record["requested_by"]) == (
        "failed",
        False,
        "api",
        users["admin"].username,
    ), record
    assert "no partitions file" in record["result"]["error"]
    assert Partition.objects.get(fabric=fabric, pkey=0x0001).applied_state == "failed"
    default = Partition.objects.get(fabric=fabric, pkey=0x7FFF)
    assert admin.delete(f"/api/fabric/partitions/{default.pk}/").status_code == 400


@pytest.mark.parametrize("timeout", ["NaN", "nan", "-inf", "inf"])
def test_api_apply_refuses_a_non_finite_timeout(fabric, client_for, users, timeout, caplog):
    """``{"timeout": "NaN"}`` passed DRF's FloatField and its min/max checks (NaN compares false):
    the record was written and its answer a 500 (JSON has no NaN). Now a 400 on the field, and no
    apply recorded."""
    with caplog.at_level(logging.INFO):
        resp = client_for("admin").post(
            "/api/fabric/partitions/apply/", {"fabric": fabric.pk, "timeout": timeout}, format="json"
        )
    assert resp.status_code == 400 and "timeout" in resp.json(), resp.content
    assert not PartitionApply.objects.exists()
    assert not [r for r in caplog.records if r.exc_info]


def test_api_the_name_default_is_the_default_partitions_only(fabric, client_for):
    """Weft writes ``Default=0x7fff`` first when no default partition is stored: a partition named
    ``Default`` with another PKey made a file with two ``Default`` partitions, which Weft's own
    import then refused ("name 'Default' is already PKey 0x0009's"): the export no longer imported
    back. The name is refused for any other PKey (an import's ``Default=0x7fff`` still takes it)."""
    admin = client_for("admin")
    resp = admin.post(
        "/api/fabric/partitions/", {"fabric": fabric.pk, "name": "Default", "pkey": 9}, format="json"
    )
    assert resp.status_code == 400 and "0x7fff" in resp.json()["name"][0], resp.content
    assert not Partition.objects.filter(fabric=fabric, name="Default").exists()
    renamed = admin.post(
        "/api/fabric/partitions/", {"fabric": fabric.pk, "name": "storage", "pkey": 9}, format="json"
    )
    assert renamed.status_code == 201
    moved = admin.patch(f"/api/fabric/partitions/{renamed.json()['id']}/", {"name": "Default"}, format="json")
    assert moved.status_code == 400 and Partition.objects.get(pkey=9).name == "storage"
    text = "Default=0x7fff, ipoib : ALL=full, SELF=full ;\nstorage=0x0009 : ;\n"
    imported = admin.post(
        "/api/fabric/partitions/import/", {"fabric": fabric.pk, "text": text}, format="json"
    )
    assert imported.status_code == 201 and Partition.objects.get(pkey=0x7FFF).name == "Default", (
        imported.content
    )


# --- pages --------------------------------------------------------------------------------------


def test_partition_pages(fabric, users, client):
    p = save_partition(Partition(fabric=fabric, name="pool_a", pkey=0x0123, mtu=4))
    set_members(p, [("0x10", "limited")], reason="extra")
    client.force_login(users["viewer"])
    listed = client.get("/fabric/partitions/", {"fabric": fabric.pk})
    assert listed.status_code == 200
    assert b'<tr data-pkey="0x0123">' in listed.content and b"Not applied yet" in listed.content
    page = client.get(f"/fabric/partitions/{p.pk}/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "0x0000000000000010" in body and "Limited" in body and "unverified: not in fabric" in body
    assert client.get("/fabric/partitions/999999/").status_code == 404


def test_partitions_command_configures_the_fabric(fabric, capsys):
    call_command(
        "partitions", "--fabric", "site", "--set-path", "/etc/opensm/partitions.conf",
        "--set-pid-file", "/run/opensm.pid", "--set-reload-command", "systemctl reload opensm",
    )  # fmt: skip
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["configured"]["sm_reload_command"] == ["systemctl", "reload", "opensm"]
    fabric.refresh_from_db()
    assert (fabric.partitions_path, fabric.sm_pid_file) == ("/etc/opensm/partitions.conf", "/run/opensm.pid")
    assert AuditEntry.objects.filter(action="fabric.partitions_config").count() == 1


def test_names_are_unique_per_fabric_and_owner_names_are_reserved(fabric, client_for):
    admin = client_for("admin")
    first = admin.post("/api/fabric/partitions/", {"fabric": fabric.pk, "name": "storage", "pkey": "0x30"},
                       format="json")  # fmt: skip
    assert first.status_code == 201, first.content
    for body, message in [
        ({"name": "storage", "pkey": "0x31"}, "name 'storage' is already used on fabric site by PKey 0x0030"),
        ({"name": "pool_1", "pkey": "0x32"}, "pool_<n> and job_<n> are the names"),
        ({"name": "job_26", "pkey": "0x33"}, "pool_<n> and job_<n> are the names"),
    ]:
        r = admin.post("/api/fabric/partitions/", {"fabric": fabric.pk} | body, format="json")
        assert r.status_code == 400 and message in r.json()["name"][0], r.content
    second = save_partition(Partition(fabric=fabric, name="scratch", pkey=0x34))
    r = admin.patch(f"/api/fabric/partitions/{second.pk}/", {"name": "storage"}, format="json")
    assert r.status_code == 400 and "already used" in r.json()["name"][0]
    assert sorted(Partition.objects.filter(fabric=fabric).values_list("name", flat=True)) == [
        "scratch",
        "storage",
    ]
    # another fabric may use the name; renaming to itself is no clash
    save_partition(Partition(fabric=Fabric.objects.create(name="b"), name="storage", pkey=0x35))
    r = admin.patch(f"/api/fabric/partitions/{second.pk}/", {"name": "scratch", "sl": 1}, format="json")
    assert r.status_code == 200, r.content
    # an import that would give a stored name to another PKey: located, nothing written
    with pytest.raises(PartitionsParseError) as err:
        import_partitions(fabric, "Default=0x7fff : ALL=full ;\n\nstorage=0x40 : ALL ;\n", source="p.conf")
    assert err.value.line == 3 and "name 'storage' is already PKey 0x0030's" in err.value.message
    with pytest.raises(PartitionsParseError) as err:
        import_partitions(fabric, "a=0x41 : ALL ;\na=0x42 : ALL ;\n", source="p.conf", mode=REPLACE)
    assert err.value.line == 2 and "(line 1)" in err.value.message
    assert not Partition.objects.filter(fabric=fabric, pkey__in=[0x40, 0x41, 0x42]).exists()


def test_drift_alarms_are_per_partition_not_per_pkey(fabric, django_capture_on_commit_callbacks):
    """A PKey freed by one partition and reused by the next (job 25's, then job 26's): each drift
    is its own alarm named after its partition, and the applied event clears both by name."""
    from events.models import Alarm
    from fabric.services.partitions.opensm import ApplyResult, record_outcome

    def drift(part):
        d = {"partition": part.name, "pkey": part.pkey_hex, "guid": "0x0000000000000010", "expected": "full",
             "seen": None}  # fmt: skip
        result = ApplyResult(
            fabric=fabric.name, ok=False, state=ApplyState.DRIFT, sha256="ab" * 32, drift=[d]
        )
        with django_capture_on_commit_callbacks(execute=True):
            record_outcome(fabric, [part], result, None)

    first = save_partition(Partition(fabric=fabric, name="train25", pkey=0x6000))
    drift(first)
    first.delete()
    second = save_partition(Partition(fabric=fabric, name="train26", pkey=0x6000))
    drift(second)
    alarms = Alarm.objects.filter(fabric=fabric, code="partition.drift").order_by("pk")
    assert [(a.object_key, a.object_repr, a.state) for a in alarms] == [
        ("site:0x6000:train25", "train25 (0x6000)", "active"),
        ("site:0x6000:train26", "train26 (0x6000)", "active"),
    ]
    ok = ApplyResult(fabric=fabric.name, ok=True, state=ApplyState.APPLIED, sha256="cd" * 32)
    with django_capture_on_commit_callbacks(execute=True):
        record_outcome(fabric, [second], ok, None)
    assert sorted(Alarm.objects.filter(fabric=fabric, code="partition.drift").values_list("state", flat=True)) == [
        "cleared", "cleared"
    ]  # fmt: skip


# --- names unique in the database ---------------------------------------------------------------


def test_the_database_refuses_a_second_name_and_a_race_is_the_checks_400(fabric, client_for, monkeypatch):
    """(fabric, name) is unique in the database: a write that passed the Python check because
    another committed meanwhile (simulated: the check skipped) is the check's own 400 on
    ``name``, in a savepoint (the caller's transaction goes on), not an IntegrityError."""
    from django.db import IntegrityError, transaction

    from fabric.services.partitions import edits as service

    save_partition(Partition(fabric=fabric, name="storage", pkey=0x30))
    with pytest.raises(IntegrityError), transaction.atomic():
        Partition.objects.create(fabric=fabric, name="storage", pkey=0x31)
    Partition.objects.create(fabric=Fabric.objects.create(name="b"), name="storage", pkey=0x31)  # per fabric
    monkeypatch.setattr(service, "_check_name", lambda partition, as_owner: None)
    with transaction.atomic():
        with pytest.raises(PartitionError) as err:
            save_partition(Partition(fabric=fabric, name="storage", pkey=0x32))
        assert (err.value.field, str(err.value)) == (
            "name",
            "name 'storage' is already used on fabric site by PKey 0x0030",
        )
        scratch = save_partition(Partition(fabric=fabric, name="scratch", pkey=0x33))  # still usable
    assert sorted(Partition.objects.filter(fabric=fabric).values_list("name", "pkey")) == [
        ("scratch", 0x33),
        ("storage", 0x30),
    ]
    admin = client_for("admin")
    r = admin.patch(f"/api/fabric/partitions/{scratch.pk}/", {"name": "storage"}, format="json")
    assert r.status_code == 400 and r.json() == {
        "name": ["name 'storage' is already used on fabric site by PKey 0x0030"]
    }, r.content
    r = admin.post("/api/fabric/partitions/", {"fabric": fabric.pk, "name": "storage", "pkey": "0x34"},
                   format="json")  # fmt: skip
    assert r.status_code == 400 and "already used on fabric site by PKey 0x0030" in r.json()["name"][0]
    assert not AuditEntry.objects.filter(action="partition.update").exists()
    assert Partition.objects.get(pk=scratch.pk).name == "scratch"


def test_an_import_may_swap_names_and_take_the_name_of_what_it_deletes(fabric):
    """The rows an import renames pass through a placeholder name and the ones it deletes go
    first, so the unique (fabric, name) never sees an intermediate clash; a name held by a
    partition that stays (the default in replace mode) is a located error."""
    import_partitions(fabric, "Default=0x7fff : ALL=full ;\na=0x10 : ALL=full ;\nb=0x11 : ;\nc=0x12 : ;\n")
    ids = dict(Partition.objects.filter(fabric=fabric).values_list("pkey", "pk"))
    summary = import_partitions(fabric, "b=0x10 : ALL=full ;\na=0x11 : ;\n", source="swap.conf")
    assert sorted(summary.updated) == ["0x0010", "0x0011"]
    summary = import_partitions(fabric, "Default=0x7fff : ALL=full ;\nc=0x13 : ;\nb=0x10 : ;\n", mode=REPLACE)
    assert (summary.created, summary.deleted) == (["0x0013"], ["0x0011", "0x0012"])
    assert sorted(Partition.objects.filter(fabric=fabric).values_list("pkey", "name", "pk")) == [
        (0x10, "b", ids[0x10]),
        (0x13, "c", Partition.objects.get(fabric=fabric, pkey=0x13).pk),
        (0x7FFF, "Default", ids[0x7FFF]),
    ]
    before = _state(fabric)
    with pytest.raises(PartitionsParseError) as err:
        import_partitions(fabric, "b=0x10 : ;\n\nDefault=0x20 : ALL=full ;\n", source="d.conf", mode=REPLACE)
    assert (err.value.line, err.value.message) == (
        3,
        "partition name 'Default' is already PKey 0x7fff's (a stored partition that stays): names are "
        "unique per fabric",
    )
    assert _state(fabric) == before


def test_import_of_a_file_with_a_bom_and_a_too_long_name_says_what_is_wrong(fabric):
    """An editor's byte order mark is not part of the first name; a name of letters that is too
    long is told it is too long, not that its characters are wrong."""
    summary = import_partitions(fabric, "\ufeffbomA=0x0a01 : ALL ;\n", source="bom.conf")
    assert summary.created == ["0x0a01"]
    assert Partition.objects.get(fabric=fabric, pkey=0x0A01).name == "bomA"
    with pytest.raises(PartitionsParseError) as err:
        import_partitions(fabric, f"{'a' * 300}=0x0a02 : ALL ;\n", source="long.conf")
    assert "at most 64 characters" in str(err.value) and "letters, digits" not in str(err.value)
    assert err.value.line == 1 and not Partition.objects.filter(pkey=0x0A02).exists()
