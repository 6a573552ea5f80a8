"""Partitions applied by the real OpenSM of the lab (ibsim + OpenSM + smpquery).

Weft writes the partitions file OpenSM was started with (``-P``), SIGHUPs OpenSM through the pid
file and verifies with ``smpquery pkeys``; the tests check the ports' P_Key tables themselves with
the lab's own ``smpquery`` runs (not through Weft's verification) and OpenSM's log."""

from __future__ import annotations

import pytest

from events.models import Event
from fabric.choices import ApplyState, NodeType
from fabric.models import Fabric, Host, Partition, Port
from fabric.parsers.partitions import MAX_LINE, parse_smpquery_pkeys
from fabric.services.discovery import discover
from fabric.services.partitions import apply, delete_partition, save_partition, set_members
from lab import netgen

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def lab_fabric(lab_factory, committed_signals):
    lab = lab_factory(netgen.fat_tree_2level(2, 1, 4))  # 8 single-HCA hosts
    fabric = Fabric.objects.create(
        name="pk",
        tool_env=dict(lab.tool_env),
        partitions_path=str(lab.partitions_path),
        sm_pid_file=str(lab.sm_pid_file),
    )
    discover(fabric)
    return lab, fabric


def _host_guids(fabric, name: str) -> list[str]:
    host = Host.objects.get(fabric=fabric, name=name)
    return list(
        Port.objects.filter(node__host=host, node__node_type=NodeType.CA)
        .exclude(port_guid="")
        .values_list("port_guid", flat=True)
    )


def _table(lab, guid: str):
    return parse_smpquery_pkeys(lab.run(["smpquery", "pkeys", "-G", guid]).stdout)


def _ca_guids(fabric) -> list[str]:
    return sorted(
        Port.objects.filter(node__fabric=fabric, node__node_type=NodeType.CA)
        .exclude(port_guid="")
        .values_list("port_guid", flat=True)
    )


def test_two_hosts_get_the_pkey_others_do_not_and_removal_clears_it(lab_fabric):
    lab, fabric = lab_fabric
    hosts = sorted(Host.objects.filter(fabric=fabric).values_list("name", flat=True))
    assert len(hosts) == 8
    members = _host_guids(fabric, hosts[1]) + _host_guids(fabric, hosts[5])
    assert len(members) == 2
    part = save_partition(Partition(fabric=fabric, name="pool_a", pkey=0x0123, ipoib=True, mtu=4))
    set_members(part, members, reason="pool")
    storage = _ca_guids(fabric)[-1] if _ca_guids(fabric)[-1] not in members else _ca_guids(fabric)[-2]
    set_members(part, [(storage, "limited")], reason="extra")

    offset = lab.sm_log_size()
    result = apply(fabric, timeout=30)
    assert result.ok, result.as_dict()
    print(f"two hosts: apply+verify {result.seconds:.2f} s, {result.checked_ports} ports checked")
    assert (
        result.signalled.startswith("SIGHUP to pid ") and int(result.signalled.split()[-1]) == lab.sm_pids[0]
    )
    # OpenSM re-read the file: a new sweep ran after the SIGHUP, without a partitions complaint
    assert b"SUBNET UP" in lab.sm_log_since(offset)
    assert lab.partition_errors(offset) == []
    assert result.checked_ports >= 4
    for guid in _ca_guids(fabric):
        expected = "full" if guid in members else "limited" if guid == storage else None
        assert _table(lab, guid).membership(0x0123) == expected, guid
    part.refresh_from_db()
    assert (part.applied_state, part.drift) == (ApplyState.APPLIED, [])
    assert part.applied_hash == result.sha256
    assert Event.objects.filter(fabric=fabric, code="partition.applied").count() == 1

    # one host leaves the pool: its port loses the PKey
    set_members(part, members[:1], reason="pool")
    assert apply(fabric, timeout=30).ok
    assert _table(lab, members[1]).membership(0x0123) is None
    assert _table(lab, members[0]).membership(0x0123) == "full"

    # the partition is deleted: the PKey is gone from every port
    delete_partition(part)
    assert apply(fabric, timeout=30).ok
    for guid in _ca_guids(fabric):
        table = _table(lab, guid)
        assert table.membership(0x0123) is None, guid
        assert table.membership(0x7FFF) == "full"  # the default partition stays


def test_2000_member_partition_is_wrapped_and_honoured(lab_fabric):
    lab, fabric = lab_fabric
    real = _ca_guids(fabric)[:3]
    made_up = [f"0x0002c903ff{i:06x}" for i in range(2000 - len(real))]  # not on this fabric
    part = save_partition(Partition(fabric=fabric, name="big", pkey=0x0456))
    change = set_members(part, made_up + real, reason="pool")
    assert len(change.added) == 2000
    offset = lab.sm_log_size()
    result = apply(fabric, timeout=30)
    assert result.ok, result.as_dict()
    text = lab.partitions_path.read_text()
    print(
        f"2000 members: {result.bytes} bytes, {result.lines} lines, longest {result.longest_line}, "
        f"apply+verify {result.seconds:.2f} s, {result.checked_ports} ports checked"
    )
    assert result.longest_line == max(map(len, text.splitlines())) <= MAX_LINE
    assert len(text) > 2 * MAX_LINE  # on one line it would be far over the limit
    assert lab.partition_errors(offset) == []
    assert b"SUBNET UP" in lab.sm_log_since(offset)
    for guid in _ca_guids(fabric):
        assert _table(lab, guid).membership(0x0456) == ("full" if guid in real else None), guid


def test_apply_with_a_dead_pid_fails_with_an_event(lab_fabric, tmp_path):
    lab, fabric = lab_fabric
    save_partition(Partition(fabric=fabric, name="p", pkey=0x10))
    pid_file = tmp_path / "opensm.pid"
    pid_file.write_text("999999999\n")
    fabric.sm_pid_file = str(pid_file)
    fabric.save()
    result = apply(fabric, timeout=5)
    assert not result.ok and "SIGHUP to OpenSM pid 999999999" in result.error
    assert Partition.objects.get(fabric=fabric, pkey=0x10).applied_state == ApplyState.FAILED
    assert Event.objects.filter(fabric=fabric, code="partition.apply_failed").count() == 1


def test_opensm_not_rereading_is_drift(lab_fabric):
    lab, fabric = lab_fabric
    members = _ca_guids(fabric)[:2]
    part = save_partition(Partition(fabric=fabric, name="p", pkey=0x0789))
    set_members(part, members)
    fabric.sm_reload_command = ["true"]  # "succeeds" without telling OpenSM anything
    fabric.save()
    result = apply(fabric, timeout=3, sample=4)
    assert not result.ok and result.state == ApplyState.DRIFT
    assert {(d["guid"], d["expected"], d["seen"]) for d in result.drift} == {
        (g, "full", None) for g in members
    }
    part.refresh_from_db()
    assert part.applied_state == ApplyState.DRIFT and len(part.drift) == 2
    drift = Event.objects.get(fabric=fabric, code="partition.drift")
    assert drift.object_key == "pk:0x0789:p"
    # SIGHUP after all: applied, and the applied event follows (it clears the drift alarm)
    fabric.sm_reload_command = []
    fabric.save()
    assert apply(fabric, timeout=30).ok
    assert [_table(lab, g).membership(0x0789) for g in members] == ["full", "full"]


def test_a_shutdown_during_verification_records_nothing_and_returns_at_once(lab_fabric, monkeypatch):
    """The worker stops (``abort_all``) while the apply waits for OpenSM: the apply returns within
    seconds, not after its verification timeout, and reports no drift (no event, no alarm, no
    mail); the partition stays ``pending`` so the next start applies it."""
    import threading
    import time

    from fabric.collectors import tools

    lab, fabric = lab_fabric
    monkeypatch.setattr(tools, "_abort_reason", "")  # restored after the test: this process goes on
    part = save_partition(Partition(fabric=fabric, name="p", pkey=0x0799))
    set_members(part, _ca_guids(fabric)[:2])
    fabric.sm_reload_command = ["true"]  # OpenSM never re-reads: verification would wait 60 s
    fabric.save()
    timer = threading.Timer(1.0, tools.abort_all, args=("the demo is stopping",))
    timer.start()
    t0 = time.monotonic()
    try:
        result = apply(fabric, timeout=60, sample=4)
    finally:
        timer.cancel()
    took = time.monotonic() - t0
    assert took < 15, took
    assert not result.ok and result.state == ApplyState.PENDING and not result.drift
    assert "interrupted" in result.error and "the demo is stopping" in result.error
    part.refresh_from_db()
    assert part.applied_state == ApplyState.PENDING and part.drift == []
    assert not Event.objects.filter(fabric=fabric, code__startswith="partition.").exists()


def test_an_empty_partition_next_to_a_populated_one_keeps_its_pkey_on_the_ports(lab_fabric, monkeypatch):
    """A partition without members (a pool given a PKey before it holds GPUs) is written as one
    line OpenSM accepts: the file is not dropped, the populated partition's PKey stays."""
    lab, fabric = lab_fabric
    members = _ca_guids(fabric)[:2]
    pool = save_partition(Partition(fabric=fabric, name="pool_x", pkey=0x0A04, ipoib=True))
    set_members(pool, members, reason="pool")
    save_partition(Partition(fabric=fabric, name="emptyp", pkey=0x0A05, ipoib=True))
    offset = lab.sm_log_size()
    result = apply(fabric, timeout=30)
    assert result.ok, result.as_dict()
    assert "emptyp=0x0a05, ipoib : ;" in lab.partitions_path.read_text().splitlines()
    assert lab.partition_errors(offset) == []
    for guid in _ca_guids(fabric):
        table = _table(lab, guid)
        assert table.membership(0x0A04) == ("full" if guid in members else None), guid
        assert table.membership(0x0A05) is None, guid
    # the populated partition is emptied too: both empty, the file still applies; and a first
    # verification round that reads no port at all (a slow fabric: the demo on a loaded machine
    # read 30 of 40 ports in it) goes on reading for the rest of the timeout: it failed the apply
    # "not verified ... within 30 s" after that first round alone
    from fabric.services.partitions import opensm, verify

    monkeypatch.setattr(opensm, "RESIGNAL_AFTER_S", verify.MIN_READ_S - 0.1)
    set_members(pool, [], reason="pool")
    offset = lab.sm_log_size()
    emptied = apply(fabric, timeout=30)
    assert emptied.ok and emptied.unverified == [] and emptied.checked_ports >= 2, emptied.as_dict()
    assert lab.partition_errors(offset) == []
    assert [_table(lab, g).membership(0x0A04) for g in members] == [None, None]


def test_a_hung_smpquery_is_bounded_by_the_verify_timeout_and_is_no_drift(lab_fabric, settings):
    """The fabric hangs (ibsim frozen) after OpenSM was told to re-read: every ``smpquery pkeys``
    hangs. Verification gives up at WEFT_PARTITIONS_VERIFY_TIMEOUT_S in all (not that per port:
    6 ports took 6 x the timeout) and records a failed verification (``partition.apply_failed``
    naming the unread ports), not drift "expected full, seen None"."""
    import time

    lab, fabric = lab_fabric
    settings.WEFT_PARTITIONS_VERIFY_TIMEOUT_S = 5
    members = _ca_guids(fabric)[:2]
    part = save_partition(Partition(fabric=fabric, name="p", pkey=0x0791))
    set_members(part, members)
    lab.hang()
    t0 = time.monotonic()
    result = apply(fabric, sample=4)
    took = time.monotonic() - t0
    print(f"hung fabric: apply gave up after {took:.2f} s, {result.checked_ports} ports planned")
    assert result.checked_ports == 6  # 2 members + 4 non-members: 6 reads of 5 s before the fix
    assert took < 5 + 4, took  # the timeout, plus the kill of the hung tool and the bookkeeping
    assert not result.ok and result.state == ApplyState.FAILED and result.drift == []
    assert 1 <= len(result.unverified) <= 6 and {u["guid"] for u in result.unverified} <= set(
        _ca_guids(fabric)
    )
    assert "not verified" in result.error and "could not be read within 5 s" in result.error
    # ports, not checks (a port has one check per partition: "230 of 106" was seen)
    unread = len({u["guid"] for u in result.unverified})
    assert f"{unread} of the 6 sampled port(s) could not be read" in result.error, result.error
    part.refresh_from_db()
    assert part.applied_state == ApplyState.FAILED and "not verified" in part.apply_error and part.drift == []
    assert not Event.objects.filter(fabric=fabric, code="partition.drift").exists()
    failed = Event.objects.get(fabric=fabric, code="partition.apply_failed")
    assert failed.details["unverified"][0]["error"] == "smpquery did not finish within 5 s (killed)"


def test_members_are_checked_the_state_follows_opensm_and_the_reconcile_repairs_a_recreated_opensm(
    lab_fabric,
):
    """Issue 23 §3 and issue 22 on the real OpenSM: a node GUID is refused naming its port GUIDs;
    a GUID not in the fabric is taken and the state says "applied to 2 of 3 members, 1 not
    verifiable"; the state turns applied as soon as the ports read right (seconds from SIGHUP to
    the verified state printed: the target is 10 s on the demo fabric); an OpenSM that re-reads
    another file (recreated) loses the PKey while the database says applied, and the reconcile
    finds it (file and ports), alarms and re-applies."""
    from fabric.models import Node
    from fabric.services.partitions import PartitionError, reconcile

    lab, fabric = lab_fabric
    members = _ca_guids(fabric)[:2]
    node = Node.objects.get(ports__port_guid=members[0])
    assert node.node_guid != members[0]  # a CA: its node GUID names no port
    part = save_partition(Partition(fabric=fabric, name="tenant_v", pkey=0x0A11, ipoib=True))
    with pytest.raises(PartitionError, match=rf"member {node.node_guid} is the node GUID of .*{members[0]}"):
        set_members(part, [node.node_guid])
    set_members(part, [*members, "0xdeadbeefdeadbeef"])
    result = apply(fabric, timeout=30)
    assert result.ok and result.state == ApplyState.APPLIED, result.as_dict()
    part.refresh_from_db()
    assert part.applied_state == ApplyState.PARTIAL
    assert part.applied_status == "applied to 2 of 3 members, 1 not verifiable"
    assert [_table(lab, g).membership(0x0A11) for g in members] == ["full", "full"]
    print(f"SIGHUP to verified: {result.verify_seconds:.2f} s ({result.checked_ports} ports read)")
    assert result.verify_seconds < 30

    # OpenSM recreated with another file: only the default PKey on the ports, the database says applied
    lab.set_partitions("Default=0x7fff, ipoib : ALL=full ;\n")
    assert _table(lab, members[0]).membership(0x0A11) is None
    assert Partition.objects.get(pk=part.pk).applied_state == ApplyState.PARTIAL
    out = reconcile(fabric)
    assert out.file and out.events == ["partition.reconcile_drift"], out.as_dict()
    assert out.reapplied["ok"] is True and out.reapplied["applies"] == 1, out.reapplied
    assert [_table(lab, g).membership(0x0A11) for g in members] == ["full", "full"]
    codes = list(Event.objects.filter(fabric=fabric).order_by("pk").values_list("code", flat=True))
    assert codes[-2:] == ["partition.reconcile_drift", "partition.applied"]  # the alarm, then its clear
    assert reconcile(fabric).events == []  # nothing left to repair: the file and the ports agree


def test_an_apply_after_an_sm_failover_reaches_the_new_master(lab_factory, committed_signals):
    """Issue 22: with an HA pair (a standby OpenSM), killing the master by pid makes the standby
    master; an apply signals the master sminfo names (``Fabric.sm_pid_files``), not the dead
    master's remembered pid (which fails: that OpenSM is not running)."""
    from lab import netgen

    lab = lab_factory(netgen.two_switch_four_ca(), standby_sm="Hca4", sm_node="Hca2")
    fabric = Fabric.objects.create(name="ha", tool_env=dict(lab.tool_env), partitions_path=str(lab.partitions_path),
                                   sm_pid_files=lab.sm_pid_files)  # fmt: skip
    discover(fabric)
    members = [g for g in _ca_guids(fabric) if g not in lab.sm_pid_files][:2]
    part = save_partition(Partition(fabric=fabric, name="ha_p", pkey=0x0A21))
    pids = dict(zip(lab.sm_pid_files, lab.sm_pids, strict=True))  # port GUID -> OpenSM pid
    dead_master = lab.sm_info()["guid"]
    # (no apply before the fail-over: with a standby joining, ibsim's OpenSM 3.3 master at times
    # stops sweeping, SIGHUP or not; the standby that takes over sweeps normally)
    lab.kill_master_sm()
    new = lab.wait_master(timeout=60, guid="Hca4")
    assert new["guid"] != dead_master
    set_members(part, members)
    # the remembered pid of the dead master: the apply fails, as it did before
    old = Fabric.objects.get(pk=fabric.pk)
    old.sm_pid_files, old.sm_pid_file = {}, lab.sm_pid_files[dead_master]
    failed = apply(old, timeout=5)
    assert not failed.ok and "OpenSM is not running" in failed.error
    # the master sminfo names now
    fabric.refresh_from_db()
    result = apply(fabric, timeout=30)
    assert result.ok and result.signalled.startswith(f"SIGHUP to pid {pids[new['guid']]}"), result.as_dict()
    assert [_table(lab, g).membership(0x0A21) for g in members] == ["full", "full"]
