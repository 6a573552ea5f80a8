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
#: PCI device IDs of NVIDIA/Mellanox switch ASICs (``pci.ids``, vendor 15b3: cf08 Switch-IB 2,
#: d2f0 Quantum, d2f2 Quantum-2, d2f4 Quantum-3) and of the Quantum SHARP Aggregation Node function
#: (cf09, as Selene's ibnetdiscover reports it for all 666 of them): a CA with one of these is the
#: SHARP Aggregation Node inside a switch, never a host adapter (ConnectX CAs are 0x1003-0x1023...)
SWITCH_ASIC_DEVICE_IDS = frozenset({0xCF08, 0xCF09, 0xD2F0, 0xD2F2, 0xD2F4})


def is_aggregation_node(description: str) -> bool:
    """True for a CA whose NodeDescription says it is a SHARP Aggregation Node (the firmware's
    default, ``"Mellanox Technologies Aggregation Node"``). :func:`aggregation_nodes` also
    recognises one by its device ID and the switch it hangs off."""
    return _AGGREGATION in description.lower()


def aggregation_nodes(topology: Topology) -> dict[str, str]:
    """The SHARP Aggregation Nodes of ``topology``: CA GUID → GUID of the switch it hangs off
    (``""`` when it is cabled to no switch).

    A SHARP-capable switch (Switch-IB 2, Quantum and later) exposes an Aggregation Node: a CA
    function inside the switch, cabled to the switch's last, internal port (port 41 of a
    QM8700, 37 of an MSB7800), that the SHARP Aggregation Manager drives (NVIDIA SHARP
    deployment guide; UFM user manual, "Appendix – NVIDIA SHARP Integration"). It is no host:
    it runs no jobs and makes no leaf. A CA is one when any of these holds:

    * its NodeDescription says so (:func:`is_aggregation_node`);
    * its device ID is a switch ASIC's (:data:`SWITCH_ASIC_DEVICE_IDS`);
    * it shares its system image GUID (NodeInfo:SystemImageGUID, IBTA Vol 1 14.2.5.3: the same
      for every node of one chassis) with the switch it is cabled to, or that GUID is the
      switch's node GUID (Selene: the AN of ``S-1c34da0300728866`` reports
      ``sysimgguid=0x1c34da0300728866``): a CA in the switch's own box.

    The switch is the one its first linked port reaches (an AN has one port).
    """
    nodes = topology.nodes
    peer: dict[str, str] = {}
    for (a, _pa), (b, _pb) in topology.links:
        if a == b:
            continue
        for here, there in ((a, b), (b, a)):
            if here not in peer and nodes[here].node_type == CA and nodes[there].node_type == SWITCH:
                peer[here] = there
    out: dict[str, str] = {}
    for guid, node in nodes.items():
        if node.node_type != CA:
            continue
        switch = peer.get(guid, "")
        found = is_aggregation_node(node.description) or node.device_id in SWITCH_ASIC_DEVICE_IDS
        if not found and switch and node.system_image_guid:
            sw = nodes[switch]
            found = node.system_image_guid in (sw.guid, sw.system_image_guid)
        if found:
            out[guid] = switch
    return out


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


def derive_tiers(topology: Topology, aggregation: dict[str, str] | None = None) -> dict[str, int]:
    """Tier of every node (GUID → ``fabric.choices.Tier`` value): CAs 0, leaf 1, spine 2, core 3.

    ``aggregation``: :func:`aggregation_nodes` of ``topology`` (computed when None); a switch
    whose only CA is its SHARP Aggregation Node is no leaf. Switches are ranked by hop distance from the leaves over switch-switch links (0 → leaf,
    1 → spine, ≥2 → core); switches with no path to a leaf and routers are 9 (unknown).
    """
    nodes = topology.nodes
    if aggregation is None:
        aggregation = aggregation_nodes(topology)
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
            if any(nodes[n].node_type == CA and n not in aggregation for n in neighbours[guid]):
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
