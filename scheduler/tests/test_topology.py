"""The locality builder's rules on synthetic fabrics (``scheduler.topology.build_from_rows``, no
database): fat trees, 3-level trees, rail-optimised pods, storage switches and fabrics."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.locality import TIERS
from scheduler.topology import build_from_rows, group_name
from tests.support.topology_rows import Builder, fat_tree_2level, fat_tree_3level, rail_pods


def _names(loc, tier):
    return sorted(d.name for d in loc.at_tier(tier))


def test_two_level_fat_tree_is_one_block_of_leaves():
    loc = build_from_rows([fat_tree_2level(leaves=4, spines=2, hosts_per_leaf=3)])
    assert _names(loc, 1) == ["leaf-01", "leaf-02", "leaf-03", "leaf-04"]
    (block,) = loc.at_tier(2)
    assert block.name == "spine-{01..02}" and len(block.switches) == 2
    assert len(block.hosts) == 12 and len(block.children) == 4
    (group,) = loc.at_tier(3)
    assert group.switches == () and group.children == (block.key,)
    (fabric,) = loc.fabrics()
    assert fabric.key == "f1/fabric" and fabric.name == "f" and fabric.children == (group.key,)
    site = loc.hosts["gpu0005"]
    assert loc.domains[site.unit].name == "leaf-02"
    assert site.path[1:] == (block.key, group.key, fabric.key) and site.gpus == 8
    assert loc.span(["gpu0001", "gpu0002"]) == (1, 1)
    assert loc.span(["gpu0001", "gpu0005"]) == (2, 2)
    assert loc.capacity(fabric.key) == 12 * 8
    # a leaf's uplinks are its cables to the spines; the block's (no cores) none
    leaf = loc.domains[site.unit]
    assert len(leaf.uplinks) == 2 and block.uplinks == ()
    assert loc.warnings == []


def test_three_level_tree_blocks_are_pods_and_spine_groups_share_cores():
    loc = build_from_rows([fat_tree_3level(pods=4, core_groups=2)])
    assert len(loc.units()) == 8
    blocks = loc.at_tier(2)
    assert sorted(b.name for b in blocks) == [f"pod0{p}-spine-{{01..02}}" for p in range(1, 5)]
    groups = loc.at_tier(3)
    assert len(groups) == 2 and sorted(len(g.children) for g in groups) == [2, 2]
    assert sorted(g.name for g in groups) == ["g1-core-{01..02}", "g2-core-{01..02}"]
    # pod 1 and pod 2 share core group 1: same spine group, different blocks
    a, b, c = loc.hosts["node001"], loc.hosts["node005"], loc.hosts["node009"]
    assert a.domain(2) != b.domain(2) and a.domain(3) == b.domain(3) != c.domain(3)
    assert loc.span(["node001", "node005"]) == (3, 2)
    assert loc.span(["node001", "node009"]) == (4, 2)
    # uplinks: a leaf has 2 cables to each of 2 pod spines; a pod's spines 2 each to 2 cores
    assert len(loc.domains[a.unit].uplinks) == 4
    assert len(loc.domains[a.domain(2)].uplinks) == 4
    assert loc.domains[a.domain(3)].uplinks == ()


def test_rail_pods_collapse_into_one_unit_per_scalable_unit():
    loc = build_from_rows([rail_pods(units=3, hosts_per_unit=4, rails=8)])
    units = loc.units()
    assert len(units) == 3
    assert sorted(u.name for u in units) == ["su01-rail{0..7}", "su02-rail{0..7}", "su03-rail{0..7}"]
    assert all(len(u.switches) == 8 and len(u.hosts) == 4 for u in units)
    site = loc.hosts["dgx001"]
    assert len(site.rails) == 8 and set(site.rails) == set(loc.domains[site.unit].switches)
    # rail order is the HCA order
    names = {s.guid: s.name for s in rail_pods(units=3).switches}
    assert [names[g] for g in site.rails] == [f"su01-rail{r}" for r in range(8)]
    assert loc.span(["dgx001", "dgx004"]) == (1, 1)
    assert loc.domains[site.unit].uplinks and len(loc.domains[site.unit].uplinks) == 8 * 2
    assert loc.warnings == []


def test_a_missing_rail_cable_keeps_the_leaf_in_its_pod():
    rows = rail_pods(units=2, hosts_per_unit=4, rails=4)
    host = rows.hosts[1]
    rows.hosts[1] = type(host)(host.host_id, host.name, host.gpus, host.hcas[:2] + host.hcas[3:])
    loc = build_from_rows([rows])
    assert len(loc.units()) == 2
    unit = loc.domains[loc.hosts["dgx001"].unit]
    assert len(unit.switches) == 4 and unit.hosts == ("dgx001", "dgx002", "dgx003", "dgx004")
    assert len(loc.hosts["dgx002"].rails) == 3
    assert loc.warnings == []


def test_a_miscabled_host_stays_in_its_pod_and_the_foreign_rail_stays_in_its_own():
    b = Builder()
    spine = b.switch("spine", 2)
    pod_a = [b.switch(f"a-rail{r}", 1) for r in range(4)]
    pod_b = [b.switch(f"b-rail{r}", 1) for r in range(4)]
    for leaf in pod_a + pod_b:
        b.cable(leaf, spine)
    for i in range(6):
        b.host(f"a{i}", pod_a)
        b.host(f"b{i}", pod_b)
    b.host("stray", pod_a[:3] + pod_b[3:])  # three rails in pod a, one on pod b's rail 3
    loc = build_from_rows([b.rows])
    assert len(loc.units()) == 2
    assert loc.domains[loc.hosts["stray"].unit].name == "a-rail{0..3}"
    assert len(loc.domains[loc.hosts["b0"].unit].switches) == 4
    assert len(loc.hosts["stray"].rails) == 3
    assert any("stray (3/1)" in w for w in loc.warnings)


def test_a_storage_switch_reaching_every_pod_is_not_a_leaf():
    rows = rail_pods(units=2, hosts_per_unit=4, rails=4)
    b = Builder(guid_base=0x90000)
    storage = b.switch("storage-leaf", 1)
    rows.switches.append(b.rows.switches[0])
    spine = rows.switches[0].guid
    rows.links.append(type(rows.links[0])(99, storage, spine))
    rows.hosts = [
        type(h)(h.host_id, h.name, h.gpus, h.hcas + (type(h.hcas[0])(storage, 5000 + h.host_id, 9),))
        for h in rows.hosts
    ]
    loc = build_from_rows([rows])
    assert len(loc.units()) == 2 and all(len(u.switches) == 4 for u in loc.units())
    assert storage not in loc.hosts["dgx001"].rails
    assert any("storage-leaf" in w and "not leaves" in w for w in loc.warnings)
    # with the role set, the switch is left out quietly as a storage switch
    rows.switches[-1] = type(rows.switches[-1])(storage, "storage-leaf", 1, "storage")
    loc = build_from_rows([rows])
    assert len(loc.units()) == 2
    assert [w for w in loc.warnings if "non-compute role" in w] and not [
        w for w in loc.warnings if "not leaves" in w
    ]


def test_storage_fabric_reaching_the_same_hosts_is_skipped_by_role_or_by_hca_count():
    compute = rail_pods(units=2, hosts_per_unit=4, rails=8, fabric_id=2, name="compute")
    storage = rail_pods(units=1, hosts_per_unit=8, rails=2, fabric_id=1, name="storage")
    loc = build_from_rows([compute, storage])
    # the storage fabric sorts first but the hosts have 8 HCAs on compute, 2 on storage
    assert {s.fabric_id for s in loc.hosts.values()} == {2}
    assert [f.name for f in loc.fabrics()] == ["compute"]
    assert any("fabric storage are also on fabric compute" in w for w in loc.warnings)
    storage.role = "storage"
    loc = build_from_rows([compute, storage])
    assert [f.name for f in loc.fabrics()] == ["compute"]
    assert "fabric storage skipped: its role is storage, not compute" in loc.warnings


def test_two_fabrics_are_two_trees():
    a = fat_tree_2level(leaves=2, fabric_id=1, name="a", prefix="a")
    b = fat_tree_2level(leaves=2, fabric_id=2, name="b", prefix="b")
    loc = build_from_rows([a, b])
    assert [f.key for f in loc.fabrics()] == ["f1/fabric", "f2/fabric"]
    with pytest.raises(ValueError, match="two fabrics"):
        loc.span(["a0001", "b0001"])
    # the same GUIDs on both fabrics make different keys
    assert loc.hosts["a0001"].unit != loc.hosts["b0001"].unit
    assert loc.hosts["a0001"].unit.split("/", 1)[1] == loc.hosts["b0001"].unit.split("/", 1)[1]


def test_hosts_without_a_compute_leaf_and_without_gpus():
    rows = fat_tree_2level(leaves=2, hosts_per_leaf=2, gpus=0)
    rows.hosts.append(type(rows.hosts[0])(77, "lonely", 8, ()))
    loc = build_from_rows([rows])
    assert "lonely" not in loc.hosts and loc.hosts["gpu0001"].gpus == 0
    assert any("lonely" in w and "no HCA" in w for w in loc.warnings)
    assert loc.capacity(loc.fabrics()[0].key) == 0


def test_leaf_without_spine_is_its_own_block():
    b = Builder()
    leaf1, leaf2 = b.switch("leaf-1", 1), b.switch("leaf-2", 1)
    b.host("h1", [leaf1])
    b.host("h2", [leaf2])
    loc = build_from_rows([b.rows])
    assert len(loc.at_tier(2)) == 2 and len(loc.at_tier(3)) == 2
    assert loc.span(["h1", "h2"]) == (4, 2)


def test_non_compute_fabric_only_gives_an_empty_locality():
    rows = fat_tree_2level()
    rows.role = "management"
    loc = build_from_rows([rows])
    assert loc.hosts == {} and loc.domains == {}


@pytest.mark.parametrize(
    "names,expected",
    [
        (["leaf-1"], "leaf-1"),
        (
            ["MF0;LG28-01:MQM8700/U1", "MF0;LG28-02:MQM8700/U1", "MF0;LG28-03:MQM8700/U1"],
            "MF0;LG28-{01..03}:MQM8700/U1",
        ),
        (["leaf-09", "leaf-10"], "leaf-{09..10}"),
        (["a-x", "a-y"], "a-{x,y}"),
        (["x", "y"], "x+y"),
        (["sw1", "sw3"], "sw{1,3}"),
        ([f"c{i}-x" for i in (1, 3, 5, 7, 9)], "c{1,...,9}-x"),
        (["p", "q", "r", "s", "t"], "p+...+t"),
    ],
)
def test_group_name(names, expected):
    assert group_name(names) == expected


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 4),  # pods
    st.integers(1, 4),  # units per... leaves per pod
    st.integers(1, 3),  # hosts per leaf
    st.integers(1, 2),  # core groups
)
def test_every_host_has_a_consistent_path(pods, leaves, hosts, core_groups):
    loc = build_from_rows([fat_tree_3level(pods=pods, leaves_per_pod=leaves, hosts_per_leaf=hosts,
                                           core_groups=min(core_groups, pods))])  # fmt: skip
    assert len(loc.hosts) == pods * leaves * hosts
    for site in loc.hosts.values():
        for tier in range(1, 5):
            d = loc.domains[site.domain(tier)]
            assert d.tier == tier and site.name in d.hosts
            assert d.parent == (site.domain(tier + 1) if tier < 4 else None)
    for d in loc.domains.values():
        if d.tier > 1:
            assert sorted(h for c in d.children for h in loc.domains[c].hosts) == list(d.hosts)
    assert len(loc.at_tier(TIERS["block"])) == pods
