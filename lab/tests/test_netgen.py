"""Netfile generators (pure): shapes, names, radix limits, CLI specs. The lab tests start them in ibsim."""

from __future__ import annotations

import re

import pytest

from lab import netgen
from lab.netfile import parse_netfile


def _degree(net, node):
    return len(node.ports)


def test_fat_tree_2level_shape_and_names():
    net = parse_netfile(netgen.fat_tree_2level(4, 2, 3, links_per_spine=2))
    leaves = [n for n in net.switches if ";leaf-" in n.description]
    spines = [n for n in net.switches if ";spine-" in n.description]
    assert (len(leaves), len(spines), len(net.cas)) == (4, 2, 12)
    assert leaves[0].description == "MF0;leaf-01:MQM8700/U1"
    assert spines[1].description == "MF0;spine-02:MQM8700/U1"
    assert net.cas[0].description == "host001 mlx5_0" and net.cas[-1].description == "host012 mlx5_0"
    assert all(n.nports == 40 for n in net.switches)  # QM8700 radix
    assert all(len(n.ports) == 3 + 2 * 2 for n in leaves)  # hosts + 2 links to each spine
    assert all(len(n.ports) == 4 * 2 for n in spines)
    # every port comment carries the rate ibsim reads
    assert {(p.width, p.speed) for n in net.nodes for p in n.ports.values()} == {("4x", "HDR")}
    # GUIDs are distinct and CA port GUIDs too
    guids = [n.guid for n in net.nodes] + [n.port_guid(1) for n in net.cas]
    assert len(set(guids)) == len(guids)


def test_648_host_tree_fits_qm8700():
    net = parse_netfile(netgen.fat_tree_2level(36, 18, 18))
    assert (len(net.switches), len(net.cas), len(net.links)) == (54, 648, 36 * 36)
    assert max(len(n.ports) for n in net.switches) == 36


def test_fat_tree_3level_shape():
    net = parse_netfile(netgen.fat_tree_3level(2, 3, 2, 4, 2))
    cores = [n for n in net.switches if ";core-" in n.description]
    pod_spines = [n for n in net.switches if "-spine-" in n.description]
    leaves = [n for n in net.switches if "-leaf-" in n.description]
    assert (len(cores), len(pod_spines), len(leaves), len(net.cas)) == (4, 4, 6, 12)
    assert all(len(c.ports) == 2 for c in cores)  # one link to each pod
    assert all(len(s.ports) == 3 + 2 for s in pod_spines)  # 3 leaves + 4 cores / 2 groups
    assert "MF0;pod02-leaf-03:MQM8700/U1" in {n.description for n in leaves}


def test_rail_pod_puts_hca_i_of_every_host_on_rail_leaf_i():
    net = parse_netfile(netgen.rail_pod(16, rails=8))
    by_id = {n.node_id: n for n in net.nodes}
    assert len(net.cas) == 16 * 8
    assert all(n.nports == 64 for n in net.switches)  # QM9700
    for ca in net.cas:
        host, hca = re.fullmatch(r"(host\d{3}) mlx5_(\d)", ca.description).groups()
        leaf = by_id[ca.ports[1].remote_id]
        assert leaf.description == f"MF0;rail{hca}-leaf-01:MQM9700/U1"
    # the 8 HCAs of a host are 8 CA nodes; each rail leaf has all 16 hosts
    rail3 = next(n for n in net.switches if n.description.startswith("MF0;rail3-"))
    hosts = sorted(
        by_id[p.remote_id].description for p in rail3.ports.values() if by_id[p.remote_id].kind == "Ca"
    )
    assert hosts == [f"host{h:03d} mlx5_3" for h in range(1, 17)]
    # non-blocking: each leaf has as many uplinks as hosts
    assert len(rail3.ports) == 32
    assert {p.speed for n in net.nodes for p in n.ports.values()} == {"NDR"}


def test_rail_pod_with_several_scalable_units():
    net = parse_netfile(netgen.rail_pod(64, rails=8))  # two 32-host units on 64-port switches
    leaves = [n for n in net.switches if ";rail" in n.description]
    spines = [n for n in net.switches if ";spine-" in n.description]
    assert len(leaves) == 16 and len(spines) == 8  # 4 links from each leaf to each spine
    assert all(len(n.ports) == 64 for n in leaves + spines)


def _rail_shape(net):
    """Leaves (``;rail`` switches), spines, and per leaf: host ports and uplinks."""
    by_id = {n.node_id: n for n in net.nodes}
    leaves = [n for n in net.switches if ";rail" in n.description]
    spines = [n for n in net.switches if ";spine-" in n.description]
    down = {n.description: sum(by_id[p.remote_id].kind == "Ca" for p in n.ports.values()) for n in leaves}
    up = {n.description: sum(by_id[p.remote_id].kind == "Switch" for p in n.ports.values()) for n in leaves}
    return by_id, leaves, spines, down, up


def test_demo_fabric_is_a_non_blocking_rail_optimised_superpod():
    net = parse_netfile(netgen.parse_spec(netgen.DEMO_SPEC))
    by_id, leaves, spines, down, up = _rail_shape(net)
    # 2 SUs x 8 rail leaves x 16 hosts of 8 HCAs, 8 spines; every cable a 4xHDR QM8700 port
    assert (len(leaves), len(spines), len(net.switches)) == (16, 8, 24)
    assert len(net.cas) == 32 * 8 and len(net.links) == 32 * 8 + 16 * 16
    assert all(n.nports == 40 for n in net.switches)
    assert {(p.width, p.speed) for n in net.nodes for p in n.ports.values()} == {("4x", "HDR")}
    # non-blocking: every leaf has as many uplinks as host ports (16), 2 to each of the 8 spines
    assert set(down.values()) == {16} and up == down
    for leaf in leaves:
        per_spine = {}
        for p in leaf.ports.values():
            if by_id[p.remote_id].kind == "Switch":
                per_spine[by_id[p.remote_id].description] = (
                    per_spine.get(by_id[p.remote_id].description, 0) + 1
                )
        assert per_spine == {s.description: 2 for s in spines}
    assert all(len(s.ports) == 16 * 2 for s in spines)
    # each host: 8 HCAs on 8 distinct leaves, HCA r on rail r of the host's SU (hosts 1-16: SU 1)
    host_leaves: dict[str, list[str]] = {}
    for ca in net.cas:
        host, hca = re.fullmatch(r"(host\d{3}) mlx5_(\d)", ca.description).groups()
        host_leaves.setdefault(host, []).append((int(hca), by_id[ca.ports[1].remote_id].description))
    assert len(host_leaves) == 32
    for host, hcas in host_leaves.items():
        su = 1 if int(host[4:]) <= 16 else 2
        assert sorted(hcas) == [(r, f"MF0;rail{r}-leaf-{su:02d}:MQM8700/U1") for r in range(8)]


def test_old_demo_fat_tree_spec_keeps_its_shape():
    net = parse_netfile(netgen.parse_spec(netgen.FAT_TREE_SPEC))
    by_id = {n.node_id: n for n in net.nodes}
    leaves = [n for n in net.switches if ";leaf-" in n.description]
    assert (len(leaves), len(net.switches), len(net.cas), len(net.links)) == (12, 18, 288, 360)
    for leaf in leaves:  # 24 hosts, 6 uplinks: 4:1
        kinds = [by_id[p.remote_id].kind for p in leaf.ports.values()]
        assert (kinds.count("Ca"), kinds.count("Switch")) == (24, 6)


@pytest.mark.parametrize(
    ("spec", "leaves", "spines", "down", "up"),
    [
        ("rail:hosts=20,su=10,rails=4,spines=4,speed=HDR", 8, 4, 10, 12),  # 3 links per spine: >= 10
        ("rail:hosts=24,su=10,rails=2,spines=5,speed=HDR", 6, 5, {10, 4}, 10),  # a partial last SU
        ("rail:hosts=8,rails=8", 8, 1, 8, 8),  # one SU, default spines and speed (NDR)
    ],
)
def test_rail_pod_scalable_units_are_never_oversubscribed(spec, leaves, spines, down, up):
    net = parse_netfile(netgen.parse_spec(spec))
    _, rail_leaves, spine_nodes, d, u = _rail_shape(net)
    assert (len(rail_leaves), len(spine_nodes)) == (leaves, spines)
    assert set(d.values()) == (down if isinstance(down, set) else {down}) and set(u.values()) == {up}
    assert all(u[name] >= d[name] for name in d)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: netgen.fat_tree_2level(4, 2, 39),
            r"a leaf needs 39 host ports \+ 2 uplinks, a MQM8700 has 40",
        ),
        (lambda: netgen.fat_tree_2level(41, 1, 2), r"a spine needs 41 downlinks"),
        (lambda: netgen.fat_tree_2level(0, 1, 1), ">= 1"),
        (lambda: netgen.fat_tree_2level(2, 1, 1, speed="XDR"), "speed 'XDR'"),
        (lambda: netgen.fat_tree_2level(2, 1, 1, width="3x"), "width '3x'"),
        (lambda: netgen.fat_tree_3level(2, 2, 3, 4, 2), "multiple of spines_per_pod"),
        (lambda: netgen.fat_tree_3level(41, 2, 2, 2, 2), "a core switch needs 41 ports"),
        (lambda: netgen.rail_pod(2000, rails=8), "do not fit"),
        (lambda: netgen.rail_pod(4, rails=16), "rails 1..15"),
        (lambda: netgen.rail_pod(4, hosts_per_unit=0), "hosts_per_unit must be >= 1"),
        (
            lambda: netgen.rail_pod(40, 8, 8, hosts_per_unit=20, speed="HDR"),
            r"a rail leaf needs 20 host ports \+ 24",
        ),
        (
            lambda: netgen.rail_pod(96, 8, hosts_per_unit=16, speed="HDR"),
            "48 rail leaves do not fit a 40-port spine",
        ),
    ],
)
def test_topologies_that_do_not_fit_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_parse_spec():
    assert parse_netfile(netgen.parse_spec("2:leaves=8,spines=4,hosts=16,speed=HDR")).cas[15].description == (
        "host016 mlx5_0"
    )
    net = parse_netfile(netgen.parse_spec("2:leaves=3,spines=2,hosts=2,speed=EDR,links=2"))
    assert len(net.links) == 3 * (2 + 4) and net.switches[0].nports == 36
    assert len(parse_netfile(netgen.parse_spec("3:pods=2,leaves=2,spines=2,cores=2,hosts=2")).cas) == 8
    assert len(parse_netfile(netgen.parse_spec("rail:hosts=4,rails=2")).cas) == 8
    for bad, message in [
        ("4:leaves=1", "starts with 2:, 3: or rail:"),
        ("2:leaves=8,spines=4", "hosts= is required"),
        ("2:leaves=8,spines=4,hosts=x", "hosts='x' is not a number"),
        ("2:leaves=8,spines=4,hosts=2,color=red", "bad part 'color=red'"),
        ("2:leaves=8,spines=4,hosts=2,speed=FAST", "speed 'FAST'"),
        ("rail:hosts=8,su=four", "su='four' is not a number"),
        ("2:leaves=8,spines=4,hosts=2,su=4", "bad part 'su=4'"),
    ]:
        with pytest.raises(ValueError, match=message):
            netgen.parse_spec(bad)


def test_two_switch_four_ca_matches_ibsim_example(realdata):
    from lab.netfile import read_netfile

    ours = parse_netfile(netgen.two_switch_four_ca())
    theirs = read_netfile(realdata / "ibsim_net" / "ibsim_net.2sw2path4hca")
    assert ours.links == theirs.links
    assert [(n.node_id, n.guid, n.nports) for n in ours.nodes] == [
        (n.node_id, n.guid, n.nports) for n in theirs.nodes
    ]


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(
    leaves=st.integers(1, 12),
    spines=st.integers(1, 6),
    hosts=st.integers(1, 20),
    links=st.integers(1, 3),
    speed=st.sampled_from(["QDR", "FDR", "EDR", "HDR", "NDR"]),
)
def test_fat_tree_2level_counts_or_a_clear_refusal(leaves, spines, hosts, links, speed):
    radix = netgen.SWITCH_MODELS[speed].ports
    try:
        net = parse_netfile(netgen.fat_tree_2level(leaves, spines, hosts, speed=speed, links_per_spine=links))
    except ValueError as exc:
        assert hosts + spines * links > radix or leaves * links > radix, exc
        return
    assert len(net.switches) == leaves + spines and len(net.cas) == leaves * hosts
    assert len(net.links) == leaves * (hosts + spines * links)
    assert max(len(n.ports) for n in net.switches) <= radix
