"""Pure parts: the dump_lfts parser, traces, bulk paths and the report over hand-built tables."""

from __future__ import annotations

import pytest

from routing.parsers import UNASSIGNED, LftParseError, parse_dump_lfts
from routing.paths import RouteError, group_loads, pair_paths, port_loads, trace
from routing.report import routing_report
from routing.services.collect import moved_lids, snapshot_digest, table_digest
from routing.tables import CA, SWITCH, build_tables
from tests.support.lft_rows import lft

DUMP = """\
Unicast lids [0x0-0x4] of switch DR path slid 0; dlid 0; 0,1 guid 0x0C42A10300A00100 (MF0;leaf-01:MQM8700/U1):
  Lid  Out   Destination
       Port     Info
0x0001 001 : (Channel Adapter portguid 0x1c34da0300400011: 'host001 mlx5_0')
0x0002 000 : (Switch portguid 0x0c42a10300a00100: 'MF0;leaf-01:MQM8700/U1')
0x0004 003 : (Channel Adapter portguid 0x1c34da0300400211: 'host003 mlx5_0')
3 valid lids dumped
Unicast lids [0x0-0x4] of switch Lid 3 guid 0x0c42a10300a00000 (spine):
0x0003 000 : (Switch portguid 0x0c42a10300a00000: 'spine')
1 valid lids dumped

*** WARNING ***: this command has been replaced by dump_fts
"""


def test_dump_lfts_parser_reads_tables_and_locates_errors():
    a, b = parse_dump_lfts(DUMP)
    assert (a.node_guid, a.lid, a.description) == ("0x0c42a10300a00100", 2, "MF0;leaf-01:MQM8700/U1")
    assert a.lft == bytes([UNASSIGNED, 1, 0, UNASSIGNED, 3])
    assert (b.node_guid, b.lid, b.lft) == ("0x0c42a10300a00000", 3, bytes([255, 255, 255, 0]))
    with pytest.raises(LftParseError) as e:
        parse_dump_lfts("0x0001 001 : (x)\n", source="f.txt")
    assert str(e.value) == "f.txt:1: LID entry before any 'Unicast lids ... of switch' header"
    bad = DUMP.replace("0x0004 003", "0x0009 003")
    with pytest.raises(LftParseError, match=r"dump_lfts:6: LID 0x9 outside the header's range"):
        parse_dump_lfts(bad)
    with pytest.raises(LftParseError, match=r":6: LID 0x1 listed twice"):
        parse_dump_lfts(DUMP.replace("0x0004 003", "0x0001 003"))
    with pytest.raises(LftParseError, match="out port 300 above 255"):
        parse_dump_lfts(DUMP.replace("0x0004 003", "0x0004 300"))


# A 2-leaf, 2-spine tree: leaf L1 (LID 10) hosts A (1) B (2) on ports 1, 2, up ports 3 (S1) 4 (S2);
# leaf L2 (LID 11) hosts C (3) D (4); spines S1 (LID 20), S2 (21) port 1 -> L1, port 2 -> L2.
SW = ["0xl1", "0xl2", "0xs1", "0xs2"]
LINKS = [
    ("0xa", 1, "0xl1", 1), ("0xb", 1, "0xl1", 2), ("0xc", 1, "0xl2", 1), ("0xd", 1, "0xl2", 2),
    ("0xl1", 3, "0xs1", 1), ("0xl1", 4, "0xs2", 1), ("0xl2", 3, "0xs1", 2), ("0xl2", 4, "0xs2", 2),
]  # fmt: skip
CAS = [("0xa", 1, "A", 1, 0), ("0xb", 1, "B", 2, 0), ("0xc", 1, "C", 3, 0), ("0xd", 1, "D", 4, 0)]


def tree(l1=None, l2=None, s1=None, s2=None):
    base = {
        "l1": {1: 1, 2: 2, 3: 3, 4: 4, 10: 0, 11: 3, 20: 3, 21: 4},  # C via S1, D via S2
        "l2": {1: 3, 2: 4, 3: 1, 4: 2, 11: 0, 10: 3, 20: 3, 21: 4},
        "s1": {1: 1, 2: 1, 3: 2, 4: 2, 10: 1, 11: 2, 20: 0, 21: 1},
        "s2": {1: 1, 2: 1, 3: 2, 4: 2, 10: 1, 11: 2, 21: 0, 20: 1},
    }
    for k, v in (("l1", l1), ("l2", l2), ("s1", s1), ("s2", s2)):
        base[k].update(v or {})
    switches = [
        ("0xl1", "L1", 10, lft(base["l1"]), 4),
        ("0xl2", "L2", 11, lft(base["l2"]), 4),
        ("0xs1", "S1", 20, lft(base["s1"]), 2),
        ("0xs2", "S2", 21, lft(base["s2"]), 2),
    ]
    return build_tables(switches, CAS, LINKS)


def test_trace_follows_the_tables_and_says_why_not():
    t = tree()
    tr = trace(t, 1, 4)  # A -> L1 port 4 -> S2 -> L2 port 2 -> D
    assert tr.src == (CA, 0) and tr.dst == (CA, 3)
    assert tr.switch_ports(t) == [
        ("0xl1", 1),
        ("0xl1", 4),
        ("0xs2", 1),
        ("0xs2", 2),
        ("0xl2", 4),
        ("0xl2", 2),
    ]
    assert trace(t, 1, 20).switch_ports(t) == [("0xl1", 1), ("0xl1", 3), ("0xs1", 1)]
    assert trace(t, 1, 20).dst == (SWITCH, 2)
    assert trace(t, 2, 2).hops == ()
    with pytest.raises(RouteError) as e:
        trace(t, 1, 99)
    assert e.value.reason == "unknown_lid"
    with pytest.raises(RouteError) as e:
        trace(tree(l1={3: UNASSIGNED}), 1, 3)
    assert e.value.reason == "no_route" and "L1 (LID 10) has no LFT entry for LID 3" in str(e.value)
    with pytest.raises(RouteError) as e:
        trace(tree(s1={3: 1}, l1={3: 3}), 1, 3)  # S1 sends C back to L1, L1 to S1: a loop
    assert e.value.reason == "loop"
    with pytest.raises(RouteError) as e:
        trace(tree(l1={3: 7}), 1, 3)
    assert e.value.reason == "dead_end"
    with pytest.raises(RouteError) as e:
        trace(tree(l2={3: 2}), 1, 3)  # L2 delivers C's LID to D
    assert e.value.reason == "wrong_end"


def test_pair_paths_and_port_loads_agree_with_traces():
    t = tree()
    lids = [1, 2, 3, 4]
    pairs = [(a, b) for a in lids for b in lids]
    paths = pair_paths(t, pairs)
    for (a, b), p in zip(pairs, paths, strict=True):
        if a == b:
            assert p == ()
            continue
        tr = trace(t, a, b)
        assert p == (-1 - tr.src[1], *[h.switch * 256 + h.out_port for h in tr.hops])
    loads, unrouted = port_loads(t, pairs)
    assert unrouted == []
    assert loads[-1] == 3  # A's port: its 3 destinations
    assert (
        loads[t.switch_port(0, 3)] == 2 and loads[t.switch_port(0, 4)] == 2
    )  # A, B -> C via S1, -> D via S2
    assert t.port_key(t.switch_port(2, 2)) == ("0xs1", 2)
    # a broken entry: the pairs through it are unrouted, their CA port not counted
    bad = tree(l1={3: UNASSIGNED})
    loads2, unrouted2 = port_loads(bad, pairs)
    assert sorted(unrouted2) == [(1, 3), (2, 3)] and loads2[-1] == 2
    assert pair_paths(bad, [(1, 3), (3, 1)])[0] is None


def test_report_counts_balance_hops_and_credit_loops():
    rep = routing_report(tree())
    assert rep["ca_pairs"] == 12 and rep["hops"] == {"2": 4, "4": 8} and rep["unrouted"]["pairs"] == 0
    port = {(p["guid"], p["port"]): p for p in rep["ports"]}
    assert port["0xl1", 3]["ca_lids"] == 1 and port["0xl1", 3]["dest_lids"] == 3  # C, L2, S1
    assert port["0xl1", 3]["paths"] == 2 and port["0xs1", 2]["paths"] == 2  # A, B -> C via S1
    leaf = {x["guid"]: x for x in rep["leaves"]}["0xl1"]
    assert leaf["up_ports"] == {"3": 1, "4": 1} and leaf["over_share"] == []
    assert rep["credit_loops"]["found"] is False
    # everything from L1 up through S1: up port 3 carries 2 CA LIDs, port 4 none -> unbalanced
    skew = routing_report(tree(l1={4: 3, 21: 3}))
    bal = {b["guid"]: b for b in skew["balance"]}["0xl1"]
    assert bal["ports"] == {"3": 2, "4": 0} and bal["unbalanced"] is True
    assert {x["guid"]: x for x in skew["leaves"]}["0xl1"]["over_share"] == [3]
    # up*/down* broken: C's traffic from L1 goes S1 -> L2 -> S2 -> L1 -> S1 ... a channel cycle
    looped = tree(s1={3: 2}, l2={3: 4}, s2={3: 1}, l1={3: 3})
    cl = routing_report(looped)["credit_loops"]
    assert cl["found"] is True and ("0xs1", 2) in [tuple(c) for c in cl["cycle"]]


def test_digests_and_moved_lids():
    a = bytes([255, 1, 2, 3])
    assert table_digest(a) == table_digest(a + bytes([255, 255]))  # the read length does not matter
    assert table_digest(a) != table_digest(bytes([255, 1, 2, 4]))
    assert moved_lids(a, bytes([255, 1, 3, 3, 5])) == 2
    assert snapshot_digest({"x": "1", "y": "2"}) == snapshot_digest({"y": "2", "x": "1"})
    assert snapshot_digest({"x": "1"}) != snapshot_digest({"x": "2"})


def test_group_loads_equal_port_loads_over_the_listed_pairs():
    for t in (tree(), tree(l1={3: UNASSIGNED}), tree(s1={3: 1}, l1={3: 3})):
        groups = [[1, 2, 3, 4], [1, 3], [2, 4, 99]]
        pairs = [(a, b) for g in groups for a in g for b in g if a != b]
        loads, unrouted = port_loads(t, pairs)
        g_loads, g_unrouted = group_loads(t, groups)
        assert +g_loads == +loads and g_unrouted == len(unrouted)


def test_credit_loop_without_a_forwarding_loop():
    """Every destination's routes are loop-free, yet four channels depend on each other in a ring
    (L1->S1 -> S1->L2 -> L2->S2 -> S2->L1 -> L1->S1): a CA E on S1 port 3 (LID 5), A reached from
    S1 the long way round, E reached from L2 through L1."""
    tables = {
        "l1": {1: 1, 2: 2, 3: 3, 4: 4, 5: 3, 10: 0, 11: 3, 20: 3, 21: 4},
        "l2": {1: 4, 2: 3, 3: 1, 4: 2, 5: 4, 11: 0, 10: 3, 20: 3, 21: 4},
        "s1": {1: 2, 2: 1, 3: 2, 4: 2, 5: 3, 10: 1, 11: 2, 20: 0, 21: 1},
        "s2": {1: 1, 2: 1, 3: 2, 4: 2, 5: 1, 10: 1, 11: 2, 21: 0, 20: 1},
    }
    switches = [
        ("0xl1", "L1", 10, lft(tables["l1"]), 4),
        ("0xl2", "L2", 11, lft(tables["l2"]), 4),
        ("0xs1", "S1", 20, lft(tables["s1"]), 3),
        ("0xs2", "S2", 21, lft(tables["s2"]), 2),
    ]
    t = build_tables(switches, [*CAS, ("0xe", 1, "E", 5, 0)], [*LINKS, ("0xe", 1, "0xs1", 3)])
    assert trace(t, 5, 1).switch_ports(t) == [
        ("0xs1", 3), ("0xs1", 2), ("0xl2", 3), ("0xl2", 4), ("0xs2", 2), ("0xs2", 1), ("0xl1", 4), ("0xl1", 1),
    ]  # fmt: skip
    rep = routing_report(t)
    assert rep["unrouted"]["pairs"] == 0
    cl = rep["credit_loops"]
    assert cl["found"] is True
    ring = {("0xl1", 3), ("0xs1", 2), ("0xl2", 4), ("0xs2", 1)}
    assert {tuple(c) for c in cl["cycle"]} == ring
    assert routing_report(tree())["credit_loops"]["found"] is False  # the same fabric routed up*/down*
