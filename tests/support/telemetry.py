"""Telemetry test data built with the ORM: a tiny fat tree and sweeps written as the sweep service
writes them, so expected heatmap cells and series follow from the rows a test wrote."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from fabric.choices import NodeType, PortState, Tier
from fabric.models import Fabric, Link, Node, Port
from telemetry.models import PortCounters, Sweep, SweepStatus


def make_fabric(name: str = "lab") -> dict:
    """A tiny fat tree: spine1/spine2 (tier 2, 4 ports), leaf1/leaf2 (tier 1, 4 ports), host1 CA.

    Links: leaf1[1]-spine1[1], leaf1[2]-spine2[1], leaf2[1]-spine1[2], leaf2[2]-spine2[2],
    leaf1[3]-host1[1]. Returns ``{"fabric", "nodes": {desc: Node}, "ports": {(desc, num): Port}}``.
    """
    fabric = Fabric.objects.create(name=name)
    nodes, ports = {}, {}
    specs = [
        ("spine1", NodeType.SWITCH, Tier.SPINE, 4, 0x10),
        ("spine2", NodeType.SWITCH, Tier.SPINE, 4, 0x11),
        ("leaf1", NodeType.SWITCH, Tier.LEAF, 4, 0x20),
        ("leaf2", NodeType.SWITCH, Tier.LEAF, 4, 0x21),
        ("host1 mlx5_0", NodeType.CA, Tier.HOST, 1, 0x30),
    ]
    for desc, kind, tier, nports, guid in specs:
        node = Node.objects.create(
            fabric=fabric,
            node_guid=f"0x{guid + 1000 * fabric.pk:016x}",
            node_type=kind,
            description=desc,
            num_ports=nports,
            tier=tier,
            lid=guid,
        )
        nodes[desc] = node
        first = 0 if kind == NodeType.SWITCH else 1
        for num in range(first, nports + 1):
            ports[(desc, num)] = Port.objects.create(
                node=node, port_num=num, state=PortState.ACTIVE, width="4x", speed="HDR", rate_gbps=200.0
            )
    for a, b in [
        (("leaf1", 1), ("spine1", 1)),
        (("leaf1", 2), ("spine2", 1)),
        (("leaf2", 1), ("spine1", 2)),
        (("leaf2", 2), ("spine2", 2)),
        (("leaf1", 3), ("host1 mlx5_0", 1)),
    ]:
        pa, pb = sorted([ports[a], ports[b]], key=lambda p: p.pk)
        Link.objects.create(fabric=fabric, port_a=pa, port_b=pb, width="4x", speed="HDR", rate_gbps=200.0)
    return {"fabric": fabric, "nodes": nodes, "ports": ports}


def write_sweep(fabric: Fabric, values: dict[Port, dict], status: str = SweepStatus.OK) -> Sweep:
    """Write a sweep and the PortCounters of ``values`` (port -> field values) like the sweep service."""
    previous = Sweep.objects.filter(fabric=fabric).order_by("-started").first()
    started = (previous.started + timedelta(seconds=1)) if previous else timezone.now()
    sweep = Sweep.objects.create(
        fabric=fabric, started=started, duration_s=0.1, interval_s=1.0 if previous else None, status=status
    )
    for port, fields in values.items():
        PortCounters.objects.update_or_create(
            port=port, defaults={"sweep": sweep, "sampled_at": started, **fields}
        )
    return sweep
