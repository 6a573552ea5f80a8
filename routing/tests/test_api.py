"""The routing API, the health check and current_routes' cache over a stored snapshot (SQLite).

The topology is imported (``lab.netgen``'s 2 leaves x 2 hosts, 2 spines) and given the LIDs of
``test_pure``'s tree; the snapshot rows are the tables that tree routes by.
"""

from __future__ import annotations

import pytest

from events.health import CHECKS, build_report
from fabric.choices import NodeType
from fabric.models import Fabric, Node, Port
from fabric.services.ingest import import_topology_text
from lab.netgen import fat_tree_2level
from routing.models import RouteSource, RoutingSnapshot, SwitchRoute
from routing.services.collect import snapshot_digest, table_digest
from routing.services.current import clear_cache, current_routes
from tests.support.lft_rows import lft

pytestmark = pytest.mark.django_db

LIDS = {"leaf-01": 10, "leaf-02": 11, "spine-01": 20, "spine-02": 21}
TABLES = {
    "leaf-01": {1: 1, 2: 2, 3: 3, 4: 4, 10: 0, 11: 3, 20: 3, 21: 4},
    "leaf-02": {1: 3, 2: 4, 3: 1, 4: 2, 11: 0, 10: 3, 20: 3, 21: 4},
    "spine-01": {1: 1, 2: 1, 3: 2, 4: 2, 10: 1, 11: 2, 20: 0, 21: 1},
    "spine-02": {1: 1, 2: 1, 3: 2, 4: 2, 10: 1, 11: 2, 21: 0, 20: 1},
}


def short(name: str) -> str:
    """``leaf-01`` of ``MF0;leaf-01:MQM8700/U1`` (the imported switches' names)."""
    return name.split(";")[-1].split(":")[0]


@pytest.fixture
def fabric():
    d = import_topology_text("tree", fat_tree_2level(2, 2, 2), filename="tree.txt")
    f = d.fabric
    for node in Node.objects.filter(fabric=f):
        if node.node_type == NodeType.SWITCH:
            node.lid = LIDS[short(node.name)]
            node.save(update_fields=["lid"])
        else:
            Port.objects.filter(node=node, port_num=1).update(lid=int(node.name[4:7]))
    clear_cache()
    return f


def snapshot(fabric, tables=TABLES) -> RoutingSnapshot:
    rows = {n.node_guid: (n.lid, lft(tables[short(n.name)])) for n in Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH)}  # fmt: skip
    digests = {g: table_digest(t) for g, (_l, t) in rows.items()}
    snap = RoutingSnapshot.objects.create(
        fabric=fabric, source=RouteSource.MAD, digest=snapshot_digest(digests), switches=len(rows)
    )
    SwitchRoute.objects.bulk_create(
        SwitchRoute(snapshot=snap, node_guid=g, lid=lid, lft=t, digest=digests[g])
        for g, (lid, t) in rows.items()
    )
    return snap


def test_report_and_trace_endpoints(fabric, viewer, client):
    base = f"/api/fabric/fabrics/{fabric.pk}/routing/"
    assert client.get(base).status_code in (401, 403)
    r = viewer.get(base)
    assert r.status_code == 404 and "not been read yet" in r.json()["detail"]
    snap = snapshot(fabric)

    r = viewer.get(base)
    assert r.status_code == 200
    body = r.json()
    assert body["snapshot"]["id"] == snap.pk and body["report"]["ca_pairs"] == 12
    assert body["report"]["hops"] == {"2": 4, "4": 8}
    snap.refresh_from_db()  # stored for the other processes (API, health report), over this topology
    assert (
        snap.report == body["report"]
        and snap.report_topology == Fabric.objects.get(pk=fabric.pk).last_discovery_id
    )
    clear_cache()
    assert viewer.get(base).json()["report"] == body["report"]

    r = viewer.get(base + "trace/", {"src": "host001 mlx5_0", "dst": "host004 mlx5_0"})
    assert r.status_code == 200, r.content
    t = r.json()
    assert t["ok"] is True and (t["src_lid"], t["dst_lid"]) == (1, 4)
    assert [(short(h["name"]), h["in_port"], h["out_port"]) for h in t["hops"]] == [
        ("leaf-01", 1, 4), ("spine-02", 1, 2), ("leaf-02", 4, 2),
    ]  # fmt: skip
    assert t["dst"]["name"] == "host004 mlx5_0" and t["dst"]["type"] == "ca"
    # by LID and by GUID: the same path; to a switch
    guid = Node.objects.get(fabric=fabric, name="host004 mlx5_0").node_guid
    assert viewer.get(base + "trace/", {"src": "1", "dst": guid}).json()["hops"] == t["hops"]
    sw = viewer.get(base + "trace/", {"src": "1", "dst": "MF0;spine-01:MQM8700/U1"}).json()
    assert sw["ok"] and [(short(h["name"]), h["in_port"], h["out_port"]) for h in sw["hops"]] == [
        ("leaf-01", 1, 3), ("spine-01", 1, 0),
    ]  # fmt: skip
    # the user's mistakes: 400 with the reason per end; a LID nobody has: ok false
    r = viewer.get(base + "trace/", {"src": "nosuchhost", "dst": ""})
    assert r.status_code == 400
    assert "no node of tree is 'nosuchhost'" in r.json()["src"][0] and "give a LID" in r.json()["dst"][0]
    r = viewer.get(base + "trace/", {"src": "host00", "dst": "1"})  # a description part: no exact name
    assert r.status_code == 400
    r = viewer.get(base + "trace/", {"src": "1", "dst": "4", "src_port": "x"})
    assert r.status_code == 400 and "src_port" in r.json()
    r = viewer.get(base + "trace/", {"src": "1", "dst": "999"})
    assert r.status_code == 200 and r.json()["ok"] is False and r.json()["reason"] == "unknown_lid"

    r = viewer.get(base + "snapshots/")
    assert [s["id"] for s in r.json()["results"]] == [snap.pk]


def test_health_report_has_the_routing_check_and_cache_follows_snapshots(fabric):
    assert "routing" in CHECKS
    snapshot(fabric)
    first = current_routes(fabric)
    assert current_routes(fabric) is first  # cached
    rep = build_report(fabric)
    assert rep.summary["routing"] == 0
    # a broken table: L1 has no entry for host003 -> the report says 2 pairs unrouted
    broken = {**TABLES, "leaf-01": {**TABLES["leaf-01"], 3: 255}}
    snapshot(fabric, broken)
    assert current_routes(fabric) is not first
    rep = build_report(fabric)
    found = [f for f in rep.findings if f["check"] == "routing"]
    assert [f["severity"] for f in found] == ["critical"] and "2 CA pairs have no route" in found[0][
        "message"
    ]


def test_collect_routes_refuses_an_imported_fabric(fabric):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="no live access configured"):
        call_command("collect_routes", fabric.name)
    with pytest.raises(CommandError, match="no fabric 'nosuch'"):
        call_command("collect_routes", "nosuch")
    assert not RoutingSnapshot.objects.exists()
