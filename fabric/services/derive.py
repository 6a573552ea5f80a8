"""Derived topology facts (pure, no Django): switch tiers and host names.

Neither is an IB attribute. Tiers follow the usual fat-tree reading (as UFM and ``ibtopotool`` do):
a switch with at least one host CA is a *leaf*; a switch one switch-hop above the leaves is a
*spine*; anything further is *core*. SHARP Aggregation Nodes (a CA inside every Quantum switch,
NodeDescription ``"Mellanox Technologies Aggregation Node"``) are not hosts and do not make a leaf.
"""

from __future__ import annotations

import re
from collections import deque

from fabric.parsers.records import CA, SWITCH, Topology

HOST, LEAF, SPINE, CORE, UNKNOWN = 0, 1, 2, 3, 9

# The device part of a CA NodeDescription "<host> <device>" as the drivers set it (mlx5_3, HCA-1,
# ibp11s0f0 netdev names, qib0, hfi1_0, irdma0, bnxt_re0, mthca0, ehca0, ipath0, efa0...).
_DEVICE = re.compile(
    r"^(?:mlx\d+_\d+|mthca\d+|HCA-\d+|ib[a-z0-9_]+|qib\d+|hfi\d+_\d+|irdma\d+|bnxt_re\d+|ehca\d+|"
    r"ipath\d+|efa\d+|rxe\d+|siw\d+|erdma_\d+|cxgb\d_\d+|ocrdma\d+|qedr\d+|vmw_pvrdma\d+|mana_\d+)$",
    re.IGNORECASE,
)
_AGGREGATION = "aggregation node"


def is_aggregation_node(description: str) -> bool:
    """True for a SHARP Aggregation Node CA (not a host)."""
    return _AGGREGATION in description.lower()


def host_from_description(description: str) -> str | None:
    """Host name of a CA from its NodeDescription, or None when it carries none.

    ``"host017 mlx5_3"`` → ``"host017"``; ``"selene-cache-02 mlx5_1 "`` → ``"selene-cache-02"``;
    default descriptions (``"MT25408 ConnectX Mellanox Technologies"``, ``"Mellanox Technologies
    Aggregation Node"``) → None. Rule: exactly two words, the second a device name the RDMA drivers
    use (see ``_DEVICE``).
    """
    words = description.split()
    if len(words) != 2 or not _DEVICE.match(words[1]):
        return None
    return words[0][:128]


def display_name(guid: str, description: str, names: dict[str, str] | None) -> str:
    """The name admins see for a node (``Node.name``): its entry in the fabric's node-name map
    (``names``: canonical node GUID → name, as ``ibnetdiscover --node-name-map`` and OpenSM's
    ``remap_node_name`` look it up), else its NodeDescription trimmed (the raw description is
    stored as the tool printed it, spaces included; display trims). May be ``""`` (no map entry,
    empty description): readers fall back to the GUID."""
    if names:
        mapped = names.get(guid)
        if mapped:
            return mapped
    return description.strip()[:128]


def host_for(node_type: str, description: str, name: str) -> str | None:
    """Host name of a node, or None: CAs (and routers) only, never a SHARP Aggregation Node.

    The host name in the NodeDescription wins (:func:`host_from_description`); when it has none
    (every HCA with the same default description, ``"MT4119 ConnectX5 Mellanox Technologies"``)
    the host comes from the display name ``name`` when a node-name map gave one: ``"cn017
    mlx5_0"`` → ``"cn017"`` (same rule), a single word ``"cn017"`` → itself; anything else
    (several words that are not ``<host> <device>``) → None. ``name`` equal to the trimmed
    description (no map entry) adds nothing.
    """
    if node_type == SWITCH or is_aggregation_node(description):
        return None
    host = host_from_description(description)
    if host or not name or name == description.strip():
        return host
    words = name.split()
    if len(words) == 1:
        return words[0][:128]
    return host_from_description(name)


def derive_tiers(topology: Topology) -> dict[str, int]:
    """Tier of every node (GUID → ``fabric.choices.Tier`` value): CAs 0, leaf 1, spine 2, core 3.

    Switches are ranked by hop distance from the leaves over switch-switch links (0 → leaf,
    1 → spine, ≥2 → core); switches with no path to a leaf and routers are 9 (unknown).
    """
    nodes = topology.nodes
    neighbours: dict[str, set[str]] = {g: set() for g in nodes}
    for (a, _pa), (b, _pb) in topology.links:
        if a != b:
            neighbours[a].add(b)
            neighbours[b].add(a)
    tiers: dict[str, int] = {}
    queue: deque[str] = deque()
    for guid, node in nodes.items():
        if node.node_type == CA:
            tiers[guid] = HOST
        elif node.node_type == SWITCH:
            if any(
                nodes[n].node_type == CA and not is_aggregation_node(nodes[n].description)
                for n in neighbours[guid]
            ):
                tiers[guid] = LEAF
                queue.append(guid)
        else:
            tiers[guid] = UNKNOWN
    while queue:
        guid = queue.popleft()
        for n in neighbours[guid]:
            if n not in tiers and nodes[n].node_type == SWITCH:
                tiers[n] = min(tiers[guid] + 1, CORE)
                queue.append(n)
    for guid in nodes:
        tiers.setdefault(guid, UNKNOWN)
    return tiers
