"""A two-level fat tree with its routes, for path-aware placement (tests and ``bench/placement.py``):
the :class:`~scheduler.locality.Locality` of ``tests.support.localities.tree`` and the matching
:class:`~routing.tables.RouteTables`, no database.

Leaf ``i`` has the locality's leaf GUID, its hosts on ports 1..H (one HCA each, LIDs 1..N in
host-name order) and uplink ``s`` on port ``H + 1 + s`` to spine ``s`` (spine port ``i + 1``).
Routing is d-mod-k as OpenSM's min-hop and ftree give it on such a tree: a leaf sends a remote
LID up to spine ``k % spines``, ``k`` the destination host's position on its leaf (0-based), so
each destination is reached through one spine from every leaf; spines send down.
"""

from __future__ import annotations

from routing.parsers import UNASSIGNED
from routing.tables import RouteTables, build_tables
from scheduler.locality import Locality

from .localities import tree


def spine_guid(s: int, fabric_id: int = 1) -> str:
    return f"0x{fabric_id:04x}09{s:010x}"


def routed_fat_tree(
    leaves: int, spines: int, hosts_per_leaf: int, gpus: int = 8, fabric_id: int = 1
) -> tuple[Locality, RouteTables, dict[str, list[int]]]:
    """``(locality, tables, host → [LID])`` of the module docstring's tree."""
    loc = tree(1, 1, leaves, hosts_per_leaf, gpus=gpus, fabric_id=fabric_id)
    units = sorted(loc.units(), key=lambda u: u.key)
    hosts = sorted(loc.hosts)
    n = len(hosts)
    host_lids = {h: [i + 1] for i, h in enumerate(hosts)}
    leaf_lid = {i: n + 1 + i for i in range(leaves)}
    spine_lid = {s: n + 1 + leaves + s for s in range(spines)}
    top = n + leaves + spines
    H = hosts_per_leaf
    cas, links, where = [], [], {}
    leaf_guids = []
    for i, u in enumerate(sorted(units, key=lambda u: loc.hosts[sorted(u.hosts)[0]].name)):
        g = u.switches[0]
        leaf_guids.append(g)
        for k, h in enumerate(sorted(u.hosts)):
            ca = f"0x{fabric_id:04x}0a{host_lids[h][0]:010x}"
            cas.append((ca, 1, f"{h} mlx5_0", host_lids[h][0], 0))
            links.append((g, 1 + k, ca, 1))
            where[host_lids[h][0]] = (i, k)
    switches = []
    for i, g in enumerate(leaf_guids):
        lft = bytearray([UNASSIGNED]) * (top + 1)
        for d, (li, k) in where.items():
            lft[d] = 1 + k if li == i else H + 1 + k % spines
        lft[leaf_lid[i]] = 0
        switches.append((g, f"leaf-{i + 1:02d}", leaf_lid[i], bytes(lft), H + spines))
    for s in range(spines):
        lft = bytearray([UNASSIGNED]) * (top + 1)
        for d, (li, _k) in where.items():
            lft[d] = 1 + li
        lft[spine_lid[s]] = 0
        g = spine_guid(s, fabric_id)
        switches.append((g, f"spine-{s + 1:02d}", spine_lid[s], bytes(lft), leaves))
        for i, lg in enumerate(leaf_guids):
            links.append((lg, H + 1 + s, g, 1 + i))
    return loc, build_tables(switches, cas, links), host_lids
