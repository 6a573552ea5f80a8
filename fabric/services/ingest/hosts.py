"""Hosts of a parsed topology: the CAs and routers whose NodeDescription names a host (never a
SHARP Aggregation Node), and their ``Host`` rows."""

from __future__ import annotations

from core.bulk import insert_rows

from ...models import Fabric, Host
from ...parsers.records import SWITCH, Topology
from ..derive import aggregation_nodes, host_for
from .changes import Changes
from .common import fetch_rows


def host_names(topo: Topology, aggregation: dict[str, str] | None = None) -> dict[str, str]:
    """Node GUID → host name, for the CAs and routers whose NodeDescription names a host (never a
    SHARP Aggregation Node: ``aggregation``, :func:`~fabric.services.derive.aggregation_nodes`,
    computed when None)."""
    if aggregation is None:
        aggregation = aggregation_nodes(topo)
    out = {}
    for guid, node in topo.nodes.items():
        if node.node_type != SWITCH and guid not in aggregation:
            name = host_for(node.node_type, node.description, node.label)
            if name:
                out[guid] = name
    return out


def sync_hosts(fabric: Fabric, hosts: dict[str, str], ch: Changes) -> dict[str, int]:
    """Create the hosts named in ``hosts`` (values) that are not stored; returns name → id of all."""
    wanted = set(hosts.values())
    stored = dict(fetch_rows(Host.objects.filter(fabric=fabric).values_list("name", "id")))
    missing = [(fabric.pk, n) for n in sorted(wanted - stored.keys())]
    if missing:
        new_ids = insert_rows(Host, ["fabric_id", "name"], missing, with_ids=True)
        ch.rows += len(missing)
        if new_ids is not None:
            stored.update(zip((n for _, n in missing), new_ids, strict=True))
        else:
            stored = dict(fetch_rows(Host.objects.filter(fabric=fabric).values_list("name", "id")))
    return stored
