"""Routes for tests without a lab: min-hop LFTs over a stored topology, written as a routing
snapshot (``routing.models``), so the job→links index (``scheduler.services.joblinks``) and the
views over it run on a small ``tests.support.jobs.gpu_cluster`` fabric."""

from __future__ import annotations

from collections import deque

from fabric.choices import NodeType
from fabric.models import Link, Node, Port
from routing.models import RoutingSnapshot, SwitchRoute
from routing.parsers import UNASSIGNED
from routing.services.current import clear_cache


def min_hop_routes(fabric) -> None:
    """LIDs for every switch and CA port, and one snapshot of min-hop LFTs (lowest port first)."""
    lid = 1
    for n in Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH).order_by("name"):
        n.lid = lid
        n.save(update_fields=["lid"])
        lid += 1
    for p in Port.objects.filter(node__fabric=fabric, node__node_type=NodeType.CA).order_by(
        "node__name", "port_num"
    ):
        p.lid = lid
        p.save(update_fields=["lid"])
        lid += 1
    adj: dict[str, list[tuple[int, str]]] = {}
    ca_at: dict[int, tuple[str, int]] = {}
    for link in Link.objects.filter(fabric=fabric).select_related("port_a__node", "port_b__node"):
        a, b = link.port_a, link.port_b
        for x, y in ((a, b), (b, a)):
            if x.node.node_type == NodeType.SWITCH and y.node.node_type == NodeType.SWITCH:
                adj.setdefault(x.node.node_guid, []).append((x.port_num, y.node.node_guid))
            elif x.node.node_type == NodeType.SWITCH:
                ca_at[y.lid] = (x.node.node_guid, x.port_num)
    switches = {n.node_guid: n.lid for n in Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH)}
    lfts = {g: [UNASSIGNED] * (lid + 1) for g in switches}
    for g, slid in switches.items():
        lfts[g][slid] = 0
    for dlid, (home, port) in ca_at.items():
        dist, todo = {home: 0}, deque([home])
        while todo:
            s = todo.popleft()
            for _p, t in adj.get(s, []):
                if t not in dist:
                    dist[t] = dist[s] + 1
                    todo.append(t)
        lfts[home][dlid] = port
        for s in switches:
            if s != home:
                lfts[s][dlid] = min(p for p, t in adj[s] if dist.get(t) == dist[s] - 1)
    snap = RoutingSnapshot.objects.create(fabric=fabric, source="mad", digest="test", switches=len(switches))
    SwitchRoute.objects.bulk_create(
        [
            SwitchRoute(snapshot=snap, node_guid=g, lid=switches[g], lft=bytes(t), digest=g[-8:])
            for g, t in lfts.items()
        ]
    )
    clear_cache()
