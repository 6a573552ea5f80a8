"""Synthetic fabrics as ``scheduler.topology.FabricRows`` (no database): 2- and 3-level fat
trees and rail-optimised pods, for the locality and export tests.

GUIDs are ``0x…`` + 16 hex digits, unique per fabric; switch names read like real ones
(``leaf-03``, ``pod02-spine-01``, ``su01-rail3``); hosts ``gpu0001``…; link ids unique per fabric.
"""

from __future__ import annotations

from itertools import count

from scheduler.topology import FabricRows, HcaRow, HostRow, SwitchLink, SwitchRow


class Builder:
    """Builds one :class:`FabricRows`: ``switch()``, ``cable()``, ``host()``."""

    def __init__(self, fabric_id: int = 1, name: str = "f", role: str = "compute", guid_base: int = 0x10000):
        self.rows = FabricRows(fabric_id, name, role)
        self._guid = count(guid_base)
        self._link = count(fabric_id * 1_000_000 + 1)
        self._host = count(fabric_id * 100_000 + 1)

    def switch(self, name: str, tier: int, role: str = "compute") -> str:
        guid = f"0x{next(self._guid):016x}"
        self.rows.switches.append(SwitchRow(guid, name, tier, role))
        return guid

    def cable(self, a: str, b: str, n: int = 1) -> None:
        for _ in range(n):
            self.rows.links.append(SwitchLink(next(self._link), a, b))

    def host(self, name: str, leaves: list[str], gpus: int = 8) -> None:
        hcas = tuple(HcaRow(leaf, next(self._link), i) for i, leaf in enumerate(leaves))
        self.rows.hosts.append(HostRow(next(self._host), name, gpus, hcas))


def fat_tree_2level(leaves: int = 4, spines: int = 2, hosts_per_leaf: int = 4, *, fabric_id: int = 1,
                    name: str = "f", gpus: int = 8, prefix: str = "gpu") -> FabricRows:  # fmt: skip
    """Every leaf to every spine; hosts ``{prefix}0001``… in leaf order."""
    b = Builder(fabric_id, name)
    sp = [b.switch(f"spine-{s + 1:02d}", 2) for s in range(spines)]
    h = count(1)
    for x in range(leaves):
        leaf = b.switch(f"leaf-{x + 1:02d}", 1)
        for s in sp:
            b.cable(leaf, s)
        for _ in range(hosts_per_leaf):
            b.host(f"{prefix}{next(h):04d}", [leaf], gpus)
    return b.rows


def fat_tree_3level(pods: int = 3, leaves_per_pod: int = 2, spines_per_pod: int = 2, cores: int = 2,
                    hosts_per_leaf: int = 2, *, fabric_id: int = 1, name: str = "f", gpus: int = 8,
                    core_groups: int = 1) -> FabricRows:  # fmt: skip
    """Pods of leaves and spines (every leaf to every spine of its pod); every pod spine to every
    core of its core group; pods are split into ``core_groups`` groups that share no core."""
    b = Builder(fabric_id, name)
    core_sw = [[b.switch(f"g{g + 1}-core-{c + 1:02d}", 3) for c in range(cores)] for g in range(core_groups)]
    h = count(1)
    for p in range(pods):
        group = core_sw[p * core_groups // pods]
        spines = [b.switch(f"pod{p + 1:02d}-spine-{s + 1:02d}", 2) for s in range(spines_per_pod)]
        for s in spines:
            for c in group:
                b.cable(s, c)
        for x in range(leaves_per_pod):
            leaf = b.switch(f"pod{p + 1:02d}-leaf-{x + 1:02d}", 1)
            for s in spines:
                b.cable(leaf, s, 2)
            for _ in range(hosts_per_leaf):
                b.host(f"node{next(h):03d}", [leaf], gpus)
    return b.rows


def rail_pods(units: int = 2, hosts_per_unit: int = 4, rails: int = 8, spines: int = 2, *,
              fabric_id: int = 1, name: str = "f", gpus: int = 8) -> FabricRows:  # fmt: skip
    """Scalable units of ``rails`` rail leaves; HCA i of every host of a unit on its rail-i leaf;
    every rail leaf to every spine."""
    b = Builder(fabric_id, name)
    sp = [b.switch(f"spine-{s + 1:02d}", 2) for s in range(spines)]
    h = count(1)
    for u in range(units):
        leaves = [b.switch(f"su{u + 1:02d}-rail{r}", 1) for r in range(rails)]
        for leaf in leaves:
            for s in sp:
                b.cable(leaf, s)
        for _ in range(hosts_per_unit):
            b.host(f"dgx{next(h):03d}", leaves, gpus)
    return b.rows
