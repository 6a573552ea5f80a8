"""The locality model the scheduler places jobs on (pure Python, no Django).

A :class:`Locality` is one tree per fabric, built from the stored topology by
``scheduler.topology.build_locality`` (the only writer of this shape) and read by the placement
engine (``scheduler.placement``) and the topology exports (``scheduler.exports``):

- tier 0 ``host``: a GPU host (``fabric.Host``), with its whole-GPU capacity;
- tier 1 ``leaf``: a *unit* — the hosts under one leaf switch, or, in a rail-optimised pod (each
  host's HCAs on different rail leaves whose host sets are identical), the hosts under that set of
  rail leaves collapsed into one unit;
- tier 2 ``block``: units joined through spine (tier-2) switches;
- tier 3 ``spine_group``: blocks joined through core (tier-3) switches;
- tier 4 ``fabric``: the whole fabric. Two fabrics are two trees and are never joined: a LID or a
  switch means something only inside its fabric.

A tier that a fabric does not have (a two-level fat tree has no spine groups) is still present as
one domain spanning its children, so every host has a full path of the same length and tier
numbers mean the same thing on every fabric.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

#: Tier numbers by name (a job's topology constraint names one of these, or gives the number).
TIERS: dict[str, int] = {"host": 0, "leaf": 1, "block": 2, "spine_group": 3, "fabric": 4}
TIER_NAMES: tuple[str, ...] = tuple(TIERS)
UNIT_TIER = TIERS["leaf"]
TOP_TIER = TIERS["fabric"]


class UnknownTier(ValueError):
    """A topology constraint names a tier that is not in :data:`TIERS` (refused, never ignored)."""


def tier_number(tier: int | str) -> int:
    """Tier number for ``tier`` given as a number (``0``–``4``) or a name (``"block"``).

    Raises :class:`UnknownTier` for any other value, with the known names in the message.
    """
    if isinstance(tier, bool):
        raise UnknownTier(f"unknown tier {tier!r}; known: {', '.join(TIER_NAMES)}")
    if isinstance(tier, int):
        if 0 <= tier <= TOP_TIER:
            return tier
        raise UnknownTier(f"unknown tier {tier}; tiers are 0–{TOP_TIER} ({', '.join(TIER_NAMES)})")
    key = str(tier).strip().lower().replace("-", "_").replace(" ", "_")
    if key.isdigit():
        return tier_number(int(key))
    if key not in TIERS:
        raise UnknownTier(f"unknown tier {tier!r}; known: {', '.join(TIER_NAMES)}")
    return TIERS[key]


@dataclass(frozen=True, slots=True)
class HostSite:
    """One GPU host in the tree.

    ``name`` is the host name Slurm and Kubernetes know (``fabric.Host.name``); ``host_id`` its
    database pk; ``gpus`` the whole GPUs it has (healthy or not: capacity, not availability);
    ``rails`` the GUIDs of the leaf switches its HCAs are cabled to, in rail order; ``path`` the
    domain keys from its unit (tier 1) up to its fabric (tier 4), ``path[i]`` being tier ``i + 1``.
    """

    name: str
    host_id: int
    fabric_id: int
    gpus: int
    rails: tuple[str, ...]
    path: tuple[str, ...]

    @property
    def unit(self) -> str:
        """Key of the host's unit (tier-1 domain)."""
        return self.path[0]

    def domain(self, tier: int) -> str:
        """Key of the host's domain at ``tier`` (1–4); raises IndexError for tier 0 or > 4."""
        if tier < UNIT_TIER:
            raise IndexError("tier 0 is the host itself")
        return self.path[tier - 1]


@dataclass(frozen=True, slots=True)
class Domain:
    """A locality domain: a unit, block, spine group or fabric.

    ``key`` is stable across rebuilds of the same topology (derived from switch GUIDs, e.g.
    ``"f3/leaf/0x0002c90200402ab8"``); ``name`` is what people read (the switch name, or the
    names of the rail leaves of a collapsed pod); ``parent`` the key one tier up (``None`` for a
    fabric); ``switches`` the GUIDs of the switches that make this domain (a unit's leaf or rail
    leaves, a block's spines, a spine group's cores; empty for a fabric); ``hosts`` the names of
    every host below it, sorted; ``uplinks`` the ids of the ``fabric.Link`` rows from this
    domain's switches up to the next tier (the links the congestion check reads).
    """

    key: str
    tier: int
    name: str
    fabric_id: int
    parent: str | None
    switches: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    children: tuple[str, ...] = ()
    uplinks: tuple[int, ...] = ()

    @property
    def tier_name(self) -> str:
        """``"leaf"``, ``"block"``, ``"spine_group"`` or ``"fabric"``."""
        return TIER_NAMES[self.tier]


@dataclass(slots=True)
class Locality:
    """Every fabric's locality tree: hosts by name, domains by key.

    Host names are unique across the index (a name found on two fabrics is kept on the first and
    reported in ``warnings``). ``warnings`` are human-readable notes from the build (a host with
    no leaf, a storage fabric skipped because of its role).
    """

    hosts: dict[str, HostSite] = field(default_factory=dict)
    domains: dict[str, Domain] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def fabrics(self) -> list[Domain]:
        """The tier-4 domains, in key order."""
        return sorted((d for d in self.domains.values() if d.tier == TOP_TIER), key=lambda d: d.key)

    def at_tier(self, tier: int) -> list[Domain]:
        """Domains of one tier (1–4), in key order."""
        return sorted((d for d in self.domains.values() if d.tier == tier), key=lambda d: d.key)

    def units(self) -> list[Domain]:
        """The tier-1 domains (leaves or collapsed rail pods), in key order."""
        return self.at_tier(UNIT_TIER)

    def capacity(self, key: str, free: Mapping[str, int] | None = None) -> int:
        """GPUs under domain ``key``: total capacity, or the sum of ``free[host]`` when given."""
        hosts = self.domains[key].hosts
        if free is None:
            return sum(self.hosts[h].gpus for h in hosts)
        return sum(free.get(h, 0) for h in hosts)

    def span(self, hosts: Iterable[str]) -> tuple[int, int]:
        """``(highest tier spanned, units spanned)`` by a set of host names.

        One host spans tier 0 and one unit; hosts of one unit span tier 1; and so on up to tier 4
        (one fabric). Raises ValueError for hosts on two fabrics (never a valid placement) and
        KeyError for a name not in the index.
        """
        sites = [self.hosts[h] for h in set(hosts)]
        if not sites:
            return 0, 0
        units = {s.unit for s in sites}
        if len(sites) == 1:
            return 0, 1
        for tier in range(UNIT_TIER, TOP_TIER + 1):
            if len({s.domain(tier) for s in sites}) == 1:
                return tier, len(units)
        raise ValueError("hosts span two fabrics")
