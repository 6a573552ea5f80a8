"""Topology exports: Slurm tree/block/yaml obey Slurm's rules and round-trip the hosts; the
Kubernetes documents have the CRDs' field names and valid names; real topology.conf files read."""

from __future__ import annotations

import re

import pytest
import yaml

from core.errors import LocatedError
from scheduler.exports import (
    ExportError,
    export,
    parse_topology_conf,
    read_node_list,
    slurm_names,
    slurm_suffix,
)
from scheduler.hostlist import expand
from scheduler.topology import build_from_rows
from tests.support.topology_rows import Builder, fat_tree_2level, fat_tree_3level, rail_pods


def _hosts_of_conf(lines):
    return {h for c in lines if c.nodes for h in c.nodes}


def test_slurm_tree_of_a_three_level_tree():
    loc = build_from_rows([fat_tree_3level(pods=4, core_groups=2)])
    out = export(loc, "slurm-tree")
    lines = parse_topology_conf(out.text)
    switches = {c.name: c for c in lines}
    assert _hosts_of_conf(lines) == set(loc.hosts)
    assert switches["pod01-leaf-01"].nodes == ["node001", "node002"]
    assert switches["pod01-spine-01-02"].switches == ["pod01-leaf-01", "pod01-leaf-02"]
    assert switches["g1-core-01-02"].switches == ["pod01-spine-01-02", "pod02-spine-01-02"]
    assert switches["f"].switches == ["g1-core-01-02", "g2-core-01-02"]  # one root per fabric
    assert "SwitchName=pod01-leaf-01 Nodes=node[001-002]" in out.text
    assert out.media_type == "text/plain" and out.warnings == []


def test_single_child_levels_without_switches_are_left_out_switch_levels_kept():
    loc = build_from_rows([fat_tree_2level(leaves=3)])
    lines = parse_topology_conf(export(loc, "slurm-tree").text)
    # leaves, and the block (spines) as the root; no spine group or fabric switch above one child
    assert [c.name for c in lines] == ["leaf-01", "leaf-02", "leaf-03", "spine-01-02"]
    # one leaf under its spines: the spines are a switch level of their own, kept
    one = build_from_rows([fat_tree_2level(leaves=1)])
    lines = parse_topology_conf(export(one, "slurm-tree").text)
    assert [(c.name, c.switches) for c in lines] == [("leaf-01", None), ("spine-01-02", ["leaf-01"])]


def test_two_fabrics_are_two_trees_without_a_common_root():
    a = fat_tree_2level(leaves=2, fabric_id=1, name="a", prefix="a")
    b = fat_tree_2level(leaves=2, fabric_id=2, name="b", prefix="b")
    loc = build_from_rows([a, b])
    lines = parse_topology_conf(export(loc, "slurm-tree").text)
    roots = [c for c in lines if c.switches]
    assert len(roots) == 2 and {len(c.switches) for c in roots} == {2}
    # same switch names on both fabrics stay unique
    assert len({c.name for c in lines}) == len(lines)
    assert export(loc, "slurm-tree", fabric_ids=[2]).text.count("SwitchName=") == 3


#: the characters of every SwitchName/BlockName in $WEFT_REALDATA/slurm_topology (checked below)
REAL_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def _nasty_fabric() -> Builder:
    """Leaves named by raw node descriptions Slurm cannot hold (``;`` ``:`` ``/``, spaces,
    ``[ ] , = #``), two sharing one description, one too long, one clean."""
    b = Builder()
    names = ["MF0;leaf-01:MQM8700/U1", "MF0;leaf-02:MQM8700/U1", "Mellanox Technologies Aggregation Switch",
             "Mellanox Technologies Aggregation Switch", "x" * 80, "a b[1],c=d#e", "clean-leaf.3"]  # fmt: skip
    spine = b.switch("spine/1 (core)", 2)
    for i, name in enumerate(names):
        leaf = b.switch(name, 1)
        b.cable(leaf, spine)
        b.host(f"h{i:02d}", [leaf])
    return b


def test_switch_names_are_safe_unique_at_most_64_and_tagged_by_guid():
    loc = build_from_rows([_nasty_fabric().rows])
    units = {d.name: d for d in loc.units()}
    names = slurm_names(loc.domains.values())
    assert all(REAL_NAME.match(n) for n in names.values()), names
    assert len(set(names.values())) == len(names)
    by = {d.name: names[d.key] for d in units.values()}
    guid = {d.name: slurm_suffix(d) for d in units.values()}
    assert by["MF0;leaf-01:MQM8700/U1"] == f"MF0_leaf-01_MQM8700_U1-{guid['MF0;leaf-01:MQM8700/U1']}"
    assert by["a b[1],c=d#e"] == f"a_b_1_c_d_e-{guid['a b[1],c=d#e']}"
    assert by["clean-leaf.3"] == "clean-leaf.3"  # a name Slurm holds is kept as it is
    assert len(by["x" * 80]) == 64 and by["x" * 80].endswith("-" + guid["x" * 80])
    # the suffix is the switch GUID's tail: 0x…010003 → 010003
    leaf = units["MF0;leaf-01:MQM8700/U1"]
    assert guid["MF0;leaf-01:MQM8700/U1"] == leaf.switches[0][-6:]
    shared = [names[d.key] for d in loc.units() if d.name == "Mellanox Technologies Aggregation Switch"]
    assert len(shared) == 2 and shared[0] != shared[1]
    assert {n.rsplit("-", 1)[0] for n in shared} == {"Mellanox_Technologies_Aggregation_Switch"}


def test_switch_names_are_stable_across_exports():
    """The same topology gives the same names whatever else is exported with it: a node list
    that drops hosts (and so domains) leaves the other domains' names as they were, and the
    order domains come in does not matter."""
    loc = build_from_rows([_nasty_fabric().rows])
    full = slurm_names(loc.domains.values())
    assert slurm_names(reversed(list(loc.domains.values()))) == full
    out = export(loc, "slurm-tree", nodes={"h00", "h02", "h03", "h06"})
    kept = {c.name for c in parse_topology_conf(out.text) if c.nodes}
    wanted = {full[d.key] for d in loc.units() if set(d.hosts) & {"h00", "h02", "h03", "h06"}}
    assert kept == wanted
    assert parse_topology_conf(export(loc, "slurm-tree").text) == parse_topology_conf(
        export(loc, "slurm-tree").text
    )


def test_exports_of_raw_descriptions_read_back_as_slurm_reads_them():
    """Tree, block and YAML forms of leaves named by raw descriptions: every name is in the
    real files' form, parse_topology_conf (Slurm's rules) accepts the file, hosts round-trip."""
    loc = build_from_rows([_nasty_fabric().rows])
    for fmt in ("slurm-tree", "slurm-block"):
        text = export(loc, fmt).text
        lines = parse_topology_conf(text)
        assert _hosts_of_conf(lines) == set(loc.hosts), fmt
        for c in lines:
            if c.kind in ("switch", "block"):
                assert REAL_NAME.match(c.name), (fmt, c.name)
            for child in c.switches or []:
                assert REAL_NAME.match(child), (fmt, child)
        for line in text.splitlines():
            if not line.startswith("#"):
                assert ";" not in line and ":" not in line and "/" not in line, line
    doc = yaml.safe_load(export(loc, "slurm-yaml").text)
    tree_names = [s["switch"] for s in doc[0]["tree"]["switches"]]
    block_names = [b["block"] for b in doc[1]["block"]["blocks"]]
    assert all(REAL_NAME.match(n) for n in tree_names + block_names)
    tree_conf = {c.name for c in parse_topology_conf(export(loc, "slurm-tree").text)}
    assert set(tree_names) == tree_conf


def test_node_list_filters_and_reports_both_ways():
    loc = build_from_rows([fat_tree_2level(leaves=2, hosts_per_leaf=4)])
    nodes = {"gpu0001", "gpu0002", "gpu0005", "cpu01"}
    out = export(loc, "slurm-tree", nodes=nodes)
    assert _hosts_of_conf(parse_topology_conf(out.text)) == {"gpu0001", "gpu0002", "gpu0005"}
    assert any("5 fabric hosts are not Slurm nodes" in w and "gpu0003" in w for w in out.warnings)
    assert any("1 Slurm nodes are on no fabric: cpu01" in w for w in out.warnings)
    with pytest.raises(ExportError, match="none of the fabric hosts"):
        export(loc, "slurm-tree", nodes={"other"})


def test_hosts_a_host_list_cannot_hold_are_left_out():
    b = Builder()
    leaf = b.switch("leaf", 1)
    b.host("ok1", [leaf])
    b.host("bad,name", [leaf])
    out = export(build_from_rows([b.rows]), "slurm-tree")
    assert _hosts_of_conf(parse_topology_conf(out.text)) == {"ok1"}
    assert any("bad,name" in w for w in out.warnings)


def test_block_form_and_block_sizes():
    loc = build_from_rows([fat_tree_3level(pods=4, core_groups=2)])
    lines = parse_topology_conf(export(loc, "slurm-block").text)
    blocks = [c for c in lines if c.kind == "block"]
    (sizes,) = [c.sizes for c in lines if c.kind == "block_sizes"]
    assert len(blocks) == 8 and sizes == [2, 4, 8, 16]
    assert _hosts_of_conf(lines) == set(loc.hosts)
    # consecutive blocks of a pod are its two leaves
    assert [b.name for b in blocks[:2]] == ["pod01-leaf-01", "pod01-leaf-02"]


def test_block_sizes_never_straddle_blocks_or_fabrics():
    # 3 pods of 3 leaves: pairs would straddle pods; the whole fabric (4 > 3... 16 >= 9) is fine
    loc = build_from_rows([fat_tree_3level(pods=3, leaves_per_pod=3, hosts_per_leaf=2)])
    out = parse_topology_conf(export(loc, "slurm-block").text)
    assert [c.sizes for c in out if c.sizes] == [[2, 32]]
    # rail pods of unequal size: base is the smallest unit
    rows = rail_pods(units=2, hosts_per_unit=4, rails=2)
    rows.hosts.pop()
    out = parse_topology_conf(export(build_from_rows([rows]), "slurm-block").text)
    assert [c.sizes for c in out if c.sizes] == [[3, 6]]
    # two fabrics: no size joins them
    a = fat_tree_2level(leaves=2, fabric_id=1, name="a", prefix="a")
    b = fat_tree_2level(leaves=2, fabric_id=2, name="b", prefix="b")
    out = parse_topology_conf(export(build_from_rows([a, b]), "slurm-block").text)
    assert [c.sizes for c in out if c.sizes] == [[4, 8]]


def test_block_base_is_a_full_leaf_unit_and_smaller_units_are_left_out_and_said():
    """Leaves of 20, 18 and 20 hosts and a 2-host management leaf: the base is 18 (the smallest
    full unit), not 2 (Slurm would plan a 20-node job as 16 base blocks); the management leaf
    cannot be a block of 18 (slurmctld: "children count lower than bblock_node_cnt"), so it is
    left out of the block form, and the header and warnings say so; the tree form keeps it."""
    b = Builder()
    spine = b.switch("spine", 2)
    for leaf_name, n in (("leaf-a", 20), ("leaf-b", 18), ("leaf-c", 20), ("mgmt", 2)):
        leaf = b.switch(leaf_name, 1)
        b.cable(leaf, spine)
        for i in range(n):
            b.host(f"{leaf_name}-h{i:02d}", [leaf])
    loc = build_from_rows([b.rows])
    out = export(loc, "slurm-block")
    lines = parse_topology_conf(out.text)
    blocks = [c for c in lines if c.kind == "block"]
    (sizes,) = [c.sizes for c in lines if c.kind == "block_sizes"]
    assert [c.name for c in blocks] == ["leaf-a", "leaf-b", "leaf-c"] and sizes[0] == 18
    assert all(len(c.nodes) >= sizes[0] for c in blocks)  # slurmctld's rule
    assert (
        "# base block: 18 nodes" in out.text
        and "# left out: 1 units with fewer than 18 nodes (2 nodes" in out.text
    )
    assert any("mgmt" in w and "left out" in w for w in out.warnings)
    assert "mgmt-h[00-01]" in export(loc, "slurm-tree").text
    doc = yaml.safe_load(export(loc, "slurm-yaml").text)
    assert doc[1]["block"]["block_sizes"][0] == 18 and len(doc[1]["block"]["blocks"]) == 3


def test_slurm_yaml_has_25_05_fields():
    loc = build_from_rows([rail_pods(units=2, hosts_per_unit=3, rails=4)])
    out = export(loc, "slurm-yaml", name="gpu")
    assert out.media_type == "application/yaml"
    doc = yaml.safe_load(out.text)
    tree, block = doc
    assert list(tree)[:2] == ["topology", "cluster_default"] and tree["topology"] == "gpu-tree"
    assert tree["cluster_default"] is True and block["cluster_default"] is False
    switches = {s["switch"]: s for s in tree["tree"]["switches"]}
    assert switches["su01-rail0-3"]["nodes"] == "dgx[001-003]"
    assert expand(switches["spine-01-02"]["children"]) == ["su01-rail0-3", "su02-rail0-3"]
    assert all(("nodes" in s) != ("children" in s) for s in switches.values())
    assert block["block"]["block_sizes"] == [3, 6]
    assert [b["block"] for b in block["block"]["blocks"]] == ["su01-rail0-3", "su02-rail0-3"]


def test_kubernetes_documents():
    loc = build_from_rows([rail_pods(units=2, hosts_per_unit=3, rails=4)])
    labels = list(yaml.safe_load_all(export(loc, "labels").text))
    assert len(labels) == 6 and labels[0]["kind"] == "Node" and labels[0]["metadata"]["name"] == "dgx001"
    keys = labels[0]["metadata"]["labels"]
    assert list(keys) == ["topology.weft.io/fabric", "topology.weft.io/spine-group", "topology.weft.io/block",
                          "topology.weft.io/leaf"]  # fmt: skip
    assert keys["topology.weft.io/leaf"] == "su01-rail0-3"
    assert labels[3]["metadata"]["labels"]["topology.weft.io/leaf"] == "su02-rail0-3"

    topology, flavor = yaml.safe_load_all(export(loc, "kueue").text)
    assert topology["apiVersion"] == "kueue.x-k8s.io/v1beta1" and topology["kind"] == "Topology"
    levels = [lv["nodeLabel"] for lv in topology["spec"]["levels"]]
    assert levels[-1] == "kubernetes.io/hostname" and levels[:-1] == list(keys)
    assert flavor["kind"] == "ResourceFlavor" and flavor["spec"] == {
        "nodeLabels": {"topology.weft.io/fabric": "f"}, "topologyName": "weft"}  # fmt: skip

    (kai,) = yaml.safe_load_all(export(loc, "kai").text)
    assert (
        kai["apiVersion"] == "kai.scheduler/v1alpha1" and kai["spec"]["levels"] == topology["spec"]["levels"]
    )

    hypernodes = list(yaml.safe_load_all(export(loc, "volcano").text))
    by_name = {h["metadata"]["name"]: h for h in hypernodes}
    assert all(
        h["apiVersion"] == "topology.volcano.sh/v1alpha1" and h["kind"] == "HyperNode" for h in hypernodes
    )
    pods = [h for h in hypernodes if h["spec"]["tier"] == 1]
    assert len(pods) == 2  # a rail pod is one tier-1 HyperNode, not one per rail leaf
    assert [m["selector"]["exactMatch"]["name"] for m in pods[0]["spec"]["members"]] == [
        "dgx001",
        "dgx002",
        "dgx003",
    ]
    assert {m["type"] for m in pods[0]["spec"]["members"]} == {"Node"}
    for h in hypernodes:
        for m in h["spec"]["members"]:
            if m["type"] == "HyperNode":
                assert m["selector"]["exactMatch"]["name"] in by_name
    assert sorted(h["spec"]["tier"] for h in hypernodes) == [1, 1, 2, 3, 4]


def test_kubernetes_exports_leave_out_names_kubernetes_refuses():
    b = Builder()
    leaf = b.switch("leaf", 1)
    b.host("good-1", [leaf])
    b.host("Bad_Name", [leaf])
    out = export(build_from_rows([b.rows]), "volcano")
    assert "Bad_Name" not in out.text and any("Bad_Name" in w for w in out.warnings)


def test_unknown_format_and_empty():
    loc = build_from_rows([fat_tree_2level()])
    with pytest.raises(ExportError, match="unknown format"):
        export(loc, "pbs")
    with pytest.raises(ExportError, match="no fabric"):
        export(loc, "slurm-tree", fabric_ids=[99])


def test_read_node_list():
    text = (
        "# sinfo\ngpu[001-003] login1\nNodeName=DEFAULT CPUs=8\nNodeName=cpu[1-2] CPUs=64\nnode/k8s-a,k8s-b\n"
    )
    assert read_node_list(text) == {"gpu001", "gpu002", "gpu003", "login1", "cpu1", "cpu2", "k8s-a", "k8s-b"}
    with pytest.raises(LocatedError) as err:
        read_node_list("ok\ngpu[1-\n", "nodes.txt")
    assert err.value.line == 2 and str(err.value).startswith("nodes.txt:2:")


@pytest.mark.parametrize(
    "text,message",
    [
        ("SwitchName=s0 Nodes=a Switches=s1\nSwitchName=s1 Nodes=b", "both child switches and nodes"),
        ("SwitchName=s0 Switches=s9", "undefined child 's9'"),
        ("SwitchName=s0 Nodes=a\nSwitchName=s0 Nodes=b", "already defined on line 1"),
        ("SwitchName=" + "x" * 65 + " Nodes=a", "longer than 64"),
        ("BlockSizes=4,12", "powers of two"),
        (
            "BlockName=b1 Nodes=a[1-4]\nBlockName=b2 Nodes=c[1-2]\nBlockSizes=4,8",
            "b2 has 2 nodes, fewer than the base",
        ),
        ("Nodes=a", "needs SwitchName"),
        ("SwitchName=s0 Nodes=a[1-", "unclosed"),
        (
            "SwitchName=l Nodes=a\nSwitchName=s1 Switches=l,s2\nSwitchName=s2 Switches=s1",
            "s1 is below itself.*not a tree",
        ),
    ],
)
def test_parse_topology_conf_refuses_what_slurm_refuses(text, message):
    with pytest.raises(LocatedError, match=message):
        parse_topology_conf(text)


def test_real_topology_conf_files(realdata):
    files = sorted((realdata / "slurm_topology").glob("*.conf"))
    assert len(files) >= 5
    counts = {}
    for path in files:
        if path.name == "psmn_X5.topology.conf":  # two switches each listing the other: Slurm's
            # "Switch configuration is not a tree" (test_slurmctld loads it into slurmctld)
            with pytest.raises(LocatedError, match="not a tree") as err:
                parse_topology_conf(path.read_text(), path.name)
            assert err.value.line == 4
            continue
        lines = parse_topology_conf(path.read_text(), path.name)
        # the form of every real switch/block name is the one Weft writes (REAL_NAME)
        assert all(REAL_NAME.match(c.name) for c in lines if c.kind in ("switch", "block")), path.name
        hosts = _hosts_of_conf(lines)
        counts[path.name] = len(hosts)
        # fold each Nodes= set and expand it back: the same set
        from scheduler.hostlist import fold

        for c in lines:
            for names in (c.nodes, c.switches):
                if names:
                    assert sorted(expand(fold(names))) == sorted(set(names)), (path.name, c.line)
    # circe lists circe-n051 under two leaves (s2 and s4): Slurm warns "Multiple leaf switches
    # contain nodes"; 80 entries, 79 nodes
    assert counts["tonystarkiss_circe.topology.conf"] == 79
    assert counts["nvidia_topograph_expected_oci_sim_tree.topology.conf"] == 96
    assert counts["unsw_rocks_a624f92.topology.conf"] == 32
    circe = {
        c.name: c
        for c in parse_topology_conf(
            (realdata / "slurm_topology/tonystarkiss_circe.topology.conf").read_text()
        )
    }
    assert (
        circe["s3"].nodes[:3] == ["circe-n040", "circe-n060", "circe-n062"] and len(circe["s3"].nodes) == 18
    )
    assert set(circe["s2"].nodes) & set(circe["s4"].nodes) == {"circe-n051"}
    assert circe["s0"].nodes[-2:] == ["n019", "n020"]


def test_notes_for_matches_whole_fabric_names():
    from scheduler.exports import notes_for

    warnings = [
        "fabric f: x",
        "fabric ft skipped",
        "2 hosts of fabric a are also on fabric f, where",
        "fabric f-2: y",
    ]
    assert notes_for(warnings, ["f"]) == [warnings[0], warnings[2]]
    assert notes_for(warnings, []) == []
