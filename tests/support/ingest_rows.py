"""Shared by the ingest digest and same-source tests: a cable-down variant of
:data:`tests.support.topologies.BASE` and a snapshot of a fabric's stored topology rows."""

from __future__ import annotations

from fabric.models import Link, Node, Port
from fabric.services.ingest.columns import LINK_FIELDS, NODE_FIELDS, PORT_FIELDS
from tests.support.topologies import BASE

CABLE_DOWN = BASE.replace('[2] "leaf2"[7]\n', "").replace('[7] "spine"[2] # "spine-1" lid 1 4xHDR\n', "")


def snapshot(fabric) -> tuple:
    """Every stored topology value of ``fabric`` by natural key (no ids, no timestamps)."""
    nodes = sorted(
        Node.objects.filter(fabric=fabric).values_list("node_guid", *NODE_FIELDS[:-1], "host__name")
    )
    ports = sorted(
        Port.objects.filter(node__fabric=fabric).values_list("node__node_guid", "port_num", *PORT_FIELDS)
    )
    links = sorted(
        Link.objects.filter(fabric=fabric).values_list(
            "port_a__node__node_guid", "port_a__port_num", "port_b__node__node_guid", "port_b__port_num",
            *LINK_FIELDS,
        )
    )  # fmt: skip
    return nodes, ports, links
