"""Routes against the fabric lab (ibsim + OpenSM + the real infiniband-diags), the diags as oracles:

* the tables read by SMPs (``lftpoll``) are ``dump_lfts``'s, switch by switch, and the
  ``dump_lfts`` fallback stores the same snapshot (same digest);
* traces over the stored tables give ``ibtracert``'s hops for every CA pair and a CA-switch pair;
* the report's per-port CA-LID counts and unbalanced flags are ``check_lft_balance -v``'s;
* a spine cable pulled: OpenSM re-routes, the new snapshot's moved LIDs per switch are the
  differences between ``dump_lfts`` before and after, with a ``routing.changed`` event;
* a stale stored topology (switch LIDs swapped) is seen by the SMP read (NodeInfo GUIDs), which
  falls back to ``dump_lfts``.

One lab (a 2-level fat tree: 3 leaves x 2 hosts, 2 spines) for the module.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from events.models import Event
from fabric.choices import NodeType
from fabric.guid import normalize_guid
from fabric.models import Fabric, Node
from fabric.parsers.route import parse_ibtracert
from fabric.services.discovery import discover
from fabric.signals import sm_state_changed
from lab.netgen import fat_tree_2level
from routing.models import RouteSource, RoutingSnapshot, SwitchRoute
from routing.parsers import UNASSIGNED, parse_dump_lfts
from routing.paths import port_loads, trace
from routing.services.collect import (
    _lftpoll,
    collect_routes,
    moved_lids,
    read_tables,
    snapshot_digest,
    table_digest,
)
from routing.services.current import clear_cache, current_routes, routing_report_for
from routing.tables import CA
from tests.support.waits import locked_is_not_yet, wait_for
from weft import inprocess

pytestmark = [pytest.mark.lab]

ROOT = Path(__file__).resolve().parents[2]


def _tables(lab) -> dict[str, bytes]:
    return {s.node_guid: s.lft for s in parse_dump_lfts(lab.run(["dump_lfts"]).stdout)}


def _umad_client(lab) -> subprocess.Popen:
    """Another umad client of the lab, attached to the SM's CA until killed (it holds an ibsim
    client slot); returns once it has opened its port."""
    code = (
        "import sys; from fabric.collectors.umad import Umad; "
        "u = Umad(None, None, 1000, mgmt_class=1, class_version=1); print('open', flush=True); sys.stdin.read()"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=lab.env, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdout.readline() == b"open\n"
    return proc


def _trim(b: bytes) -> bytes:
    return bytes(b).rstrip(bytes([UNASSIGNED]))


def _check_lft_balance(lab, tmp_path) -> dict[str, tuple[bool, dict[int, int]]]:
    """``{switch GUID: (unbalanced, {port: CA LIDs})}`` as ``check_lft_balance -v`` prints them."""
    cache = tmp_path / "ibnet.cache"
    lfts = tmp_path / "lfts.txt"
    lab.run(["ibnetdiscover", "--cache", str(cache)])
    lfts.write_text(lab.run(["dump_lfts"]).stdout)
    out = lab.run(["check_lft_balance", "-v", "-l", str(lfts), "-i", str(cache)]).stdout
    got: dict[str, tuple[bool, dict[int, int]]] = {}
    cur = None
    for line in out.splitlines():
        if m := re.match(r"^(Unbalanced )?Switch Port Usage: .*, (0x[0-9a-fA-F]+)$", line.strip()):
            cur = normalize_guid(m.group(2))
            got[cur] = (bool(m.group(1)), {})
        elif (m := re.match(r"^Port (\d+): (\d+)$", line.strip())) and cur:
            got[cur][1][int(m.group(1))] = int(m.group(2))
    assert got, f"check_lft_balance printed no switch: {out[:500]}"
    return got


@pytest.mark.django_db(transaction=True)
def test_routes_match_the_diags_and_follow_a_reroute(lab_factory, committed_signals, tmp_path, settings):
    lab = lab_factory(fat_tree_2level(3, 2, 2))
    # MASTER is not SUBNET UP: until OpenSM's first sweep has set every LFT, LID-routed SMPs (and
    # their answers) to a switch not yet routed are dropped
    lab.wait_subnet_up()
    fabric = Fabric.objects.create(name="routes", tool_env=dict(lab.tool_env))
    discover(fabric)
    clear_cache()

    # 1. SMP read == dump_lfts, and the dump_lfts fallback gives the very same snapshot. Two other
    # umad clients stay attached to the SM's CA meanwhile (as Weft's notice listener and a sweep
    # would be): ibsim puts the client's slot in bits 48..63 of every request's TID (a kernel puts
    # its agent's hi_tid in bits 32..63), and the reader must match the answers on the low 32 bits
    # it set (it did not, and lost every SMP whenever it was not the lab's first client)
    holders = [_umad_client(lab) for _ in range(2)]
    try:
        snap = collect_routes(fabric, reason="test")
        assert snap.switches == 5 and snap.moved == {}
        assert snap.source == RouteSource.MAD, snap.warnings
        switches = list(
            Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH)
            .order_by("lid")
            .values_list("node_guid", "lid")
        )
        records = _lftpoll(fabric, [lid for _g, lid in switches], 30)
    finally:
        for h in holders:
            h.kill()
            h.wait(10)
    assert [st for _l, st, _g, _t in records] == [0] * len(switches), records
    by_mad = {g: (f"0x{rg:016x}", t) for (g, _lid), (_l, _st, rg, t) in zip(switches, records, strict=True)}
    oracle = _tables(lab)
    stored = {r.node_guid: bytes(r.lft) for r in SwitchRoute.objects.filter(snapshot=snap)}
    assert set(stored) == set(oracle)
    for guid, lft in oracle.items():
        assert _trim(stored[guid]) == _trim(lft), guid
    for guid, (read_guid, lft) in by_mad.items():
        assert read_guid == guid and _trim(lft) == _trim(oracle[guid]), guid
    assert snapshot_digest({g: table_digest(t) for g, (_r, t) in by_mad.items()}) == snap.digest
    again = collect_routes(fabric, reason="test", use_mad=False)
    assert again.pk == snap.pk and again.checked >= snap.checked

    # 2. traces == ibtracert, every ordered CA pair and a CA -> switch pair
    t = current_routes(fabric).tables
    ca_lids = t.ca_lid_list()
    assert len(ca_lids) == 6
    pairs = [(a, b) for a in ca_lids for b in ca_lids if a != b]
    pairs.append((ca_lids[0], t.switch_lids[0]))
    for src, dst in pairs:
        want = parse_ibtracert(lab.run(["ibtracert", str(src), str(dst)]).stdout)
        assert trace(t, src, dst).switch_ports(t) == want, (src, dst)
    # the bulk path API counts the same ports the traces cross
    loads, unrouted = port_loads(t, pairs[:-1])
    assert unrouted == []
    from collections import Counter

    by_trace = Counter()
    for src, dst in pairs[:-1]:
        tr = trace(t, src, dst)
        by_trace[-1 - tr.src[1]] += 1
        for h in tr.hops:
            by_trace[h.switch * 256 + h.out_port] += 1
    assert +loads == by_trace

    # 3. balance == check_lft_balance -v (every switch, every port it counts)
    _cur, rep = routing_report_for(fabric)
    oracle_balance = _check_lft_balance(lab, tmp_path)
    mine = {b["guid"]: (b["unbalanced"], {int(p): n for p, n in b["ports"].items()}) for b in rep["balance"]}
    assert mine == oracle_balance
    assert rep["credit_loops"]["found"] is False and rep["unrouted"]["pairs"] == 0
    assert rep["ca_pairs"] == 30 and sum(rep["hops"].values()) == 30
    assert rep["hops"] == {"2": 6, "4": 24}  # 2 hosts per leaf: 3 x 2 pairs on one leaf, the rest via a spine

    # 4. pull a spine cable: OpenSM re-routes; the moved LIDs are dump_lfts's differences
    leaf, spine_port = "MF0;leaf-01:MQM8700/U1", 3  # leaf-01 port 3 -> spine-01
    lab.unlink(leaf, spine_port)
    reads = [oracle]

    def rerouted_and_settled():  # two reads in a row that agree and differ from before the unlink
        reads.append(_tables(lab))
        return reads[-1] != oracle and reads[-1] == reads[-2] and reads[-1]

    after = wait_for(rerouted_and_settled, 60, "OpenSM to re-route after the unlink")
    discover(fabric)
    new = collect_routes(fabric, reason="test")
    assert new.pk != snap.pk
    expected = {g: moved_lids(oracle[g], lft) for g, lft in after.items() if moved_lids(oracle[g], lft)}
    assert expected and new.moved["switches"] == expected
    assert new.moved["lids"] == sum(expected.values())
    ev = Event.objects.get(fabric=fabric, code="routing.changed")
    assert ev.details["lids"] == new.moved["lids"] and ev.details["snapshot"] == new.pk
    # the new routes still trace as ibtracert does, and none crosses the pulled cable
    t2 = current_routes(fabric).tables
    leaf_guid = lab.guid_of(leaf)
    for src, dst in pairs[:8]:
        want = parse_ibtracert(lab.run(["ibtracert", str(src), str(dst)]).stdout)
        got = trace(t2, src, dst).switch_ports(t2)
        assert got == want and (leaf_guid, spine_port) not in got
    # and the balance after the re-route (the pulled port: Down, no LIDs, left out) is the script's
    _cur, rep2 = routing_report_for(fabric)
    mine2 = {
        b["guid"]: (b["unbalanced"], {int(p): n for p, n in b["ports"].items()}) for b in rep2["balance"]
    }
    assert mine2 == _check_lft_balance(lab, tmp_path) and spine_port not in mine2[leaf_guid][1]

    # 5. a stale topology (two switches' LIDs swapped since the discovery): the SMP read sees other
    # GUIDs at those LIDs and the whole read falls back to dump_lfts, which names the switches itself
    a, b = Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH).order_by("lid")[:2]
    Node.objects.filter(pk=a.pk).update(lid=b.lid)
    Node.objects.filter(pk=b.pk).update(lid=a.lid)
    source, tables, warnings = read_tables(fabric)
    assert source == RouteSource.DUMP_LFTS and "(stale topology)" in warnings[0]
    assert {g: _trim(t) for g, (_l, t) in tables.items()} == {g: _trim(t) for g, t in _tables(lab).items()}
    Node.objects.filter(pk=a.pk).update(lid=a.lid)
    Node.objects.filter(pk=b.pk).update(lid=b.lid)

    # 6. (embedded deployment only: with PostgreSQL + Redis the pass is eager and queues nothing)
    if not settings.EMBEDDED:
        return
    # The embedded deployment: an SM move queues a read WEFT_ROUTING_SETTLE_S later on the
    # in-process pool (a timer: the pool has no countdown); it finds the same tables -> checked moves
    settings.WEFT_ROUTING_SETTLE_S = 0.5
    latest = RoutingSnapshot.objects.filter(fabric=fabric).latest("taken")
    inprocess.start(workers=1, beat=False)
    try:
        sm_state_changed.send(sender=Fabric, fabric_id=fabric.pk, events=[], moved=True, source="watch")
        wait_for(
            locked_is_not_yet(lambda: RoutingSnapshot.objects.get(pk=latest.pk).checked > latest.checked),
            60,
            "the routes read queued after the SM move",
        )
    finally:
        inprocess.stop(wait=True)
    assert RoutingSnapshot.objects.filter(fabric=fabric).latest("taken").pk == latest.pk


def test_lftpoll_refuses_bad_input_with_its_line():
    proc = subprocess.run(
        [sys.executable, "-m", "routing.collectors.lftpoll"],
        input=b"3\nfoo\n",
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 2 and b"stdin line 2" in proc.stderr and proc.stdout == b""
    assert CA == 2  # the endpoint kind the traces above compare through
