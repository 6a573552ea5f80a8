"""Placement's locality index (built once per ``Locality``) and the small selection routines the
engine and the victim search share (cover counts, best-fit tightening, ranking groups). Pure."""

from __future__ import annotations

import itertools
from bisect import bisect_left, insort
from collections.abc import Sequence

from ..locality import TOP_TIER, Locality
from .shapes import (
    INF,
)

# --------------------------------------------------------------------------------------------
# The index of a locality (built once per Locality object)


class LocalityIndex:
    """Units with their hosts, the units of every tier-2..4 domain, and the host order of the
    naive baseline. Built from ``HostSite.path`` (every host carries its full path)."""

    __slots__ = (
        "locality", "unit_hosts", "unit_path", "unit_fabric", "tier_units", "host_order",
        "names", "total_gpus", "host_fabric", "totals",
    )  # fmt: skip

    def __init__(self, locality: Locality) -> None:
        self.locality = locality
        hosts_of: dict[str, list[str]] = {}
        self.unit_path: dict[str, tuple[str, ...]] = {}
        self.unit_fabric: dict[str, int] = {}
        for site in locality.hosts.values():
            hosts_of.setdefault(site.unit, []).append(site.name)
            self.unit_path.setdefault(site.unit, site.path)
            self.unit_fabric.setdefault(site.unit, site.fabric_id)
        self.unit_hosts = {u: tuple(sorted(hosts_of[u])) for u in sorted(hosts_of)}
        self.tier_units: dict[int, dict[str, tuple[str, ...]]] = {t: {} for t in range(2, TOP_TIER + 1)}
        for t in range(2, TOP_TIER + 1):
            acc: dict[str, list[str]] = {}
            for u in self.unit_hosts:
                acc.setdefault(self.unit_path[u][t - 1], []).append(u)
            self.tier_units[t] = {k: tuple(v) for k, v in sorted(acc.items())}
        self.host_order = tuple(sorted(locality.hosts))
        self.names = {k: d.name for k, d in locality.domains.items()}
        self.total_gpus = {h: s.gpus for h, s in locality.hosts.items()}
        #: host → fabric id of the hosts in units (what per-fabric counts count)
        self.host_fabric = {h: self.unit_fabric[u] for u, hs in self.unit_hosts.items() for h in hs}
        #: (gpus_per_host, fabric id) → slot capacity per unit with every host free (:meth:`_Engine._total_capacity`)
        self.totals: dict[tuple[int | None, int | None], dict[str, int]] = {}

    def name(self, key: str) -> str:
        return self.names.get(key) or key


_CACHE: dict[int, LocalityIndex] = {}


def locality_index(locality: Locality) -> LocalityIndex:
    """The index of ``locality``, cached by identity (a Locality is treated as immutable once
    built: ``build_locality`` makes a new one for every topology change)."""
    idx = _CACHE.get(id(locality))
    if idx is None or idx.locality is not locality:
        if len(_CACHE) >= 8:
            _CACHE.clear()
        idx = _CACHE[id(locality)] = LocalityIndex(locality)
    return idx


# --------------------------------------------------------------------------------------------
# Small selection routines


def cover_count(caps_desc: Sequence[int], need: int) -> int:
    """Fewest items of ``caps_desc`` (sorted descending) whose sum reaches ``need``; INF if none."""
    total = 0
    for i, c in enumerate(caps_desc):
        total += c
        if total >= need:
            return i + 1
    return INF


def tighten(chosen: list[tuple[int, str]], rest: list[tuple[int, str]], slack: int) -> int:
    """Best-fit local search: swap a chosen item for a smaller unchosen one while the sum stays
    covered (``slack`` = sum − need ≥ 0), biggest saving first; lists of ``(cap, key)``, ``rest``
    sorted ascending. Mutates both lists; returns the final slack."""
    while slack > 0 and rest:
        best = None
        for i, (c, _key) in enumerate(chosen):
            j = bisect_left(rest, (c - slack, ""))
            if j < len(rest) and rest[j][0] < c:
                gain = c - rest[j][0]
                if best is None or gain > best[0]:
                    best = (gain, i, j)
        if best is None:
            break
        gain, i, j = best
        out, into = chosen[i], rest.pop(j)
        chosen[i] = into
        insort(rest, out)
        slack -= gain
    return slack


def pick_units(
    items: Sequence[tuple[int, bool, str]], need: int, k: int
) -> tuple[int, list[tuple[int, str]], int]:
    """Choose exactly ``k`` (the minimal cover count) of ``items`` ``(cap, flagged, key)`` covering
    ``need``: fewest flagged first, then best fit. Returns ``(flagged used, [(cap, key)], slack)``."""
    clean = sorted(((c, key) for c, f, key in items if not f), reverse=True)
    hot = sorted(((c, key) for c, f, key in items if f), reverse=True)
    pc = list(itertools.accumulate((c for c, _ in clean), initial=0))
    ph = list(itertools.accumulate((c for c, _ in hot), initial=0))
    for x in range(min(k, len(hot)) + 1):
        if k - x <= len(clean) and pc[k - x] + ph[x] >= need:
            break
    else:  # unreachable when k is the cover count of items
        raise AssertionError("k does not cover need")
    chosen_c, rest_c = clean[: k - x], sorted(clean[k - x :])
    chosen_h, rest_h = hot[:x], sorted(hot[x:])
    slack = pc[k - x] + ph[x] - need
    slack = tighten(chosen_c, rest_c, slack)
    slack = tighten(chosen_h, rest_h, slack)
    return x, chosen_c + chosen_h, slack


def rank_group(gk: str, units: list[str], ucap: dict[str, int], flags: dict[str, bool], m: int):
    """The gang greedy's rank of its next segment of ``m`` host slots in group ``gk`` (its
    ``units`` with free slots ``ucap`` and congestion ``flags``): ``((units needed, flagged used,
    slack, group capacity, gk), chosen [(cap, unit)], slack)``; None when the group has no room
    for one. Ranks are unique (they end with the group key)."""
    gcap = sum(ucap[u] for u in units)
    if gcap < m:
        return None
    items = [(ucap[u], flags[u], u) for u in units if ucap[u]]
    k = cover_count(sorted((c for c, _, _ in items), reverse=True), m)
    x, chosen, slack = pick_units(items, m, k)
    return (k, x, slack, gcap, gk), chosen, slack
