"""Partial discoveries (issue 10): only a line saying a node or port was not reached makes a run
partial, and a partial run withholds removals only for what lies behind its failed MADs.

Unit tests on the stderr lines of real rdma-core builds and on the ingest; lab tests with the
real ibnetdiscover on Weft's lab library and on a lab started on ibsim's default socket (where
umad2sim prints ``ibwarn: ... sim_connect: attached as client N at node ...``).
"""

from __future__ import annotations

import pytest

from events.models import Event
from fabric.choices import DiscoveryStatus, PortState
from fabric.collectors.ibnetdiscover import (
    FailedMad,
    collect_topology,
    failed_paths,
    partial_lines,
    resolve_failed_ports,
)
from fabric.collectors.tools import UMAD2SIM_LIB
from fabric.keys import link_ends, link_key_str
from fabric.models import Fabric, Link, Node, Port
from fabric.parsers import parse_ibnetdiscover
from fabric.parsers.ibnetdiscover import derived_guid
from fabric.services.discovery import discover
from fabric.services.ingest import ingest_topology, summary
from tests.support.topologies import BASE

G = derived_guid

ATTACHED = 'ibwarn: [1929] sim_connect: attached as client 1 at node "spine1"'
NEW_BUILD = (
    "src/query_smp.c:195; umad (DR path slid 0; dlid 0; 0,1,8,2 Attr 0x11:0) bad status 110; "
    "Connection timed out"
)
OLD_BUILD = (
    "./libibnetdisc/query_smp.c:186; umad (DR path slid 0; dlid 0; 0,1,7,2 Attr 0x11:0) bad status 110; "
    "Connection timed out"
)
LIBIBMAD = [
    "ibwarn: [3651] _do_madrpc: recv failed: Connection timed out",
    "ibwarn: [3651] mad_rpc: _do_madrpc failed; dport (DR path slid 0; dlid 0; 0,1,3)",
]


def test_the_message_decides_not_the_prefix():
    partial, other = partial_lines(
        "\n".join([ATTACHED, OLD_BUILD, "", NEW_BUILD, *LIBIBMAD, "ibwarn: [7] main: using port 1"])
    )
    assert partial == [OLD_BUILD, NEW_BUILD, *LIBIBMAD]
    assert other == [ATTACHED, "ibwarn: [7] main: using port 1"]
    assert partial_lines(ATTACHED + "\n") == ([], [ATTACHED])


def test_failed_routes_are_read_from_every_build():
    assert failed_paths([OLD_BUILD, NEW_BUILD, OLD_BUILD]) == [
        FailedMad((0, 1, 7, 2), 0x11, 0),
        FailedMad((0, 1, 8, 2), 0x11, 0),
    ]
    # old libibmad: the recv line is followed by the line naming the route
    assert failed_paths(LIBIBMAD) == [FailedMad((0, 1, 3), 0, 0)]
    port_info = "query_smp.c:186; umad (DR path slid 0; dlid 0; 0,1,7 Attr 0x15:3) bad status 110; Connection timed out"
    assert failed_paths([port_info]) == [FailedMad((0, 1, 7), 0x15, 3)]
    # a reason without a route: nobody can tell what is behind it
    assert failed_paths([OLD_BUILD, "ibwarn: [9] query_node_info failed"]) is None
    assert failed_paths([]) == []


# ibnetdiscover's output of TREE (fabric/tests/test_live.py) with leaf2 dropping every MAD, as the
# real tool printed it from h1 (stderr: OLD_BUILD and the same for 0,1,8,2).
PARTIAL_RUN = """#
# Initiated from node 0000000000100000 port 0000000000100001

switchguid=0x200001(200001)
Switch	8 "S-0000000000200001"		# "spine2" base port 0 lid 3 lmc 0
[1]	"S-0000000000200002"[8]		# "leaf1" lid 4 4xSDR

switchguid=0x200000(200000)
Switch	8 "S-0000000000200000"		# "spine1" base port 0 lid 2 lmc 0
[1]	"S-0000000000200002"[7]		# "leaf1" lid 4 4xSDR

switchguid=0x200002(200002)
Switch	8 "S-0000000000200002"		# "leaf1" base port 0 lid 4 lmc 0
[1]	"H-0000000000100000"[1](100001) 		# "h1" lid 1 4xSDR
[2]	"H-0000000000100002"[1](100003) 		# "h2" lid 5 4xSDR
[7]	"S-0000000000200000"[1]		# "spine1" lid 2 4xSDR
[8]	"S-0000000000200001"[1]		# "spine2" lid 3 4xSDR

caguid=0x100002
Ca	1 "H-0000000000100002"		# "h2"
[1](100003) 	"S-0000000000200002"[2]		# lid 5 lmc 0 "leaf1" lid 4 4xSDR

caguid=0x100000
Ca	1 "H-0000000000100000"		# "h1"
[1](100001) 	"S-0000000000200002"[1]		# lid 1 lmc 0 "leaf1" lid 4 4xSDR
"""


def test_failed_routes_resolve_to_ports_of_reached_nodes():
    topo = parse_ibnetdiscover(PARTIAL_RUN, "run")
    h1, spine1, spine2 = "0x0000000000100000", "0x0000000000200000", "0x0000000000200001"
    failed = failed_paths([OLD_BUILD, NEW_BUILD])
    assert resolve_failed_ports(topo, h1, failed) == {(spine1, 2), (spine2, 2)}
    # a PortInfo that timed out: that port of the node at the end of the route
    assert resolve_failed_ports(topo, h1, [FailedMad((0, 1, 7), 0x15, 3)]) == {(spine1, 3)}
    assert resolve_failed_ports(topo, h1, []) == set()
    # routes that cannot be followed through what was reached: unknown
    assert resolve_failed_ports(topo, h1, [FailedMad((0, 1, 5, 2), 0x11, 0)]) is None
    assert resolve_failed_ports(topo, "", failed) is None
    assert resolve_failed_ports(topo, h1, None) is None


# -- ingest --------------------------------------------------------------------------------------


@pytest.fixture
def fabric(db):
    return Fabric.objects.create(name="t")


def _ingest(fabric, text, **kw):
    return ingest_topology(fabric, parse_ibnetdiscover(text, "t"), source="live", **kw)


def _without(text: str, *lines: str) -> str:
    for line in lines:
        assert line in text, line
        text = text.replace(line, "")
    return text


# BASE seen from leaf1's side while leaf2 drops every MAD (its section, h3, the spine's port 2 line
# are missing) and h2's cable was pulled (leaf1's port 2 and h2 are missing).
LEAF2_SILENT_H2_UNPLUGGED = _without(
    BASE[: BASE.index('Switch 8 "leaf2"')] + BASE[BASE.index('Hca 1 "h1"') : BASE.index('Hca 1 "h2"')],
    '[2] "leaf2"[7]\n',
    '[2] "h2"[1] # "host001 mlx5_1" lid 11 4xHDR\n',
)


def test_partial_run_applies_what_answered_and_keeps_what_is_behind_the_failure(fabric, committed_signals):
    _ingest(fabric, BASE)
    spine2 = Port.objects.get(node__node_guid=G("spine"), port_num=2).state
    assert spine2 != PortState.DOWN
    d = _ingest(fabric, LEAF2_SILENT_H2_UNPLUGGED, partial=True, unknown_ports={(G("spine"), 2)})
    assert d.status == DiscoveryStatus.PARTIAL
    h2_link = link_key_str(link_ends(G("leaf1"), 2, G("h2"), 1))
    assert d.diff["removed"] == {"nodes": [G("h2")], "links": [h2_link]}
    assert d.diff["unreached"] == sorted([G("leaf2"), G("h3")])
    assert (summary(d)["status"], summary(d)["unreached"], summary(d)["removed"]) == ("partial", 2, 2)
    # h2: its only cable ended at a port that answered without a link: really gone
    assert not Node.objects.filter(fabric=fabric, node_guid=G("h2")).exists()
    assert Port.objects.get(node__node_guid=G("leaf1"), port_num=2).state == PortState.DOWN
    # leaf2 and h3: behind the failed MAD: kept with their links and states, marked, no event
    kept = dict(Node.objects.filter(fabric=fabric).values_list("node_guid", "unreachable_since"))
    assert kept[G("leaf2")] is not None and kept[G("h3")] is not None
    assert kept[G("leaf1")] is None and kept[G("spine")] is None
    assert Link.objects.filter(fabric=fabric).count() == 4
    assert Port.objects.get(node__node_guid=G("spine"), port_num=2).state == spine2
    codes = sorted(
        Event.objects.filter(fabric=fabric).exclude(code="fabric.discovered").values_list("code", flat=True)
    )
    assert codes == ["link.down", "node.removed", "port.state_changed"]
    assert Event.objects.get(fabric=fabric, code="node.removed").object_key == G("h2")
    # the next complete run reaches them again: marks cleared, h2 back
    d = _ingest(fabric, BASE)
    assert d.diff["added"]["nodes"] == [G("h2")] and d.diff["unreached"] == []
    assert not Node.objects.filter(fabric=fabric, unreachable_since__isnull=False).exists()


def test_partial_run_whose_failures_name_no_route_keeps_every_missed_node(fabric, committed_signals):
    _ingest(fabric, BASE)
    d = _ingest(fabric, LEAF2_SILENT_H2_UNPLUGGED, partial=True, unknown_ports=None)
    # both ends of h2's cable did not answer (h2 was missed): nothing can be said about it
    assert d.removed == 0 and Node.objects.filter(fabric=fabric).count() == 6
    assert sorted(d.diff["unreached"]) == sorted([G("leaf2"), G("h3"), G("h2")])
    # a cable between two nodes that answered is applied even so
    spine_leaf1 = link_key_str(link_ends(G("spine"), 1, G("leaf1"), 7))
    no_uplink = _without(
        LEAF2_SILENT_H2_UNPLUGGED, '[1] "leaf1"[7]\n', '[7] "spine"[1] # "spine-1" lid 1 4xHDR\n'
    )
    d = _ingest(fabric, no_uplink, partial=True, unknown_ports=None)
    assert d.diff["removed"]["links"] == [spine_leaf1] and d.diff["removed"]["nodes"] == []
    assert Port.objects.get(node__node_guid=G("leaf1"), port_num=7).state == PortState.DOWN


# -- lab -----------------------------------------------------------------------------------------

TREE = """
Switch 8 "spine1"
[1] "leaf1"[7]
[2] "leaf2"[7]

Switch 8 "leaf1"
[1] "h1"[1]
[2] "h2"[1]
[7] "spine1"[1]

Switch 8 "leaf2"
[1] "h3"[1]
[2] "h4"[1]
[7] "spine1"[2]

Hca 1 "h1"
[1] "leaf1"[1]

Hca 1 "h2"
[1] "leaf1"[2]

Hca 1 "h3"
[1] "leaf2"[1]

Hca 1 "h4"
[1] "leaf2"[2]
"""


def _run_both_ways(lab, fabric):
    """Discover once as is (the attached line on stderr: not partial), then with leaf2 dropping
    every MAD and h1 unplugged: partial, h1 removed, leaf2/h3/h4 kept and marked unreachable."""
    first = discover(fabric)
    assert first.status == DiscoveryStatus.OK, first.warnings
    assert Node.objects.filter(fabric=fabric).count() == 7
    lab.unlink("h2")
    lab.set_error("leaf2", None, 100)
    try:
        d = discover(fabric)
    finally:
        lab.set_error("leaf2", None, 0)
        lab.relink("h2")
    assert d.status == DiscoveryStatus.PARTIAL
    h2 = lab.guid_of("h2")
    assert d.diff["removed"]["nodes"] == [h2]
    assert sorted(d.diff["unreached"]) == sorted(lab.guid_of(n) for n in ("leaf2", "h3", "h4"))
    assert list(
        Event.objects.filter(fabric=fabric, code="node.removed").values_list("object_key", flat=True)
    ) == [h2]
    assert Link.objects.filter(fabric=fabric).count() == 5  # 6 - h2's
    again = discover(fabric)
    assert again.status == DiscoveryStatus.OK and again.diff["added"]["nodes"] == [h2]
    assert not Node.objects.filter(fabric=fabric, unreachable_since__isnull=False).exists()
    return first


@pytest.mark.lab
@pytest.mark.django_db(transaction=True)
def test_weft_lab_umad2sim_warning_is_not_partial(lab_factory, committed_signals):
    lab = lab_factory(TREE)
    # without SIM_HOST umad2sim attaches to ibsim's default node and says so on stderr
    env = {k: v for k, v in lab.tool_env.items() if k != "SIM_HOST"}
    fabric = Fabric.objects.create(name="lab", tool_env=env)
    got = collect_topology(fabric)
    assert any("sim_connect: attached as client" in line for line in got.ignored), got.stderr
    assert not got.partial and got.failed == []
    _run_both_ways(lab, fabric)


@pytest.mark.lab
@pytest.mark.django_db(transaction=True)
def test_lab_started_by_hand_on_the_default_socket(default_socket_lab_factory, committed_signals):
    lab = default_socket_lab_factory(TREE)
    # what a user who ran `ibsim net &` and `LD_PRELOAD=libumad2sim.so opensm` registers
    fabric = Fabric.objects.create(name="by-hand", tool_env={"LD_PRELOAD": UMAD2SIM_LIB})
    got = collect_topology(fabric)
    assert got.stderr.startswith("ibwarn: [") and "sim_connect: attached as client" in got.stderr
    assert not got.partial
    _run_both_ways(lab, fabric)


def test_api_shows_and_filters_unreached_nodes(fabric, committed_signals, viewer):
    _ingest(fabric, BASE)
    _ingest(fabric, LEAF2_SILENT_H2_UNPLUGGED, partial=True, unknown_ports={(G("spine"), 2)})
    body = viewer.get("/api/fabric/nodes/", {"reachable": "false", "fabric": fabric.pk}).json()
    assert sorted(n["node_guid"] for n in body["results"]) == sorted([G("leaf2"), G("h3")])
    assert all(n["unreachable_since"] for n in body["results"])
    body = viewer.get("/api/fabric/nodes/", {"reachable": "true", "fabric": fabric.pk}).json()
    assert {n["unreachable_since"] for n in body["results"]} == {None} and body["count"] == 3


def test_node_page_says_unreachable(fabric, committed_signals, viewer):
    _ingest(fabric, BASE)
    _ingest(fabric, LEAF2_SILENT_H2_UNPLUGGED, partial=True, unknown_ports={(G("spine"), 2)})
    leaf2 = Node.objects.get(fabric=fabric, node_guid=G("leaf2"))
    page = viewer.get(f"/fabric/nodes/{leaf2.pk}/").content.decode()
    assert "Unreachable" in page and "could not reach it" in page
    leaf1 = Node.objects.get(fabric=fabric, node_guid=G("leaf1"))
    assert "Unreachable" not in viewer.get(f"/fabric/nodes/{leaf1.pk}/").content.decode()
