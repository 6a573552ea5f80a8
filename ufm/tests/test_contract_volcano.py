"""Contract: Volcano's UFM HyperNode discoverer (``volcano-sh/volcano``,
``pkg/controllers/hypernode/discovery/ufm/ufm.go``), replayed against Weft.

The client sends ``GET /ufmRest/resources/ports`` with HTTP Basic (``req.SetBasicAuth``) and
nothing else, refuses any status but 200, decodes the body with Go's ``encoding/json`` into
``[]UFMInterface{Description string, Tier int, SystemName string, NodeDescription string,
PeerNodeName string}`` (one type error and the whole answer is dropped), then builds HyperNodes:
it keeps the rows whose ``description`` contains ``Computer``, groups the ``system_name`` of each
by ``peer_node_name`` (the leaf), merges leaves that share a node (breadth-first), names the groups
``leaf-hn-<i>`` (tier 1) and puts them all under ``spine-hn`` (tier 2). When the answer has no
Computer row it sends an empty set and its controller deletes every HyperNode it made, so Weft
must never answer 200 ``[]`` for a fabric it has not discovered.

The algorithm below is written from that description, for the test; the HyperNodes it builds from
Weft's answer are checked against the stored fabric (which host is cabled to which leaf).
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from django.test import Client

from fabric.choices import NodeType
from fabric.models import Fabric, Port
from fabric.services.ingest import import_topology_text
from tests.support.topologies import RAILS
from tests.support.typed_json import DecodeError, go_decode

from .conftest import basic

pytestmark = pytest.mark.django_db

#: Volcano's ``UFMInterface`` (Go field name -> type; keys match case-insensitively)
UFM_INTERFACE = {"description": str, "tier": int, "system_name": str, "node_description": str,
                 "peer_node_name": str}  # fmt: skip


def volcano_client(users) -> Client:
    return Client(HTTP_AUTHORIZATION=basic("vic", "pw-vic"), HTTP_USER_AGENT="Go-http-client/1.1",
                  HTTP_ACCEPT_ENCODING="gzip")  # fmt: skip


def fetch(client) -> list[dict] | None:
    """Volcano's ``fetchUFMData``: the decoded rows, or None where it logs an error and sends
    nothing (a status other than 200, a decode error)."""
    resp = client.get("/ufmRest/resources/ports")
    if resp.status_code != 200:
        return None
    try:
        return go_decode(resp.json(), [UFM_INTERFACE])
    except DecodeError:
        return None


def hypernodes(rows: list[dict]) -> dict[str, dict]:
    """Volcano's ``buildHyperNodes`` as described in the module docstring: ``{name: {"tier",
    "members"}}`` (members: node names for leaves, HyperNode names for the spine)."""
    leaves: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        if "Computer" in row["description"]:
            leaves[row["peer_node_name"]].add(row["system_name"])
    node_leaves: dict[str, set[str]] = defaultdict(set)
    for leaf, nodes in leaves.items():
        for node in nodes:
            node_leaves[node].add(leaf)
    groups, done = [], set()
    for leaf in sorted(leaves):
        if leaf in done:
            continue
        queue, group = [leaf], set()
        while queue:
            current = queue.pop(0)
            if current in done:
                continue
            done.add(current)
            group |= leaves[current]
            queue += [other for node in leaves[current] for other in node_leaves[node] if other not in done]
        groups.append(group)
    out = {f"leaf-hn-{i}": {"tier": 1, "members": sorted(g)} for i, g in enumerate(groups)}
    if out:
        out["spine-hn"] = {"tier": 2, "members": sorted(out)}
    return out


def stored_leaf_groups(fabric: Fabric) -> list[list[str]]:
    """From the database: the hosts under each leaf, leaves sharing a host merged."""
    host_leaves: dict[str, set[str]] = defaultdict(set)
    for port in Port.objects.with_link().filter(node__fabric=fabric, node__node_type=NodeType.CA):
        if port.remote is not None:
            host_leaves[port.node.host.name].add(port.remote.node.node_guid)
    groups: list[tuple[set[str], set[str]]] = []
    for host, leaves in host_leaves.items():
        joined = [g for g in groups if g[1] & leaves]
        hosts, leafs = {host}, set(leaves)
        for g in joined:
            groups.remove(g)
            hosts |= g[0]
            leafs |= g[1]
        groups.append((hosts, leafs))
    return sorted(sorted(h) for h, _ in groups)


def test_ports_decode_as_volcano_does_and_make_the_fabrics_leaf_groups(fat_tree, users):
    rows = fetch(volcano_client(users))
    assert rows is not None, "Volcano would drop this answer"
    computer = [r for r in rows if "Computer" in r["description"]]
    assert len(computer) == 6 and all(r["tier"] == 0 for r in computer)
    assert {r["system_name"] for r in computer} == {f"host00{i}" for i in range(1, 7)}
    hns = hypernodes(rows)
    leaf_groups = sorted(v["members"] for k, v in hns.items() if v["tier"] == 1)
    assert leaf_groups == stored_leaf_groups(fat_tree) == [
        ["host001", "host002"], ["host003", "host004"], ["host005", "host006"],
    ]  # fmt: skip
    assert hns["spine-hn"] == {"tier": 2, "members": ["leaf-hn-0", "leaf-hn-1", "leaf-hn-2"]}
    # what Volcano groups by is the leaf's name (through the node-name map, Node.name)
    assert {r["peer_node_name"] for r in computer} == {
        "MF0;leaf-01:MQM8700/U1", "MF0;leaf-02:MQM8700/U1", "MF0;leaf-03:MQM8700/U1",
    }  # fmt: skip


def test_rail_leaves_sharing_hosts_merge_into_one_group(db, users):
    fabric = import_topology_text("rails", RAILS, filename="rails.net").fabric
    hns = hypernodes(fetch(volcano_client(users)))
    # host001 and host002 each have an HCA on rail0-leaf and on rail1-leaf: one group
    assert hns == {"leaf-hn-0": {"tier": 1, "members": ["host001", "host002"]},
                   "spine-hn": {"tier": 2, "members": ["leaf-hn-0"]}}  # fmt: skip
    assert stored_leaf_groups(fabric) == [["host001", "host002"]]


def test_names_come_through_the_node_name_map(fat_tree, users, admin):
    text = '0x0c42a10300a00200 "leaf-a"\n0x1c34da0300400010 "gpu-a01 mlx5_0"\n'
    assert (
        admin.put(
            f"/api/fabric/fabrics/{fat_tree.pk}/node-name-map/", {"text": text}, format="json"
        ).status_code
        == 200
    )
    rows = fetch(volcano_client(users))
    row = next(r for r in rows if r["node_description"] == "host001 mlx5_0")
    # the host keeps the name in its NodeDescription (host001); the leaf takes the mapped name
    assert (row["system_name"], row["peer_node_name"]) == ("host001", "leaf-a")


def test_never_an_empty_list_that_would_delete_the_hypernodes(db, users):
    client = volcano_client(users)
    assert fetch(client) is None  # no fabric: 503, Volcano logs and keeps its HyperNodes
    Fabric.objects.create(name="new", tool_env={"LD_PRELOAD": "x"})
    resp = client.get("/ufmRest/resources/ports")
    assert resp.status_code == 503 and fetch(client) is None


def test_a_string_tier_would_make_volcano_drop_the_answer():
    """The decoder is Go's: it refuses what Volcano refuses (so the tests above can fail)."""
    with pytest.raises(DecodeError, match="into Go int"):
        go_decode([{"description": "Computer IB Port", "tier": "1"}], [UFM_INTERFACE])
    assert go_decode([{"Description": "Computer IB Port", "tier": None, "extra": 1}], [UFM_INTERFACE])[0] == {
        "description": "Computer IB Port", "tier": 0, "system_name": "", "node_description": "", "peer_node_name": "",
    }  # fmt: skip


@pytest.mark.slow
def test_selene_aggregation_nodes_do_not_join_the_leaves(realdata, users, committed_signals):
    """Selene (666 QM8700, each with its SHARP Aggregation Node CA on port 41): Volcano's
    discoverer over Weft's ports makes one group per scalable unit (28), with the same hosts as
    Weft's own Slurm tree export; before, every AN was a ``Computer IB Port`` named "Mellanox
    Technologies Aggregation Node" on every switch, and all 666 switches made one group."""
    import gzip

    from fabric.models import Node
    from scheduler.exports import export, parse_topology_conf
    from scheduler.topology import build_locality

    text = gzip.decompress(
        (realdata / "ibnetdiscover/selene_compute.ibnetdiscover.txt.gz").read_bytes()
    ).decode()
    fabric = import_topology_text("selene", text, filename="selene.compute.txt").fabric
    client = volcano_client(users)
    rows = fetch(client)
    assert rows is not None
    an_rows = [r for r in rows if r["node_description"] == "Mellanox Technologies Aggregation Node"]
    assert len(an_rows) == 666 and not any("Computer" in r["description"] for r in an_rows)
    # an AN's port is a port of its switch's system (its system_name is the switch's)
    switches = set(
        Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH).values_list("name", flat=True)
    )
    assert {r["system_name"] for r in an_rows} == switches
    hns = hypernodes(rows)
    groups = sorted(v["members"] for v in hns.values() if v["tier"] == 1)
    tree = parse_topology_conf(export(build_locality([fabric]), "slurm-tree").text)
    slurm_units = sorted(sorted(c.nodes) for c in tree if c.nodes is not None)
    assert len(groups) == 28 and groups == slurm_units
    assert sum(len(g) for g in groups) == 469
    # systems: 469 hosts (not 1,135), the ANs inside their switches' systems
    hosts = client.get("/ufmRest/resources/systems?type=host").json()
    assert len(hosts) == 469 and not any("Aggregation" in s["description"] for s in hosts)
    sw = {s["system_name"]: s for s in client.get("/ufmRest/resources/systems?type=switch").json()}
    an = Node.objects.get(fabric=fabric, node_guid="0x1c34da030072886e")
    assert an.aggregation_node and an.host is None and an.aggregation_switch.name == "MF0;MLG01-02:MQM8700/U1"
    assert "1c34da030072886e_1" in sw["MF0;MLG01-02:MQM8700/U1"]["ports"]
    assert len(client.get("/ufmRest/resources/ports?sys_type=Computer").json()) == sum(
        1 for r in rows if "Computer" in r["description"]
    )
