"""The placement engine: where a job's GPUs go (pure Python, no Django).

Input: a :class:`~scheduler.locality.Locality` (``scheduler.topology.build_locality``), the free
state (:class:`FreeState`: whole GPUs per host, MIG slices per profile, shared-GPU headroom, and
the hosts the caller cannot use — links down), a :class:`Request` and optional congestion marks
(:class:`Congestion`: a score and a reason per domain key from recent sweeps, and a threshold).
Output: a :class:`Decision` — placed (host → GPUs) or pending, with a machine code and the
reasons a person reads.

The objective, lexicographic (issue 12, "Placement engine"):

1. the highest tier the job spans (0 one host, 1 one unit, 2 one block, 3 one spine group, 4 one
   fabric), never above a *required* tier; with none the job is placed as compact as possible;
2. the number of units (tier-1 domains: leaves or collapsed rail pods) — always exactly the
   **lower bound** ``k`` of the chosen tier: the fewest units of one tier-T domain whose free
   capacity covers the request, minimised over the tier-T domains that can hold it (no placement
   inside one tier-T domain can use fewer units, because the top-``k`` units of a domain are the
   largest ``k`` it has). Gang segments are placed one by one, each with the fewest units inside
   its own domain, so a gang may use more units than the bound (the decision says how many);
3. congestion: units marked congested (score above the threshold), and units under a marked
   block or spine group whose uplinks the job would cross, are used only when no placement equal in
   1-2 avoids them (``Congestion.avoid`` makes them unusable instead); on a fabric whose routes
   are read (``Congestion.paths``) hosts are scored instead by the hot ports on the routes toward
   them (path-aware: a spine port carrying a candidate's routes counts, an idle parallel one does
   not; see :func:`place`);
4. the fewest hosts (the tier below units: a one-unit job goes where it needs the fewest hosts;
   a multi-unit job takes every free GPU of its units but one, and that partly used unit is the
   one where the rest needs the fewest hosts), then best fit: the smallest host that holds a
   one-host job (in the fullest unit), and among the ``k``-unit choices the one whose free
   capacity exceeds the request least (the leftover stays together in one unit; larger free units
   stay whole). Best fit among units is a local search (swap a chosen unit for a smaller one
   while the request stays covered), not an exact subset sum: steps 1-3 are exact, step 4 is a
   heuristic.

Pruning: a domain whose free capacity is below the request is never tried (per tier the domain
capacities are sums of unit capacities, computed once per call).

A job that does not place is pending with one code (:data:`PENDING_CODES`): ``capacity`` (no
eligible fabric has enough free GPUs, or the request exceeds every fabric), ``constraint`` (the
required tier can never hold it: every domain of that tier is smaller than the request),
``congestion`` (it would place if congested units were not avoided), or ``fragmentation`` (enough
free GPUs, but not in the shape asked for: no domain of the allowed tiers has enough, too few
hosts with ``gpus_per_host`` free, or segments that do not fit — defragmentation or waiting for
releases would place it). Fragmentation is not quota: quota is the pools' business and is checked
before the engine is asked.

Requests come in three kinds: whole GPUs (optionally whole hosts: ``gpus_per_host`` each, and
optionally gang *segments* of hosts each inside one domain of a tier), MIG slices of one profile,
or one shared-GPU fraction. Internally everything is counted in *slots*: a GPU, a host with
``gpus_per_host`` free GPUs, a MIG slice, or a GPU with room for the fraction.

Also here: :func:`first_fit` (the naive baseline of ``bench/placement.py``) and
:func:`select_victims` (which preemptible jobs to preempt so that a request places).
"""

from __future__ import annotations

import itertools
from bisect import bisect_left, insort
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from heapq import heapify, heappop, heappush
from typing import Any

from .locality import TIER_NAMES, TIERS, TOP_TIER, UNIT_TIER, Locality, UnknownTier, tier_number

__all__ = [
    "PENDING_CAPACITY",
    "PENDING_CODES",
    "PENDING_CONGESTION",
    "PENDING_CONSTRAINT",
    "PENDING_FRAGMENTATION",
    "PLACED",
    "Congestion",
    "Decision",
    "Fraction",
    "FreeState",
    "HotPort",
    "Mark",
    "PathCosts",
    "Preemption",
    "Request",
    "RequestError",
    "RunningJob",
    "Segments",
    "UnknownTier",
    "first_fit",
    "place",
    "select_victims",
]

PLACED = "placed"
PENDING_CAPACITY = "capacity"
PENDING_CONSTRAINT = "constraint"
PENDING_CONGESTION = "congestion"
PENDING_FRAGMENTATION = "fragmentation"
#: The codes of a pending decision (the queue adds ``quota`` before the engine is asked).
PENDING_CODES = (PENDING_CAPACITY, PENDING_CONSTRAINT, PENDING_CONGESTION, PENDING_FRAGMENTATION)

_INF = 1 << 30
_LIST_MAX = 5  # names listed in a reason before "and N more"


class RequestError(ValueError):
    """A request the engine cannot interpret (bad counts, kinds mixed, segments that do not add
    up); the API turns it into a 400 at submit. :class:`UnknownTier` is raised as itself."""


# --------------------------------------------------------------------------------------------
# Input shapes


@dataclass(frozen=True, slots=True)
class Segments:
    """Gang segments: ``count`` segments of ``hosts`` hosts each, every segment inside one domain
    of ``tier`` (number or name; normalised to a number, :class:`UnknownTier` otherwise)."""

    count: int
    hosts: int
    tier: int | str

    def __post_init__(self) -> None:
        object.__setattr__(self, "tier", tier_number(self.tier))
        if self.count < 1 or self.hosts < 1:
            raise RequestError(f"segments need count ≥ 1 and hosts ≥ 1 (got {self.count} × {self.hosts})")
        if self.tier == 0 and self.hosts > 1:
            raise RequestError(f"a segment of {self.hosts} hosts cannot be inside one host (tier 0)")


@dataclass(frozen=True, slots=True)
class Fraction:
    """One shared-GPU fraction: GPU memory in MiB and SM share in percent (1-100)."""

    memory_mib: int
    compute_pct: int


@dataclass(frozen=True, slots=True)
class Request:
    """What a job asks for.

    - whole GPUs: ``count`` GPUs; with ``gpus_per_host`` the job takes whole hosts, exactly that
      many GPUs on each of ``count / gpus_per_host`` hosts (``count`` must be a multiple), and
      then optionally ``segments`` (``segments.count × segments.hosts × gpus_per_host == count``);
    - MIG: ``count`` slices of ``mig_profile`` (e.g. ``"1g.10gb"``);
    - a shared fraction: ``fraction`` (``count`` must be 1).

    ``tier`` is the *required* topology constraint (number 0-4 or name, normalised by
    :func:`~scheduler.locality.tier_number`; an unknown name raises :class:`UnknownTier`, never
    ignored); ``None`` means "as compact as possible". ``fabric_id`` restricts the job to one
    fabric. Raises :class:`RequestError` for inconsistent fields.
    """

    count: int
    gpus_per_host: int | None = None
    mig_profile: str = ""
    fraction: Fraction | None = None
    segments: Segments | None = None
    tier: int | str | None = None
    fabric_id: int | None = None

    def __post_init__(self) -> None:
        if self.tier is not None:
            object.__setattr__(self, "tier", tier_number(self.tier))
        if not isinstance(self.count, int) or isinstance(self.count, bool) or self.count < 1:
            raise RequestError(f"count must be a positive integer (got {self.count!r})")
        if self.mig_profile and self.fraction is not None:
            raise RequestError("a request is MIG slices or a shared fraction, not both")
        special = bool(self.mig_profile) or self.fraction is not None
        if special and (self.gpus_per_host is not None or self.segments is not None):
            raise RequestError("gpus_per_host and segments apply to whole-GPU requests only")
        if self.fraction is not None:
            if self.count != 1:
                raise RequestError("a shared fraction is one GPU share: count must be 1")
            if self.fraction.memory_mib < 0 or not 0 <= self.fraction.compute_pct <= 100:
                raise RequestError("a fraction needs memory_mib ≥ 0 and compute_pct in 0-100")
        p = self.gpus_per_host
        if p is not None:
            if p < 1:
                raise RequestError(f"gpus_per_host must be ≥ 1 (got {p})")
            if self.count % p:
                raise RequestError(f"count {self.count} is not a multiple of gpus_per_host {p}")
        if self.segments is not None:
            if p is None:
                raise RequestError("segments are counted in hosts: set gpus_per_host")
            if self.segments.count * self.segments.hosts * p != self.count:
                raise RequestError(
                    f"{self.segments.count} segments × {self.segments.hosts} hosts × {p} GPUs "
                    f"≠ count {self.count}"
                )

    @property
    def kind(self) -> str:
        """``"gpu"``, ``"mig"`` or ``"fraction"``."""
        return "mig" if self.mig_profile else "fraction" if self.fraction is not None else "gpu"

    @property
    def slots(self) -> int:
        """Slots needed: GPUs, hosts (with ``gpus_per_host``), slices, or 1 for a fraction."""
        return self.count // self.gpus_per_host if self.gpus_per_host else self.count

    @property
    def unit_word(self) -> str:
        return {"gpu": "GPUs", "mig": f"{self.mig_profile} slices", "fraction": "GPU shares"}[self.kind]

    def count_words(self, n: int) -> str:
        """``n`` units in words, singular for one: "1 GPU", "16 GPUs", "1 3g.40gb slice"."""
        return f"{n} {self.unit_word[:-1] if n == 1 else self.unit_word}"


@dataclass(slots=True)
class FreeState:
    """What is free now, per host name.

    ``gpus``: free whole GPUs; ``mig``: free MIG slices by profile; ``shared``: per GPU open to
    sharing, its free ``(memory MiB, compute %)``; ``unusable``: hosts the caller excludes (links
    down, drained) — a mapping host → reason, or a plain collection of names.
    """

    gpus: Mapping[str, int] = field(default_factory=dict)
    mig: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    shared: Mapping[str, Sequence[tuple[int, int]]] = field(default_factory=dict)
    unusable: Mapping[str, str] | Collection[str] = field(default_factory=dict)

    def reason_unusable(self, host: str) -> str:
        u = self.unusable
        return (u.get(host) or "unusable") if isinstance(u, Mapping) else "unusable"


@dataclass(frozen=True, slots=True)
class Mark:
    """A congestion mark on a domain from recent sweeps: ``score`` (the worst congestion index
    or error rate of its uplinks, in the unit of the threshold) and a ``reason`` people read."""

    score: float
    reason: str = ""


@dataclass(frozen=True, slots=True)
class HotPort:
    """A directed port (a link's egress) measured hot in telemetry's latest sweep: ``key``
    ``"<node GUID>/<port>"`` (``fabric.keys.port_key``), ``name`` as people read it
    (``"spine-01 [3]"``), ``utilisation`` and ``congestion`` 0..1 (``telemetry.PortCounters``:
    data rate over the link rate; the PortXmitWait congestion index) or None when not measured."""

    key: str
    name: str
    utilisation: float | None = None
    congestion: float | None = None

    def text(self) -> str:
        """``spine-01 [3] (utilisation 12%, congestion 87%)``."""
        parts = [
            f"{label} {round(v * 100):d}%"
            for label, v in (("utilisation", self.utilisation), ("congestion", self.congestion))
            if v is not None
        ]
        return f"{self.name} ({', '.join(parts)})" if parts else self.name

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "name": self.name, "utilisation": self.utilisation,
                "congestion": self.congestion}  # fmt: skip


@dataclass(frozen=True, slots=True)
class PathCosts:
    """Path-aware congestion (issue 24 §2): the hot ports on each host's routes.

    ``routed``: the fabric ids whose routes (the SM's LFTs) are read — on those, placement scores
    hosts by the hot ports their routes would cross and ignores the leaf/spine-block marks of
    :class:`Congestion`; on the others it falls back to the marks and says so. ``hosts``: host →
    ``((tier, HotPort), ...)``: a job spanning tier ``T`` may cross the port on the routes toward
    the host's LIDs when ``tier <= T`` (``scheduler.pathcost``: 1 for the host's own HCA link,
    the tier of the smallest domain holding a source whose route crosses it otherwise). Hosts
    crossing no hot port are not listed."""

    routed: frozenset[int] = frozenset()
    hosts: Mapping[str, Sequence[tuple[int, HotPort]]] = field(default_factory=dict)

    def hot(self, host: str, tier: int) -> list[HotPort]:
        """The hot ports a job spanning ``tier`` may cross because it holds ``host``."""
        return [p for t, p in self.hosts.get(host, ()) if t <= tier]

    def crossed(self, hosts: Iterable[str], tier: int) -> dict[str, HotPort]:
        """Port key → hot port, over ``hosts`` (a placement spanning ``tier``)."""
        out: dict[str, HotPort] = {}
        for h in hosts:
            for p in self.hot(h, tier):
                out.setdefault(p.key, p)
        return out


@dataclass(frozen=True, slots=True)
class Congestion:
    """Congestion marks by domain key and the threshold above which a domain counts as congested.

    A marked unit is penalised (or, with ``avoid``, not used) by every job; a marked block or spine
    group only by jobs that span above it (they cross its uplinks). Marks on a fabric, or on keys
    the locality does not know, have no effect. With ``paths`` (:class:`PathCosts`), units of a
    fabric whose routes are read are scored by the hot ports of their hosts' routes instead of
    the marks (:func:`place`, step 3).
    """

    marks: Mapping[str, Mark] = field(default_factory=dict)
    threshold: float = 0.5
    avoid: bool = False
    paths: PathCosts | None = None

    def hot(self, key: str) -> Mark | None:
        mark = self.marks.get(key)
        return mark if mark is not None and mark.score > self.threshold else None


@dataclass(slots=True)
class Decision:
    """The engine's answer.

    ``code``: :data:`PLACED` or one of :data:`PENDING_CODES`. When placed: ``placed`` host →
    GPUs (slices for MIG, 1 for a fraction), ``tier`` spanned, ``units`` spanned, ``lower_bound``
    (the fewest units any placement at that tier could use), ``domain`` (the key of the tier-
    ``tier`` domain holding it; a host name at tier 0), ``segments`` (host lists, gangs only).
    ``congested``: marked domains the placement uses; ``avoided``: marked domains that an equal
    placement ignoring congestion would have used. ``hot_ports``/``avoided_ports``: with path-aware
    scoring, the hot ports (:class:`HotPort`) the chosen hosts' routes may cross, and those the
    routes of the equal placement that ignores them would have crossed and the chosen one does
    not; ``scoring``: ``"paths"``, ``"leaf"`` (routes not read: the marks), or ``""`` (no path
    data given). ``reasons``: what a person reads, first the outcome.
    """

    code: str
    placed: dict[str, int] = field(default_factory=dict)
    tier: int | None = None
    units: int = 0
    lower_bound: int | None = None
    domain: str | None = None
    segments: list[list[str]] = field(default_factory=list)
    congested: list[str] = field(default_factory=list)
    avoided: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    hot_ports: list[HotPort] = field(default_factory=list)
    avoided_ports: list[HotPort] = field(default_factory=list)
    scoring: str = ""

    @property
    def ok(self) -> bool:
        return self.code == PLACED

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (the API and the job's decision log)."""
        return {
            "code": self.code,
            "placed": dict(self.placed),
            "tier": self.tier,
            "tier_name": TIER_NAMES[self.tier] if self.tier is not None else None,
            "units": self.units,
            "lower_bound": self.lower_bound,
            "domain": self.domain,
            "segments": [list(s) for s in self.segments],
            "congested": list(self.congested),
            "avoided": list(self.avoided),
            "reasons": list(self.reasons),
            "hot_ports": [p.as_dict() for p in self.hot_ports],
            "avoided_ports": [p.as_dict() for p in self.avoided_ports],
            "scoring": self.scoring,
        }


# --------------------------------------------------------------------------------------------
# The index of a locality (built once per Locality object)


class _Index:
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


_CACHE: dict[int, _Index] = {}


def _index(locality: Locality) -> _Index:
    """The index of ``locality``, cached by identity (a Locality is treated as immutable once
    built: ``build_locality`` makes a new one for every topology change)."""
    idx = _CACHE.get(id(locality))
    if idx is None or idx.locality is not locality:
        if len(_CACHE) >= 8:
            _CACHE.clear()
        idx = _CACHE[id(locality)] = _Index(locality)
    return idx


# --------------------------------------------------------------------------------------------
# Small selection routines


def _cover_count(caps_desc: Sequence[int], need: int) -> int:
    """Fewest items of ``caps_desc`` (sorted descending) whose sum reaches ``need``; _INF if none."""
    total = 0
    for i, c in enumerate(caps_desc):
        total += c
        if total >= need:
            return i + 1
    return _INF


def _tighten(chosen: list[tuple[int, str]], rest: list[tuple[int, str]], slack: int) -> int:
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


def _pick(
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
    slack = _tighten(chosen_c, rest_c, slack)
    slack = _tighten(chosen_h, rest_h, slack)
    return x, chosen_c + chosen_h, slack


def _rank_group(gk: str, units: list[str], ucap: dict[str, int], flags: dict[str, bool], m: int):
    """The gang greedy's rank of its next segment of ``m`` host slots in group ``gk`` (its
    ``units`` with free slots ``ucap`` and congestion ``flags``): ``((units needed, flagged used,
    slack, group capacity, gk), chosen [(cap, unit)], slack)``; None when the group has no room
    for one. Ranks are unique (they end with the group key)."""
    gcap = sum(ucap[u] for u in units)
    if gcap < m:
        return None
    items = [(ucap[u], flags[u], u) for u in units if ucap[u]]
    k = _cover_count(sorted((c for c, _, _ in items), reverse=True), m)
    x, chosen, slack = _pick(items, m, k)
    return (k, x, slack, gcap, gk), chosen, slack


# --------------------------------------------------------------------------------------------
# The engine


def _slot_capacity(req: Request, free: FreeState):
    """host name → free slots of the kind ``req`` asks for (0 when none)."""
    if req.kind == "gpu":
        g = free.gpus.get
        p = req.gpus_per_host
        if p is None:
            return lambda h: g(h, 0)
        return lambda h: 1 if g(h, 0) >= p else 0
    if req.kind == "mig":
        prof = req.mig_profile
        return lambda h: free.mig.get(h, {}).get(prof, 0)
    mem, pct = req.fraction.memory_mib, req.fraction.compute_pct
    return lambda h: sum(1 for m, c in free.shared.get(h, ()) if m >= mem and c >= pct)


class _Engine:
    """One call of :func:`place`: the slot capacity of every eligible host and unit."""

    def __init__(
        self,
        locality: Locality,
        free: FreeState,
        request: Request,
        congestion: Congestion | None,
        exclude: Collection[str] = (),
        last: Collection[str] = (),
    ):
        self.idx = idx = _index(locality)
        self.loc = locality
        self.free = free
        self.req = request
        self.cong = congestion
        self.need = request.slots
        self.weight = request.gpus_per_host or 1
        self.tmax = TOP_TIER if request.tier is None else request.tier
        self.skipped: list[str] = []  # unusable hosts that had free capacity
        #: whole-host requests: hosts taken last inside a unit (path-aware step: routes cross hot ports)
        self.last = last
        # host slot capacities per unit: unit → [(cap, host)], and unit capacities
        self.hcap: dict[str, list[tuple[int, str]]] = {}
        self.ucap: dict[str, int] = {}
        self.max_host = 0
        unusable = free.unusable
        fid = request.fabric_id
        # the hot loop of a decision (every host once, hundreds of decisions a pass): whole GPUs
        # are read straight from the map, a whole host is one slot when it has p free
        gpu = request.kind == "gpu"
        p = request.gpus_per_host
        g = free.gpus.get
        cap_of = None if gpu else _slot_capacity(request, free)
        max_host = 0
        for u, hosts in idx.unit_hosts.items():
            if fid is not None and idx.unit_fabric[u] != fid:
                continue
            if not gpu:
                lst = [(c, h) for h in hosts if (c := cap_of(h)) > 0]
            elif p is None:
                lst = [(c, h) for h in hosts if (c := g(h, 0)) > 0]
            else:
                lst = [(1, h) for h in hosts if g(h, 0) >= p]
            if unusable and lst:
                bad = [ch for ch in lst if ch[1] in unusable]
                if bad:
                    self.skipped.extend(h for _, h in bad)
                    lst = [ch for ch in lst if ch[1] not in unusable]
            if exclude and lst:  # path-aware step: hosts whose routes cross hot ports
                lst = [ch for ch in lst if ch[1] not in exclude]
            if lst:
                if p is not None and gpu:
                    top, self.ucap[u] = 1, len(lst)
                else:
                    top, self.ucap[u] = max(lst)[0], sum([c for c, _ in lst])
                if top > max_host:
                    max_host = top
                self.hcap[u] = lst
        self.max_host = max_host
        # congestion: the lowest spanned tier at which a unit counts as congested (0: always)
        self.flag_from: dict[str, int] = {}
        self.flag_why: dict[str, list[tuple[int, str]]] = {}  # unit → marked (tier, key) on its path
        if congestion is not None and congestion.marks:
            routed = congestion.paths.routed if congestion.paths is not None else ()
            for u in self.ucap:
                if idx.unit_fabric[u] in routed:
                    continue  # scored by its hosts' routes (place(), step 3)
                path = idx.unit_path[u]
                for t in range(UNIT_TIER, TOP_TIER):
                    if congestion.hot(path[t - 1]) is not None:
                        self.flag_from.setdefault(u, 0 if t == UNIT_TIER else t + 1)
                        self.flag_why.setdefault(u, []).append((t, path[t - 1]))

    # -- helpers

    def flagged(self, u: str, tier: int) -> bool:
        return tier >= self.flag_from.get(u, _INF)

    def why(self, u: str, tier: int) -> list[str]:
        """The marked domains that make unit ``u`` congested for a job spanning ``tier``: its own
        mark, and marked blocks/groups below ``tier`` (whose uplinks the job crosses)."""
        return [k for t, k in self.flag_why.get(u, ()) if t == UNIT_TIER or t < tier]

    def caps(self, tier: int) -> dict[str, int]:
        """Unit capacities usable by a job spanning ``tier`` (congested ones dropped when avoiding)."""
        if self.cong is None or not self.cong.avoid or not self.flag_from:
            return self.ucap
        return {u: c for u, c in self.ucap.items() if not self.flagged(u, tier)}

    def hosts_in(self, u: str, need: int) -> tuple[dict[str, int], int]:
        """Fewest hosts of unit ``u`` covering ``need`` slots, best fit; returns (host → slots,
        hosts used). Whole-host requests prefer hosts with the fewest free GPUs (≥ gpus_per_host)."""
        lst = self.hcap[u]
        if self.req.gpus_per_host:
            g = self.free.gpus.get
            last = self.last
            order = sorted(lst, key=lambda ch: (ch[1] in last, g(ch[1], 0), ch[1]))[:need]
            return {h: 1 for _, h in order}, len(order)
        ordered = sorted(lst, key=lambda ch: (-ch[0], ch[1]))
        m = _cover_count([c for c, _ in ordered], need)
        if m == 1:  # best fit: the smallest host that holds it
            c, h = min((c, h) for c, h in lst if c >= need)
            return {h: need}, 1
        chosen = ordered[:m]
        rest = sorted(ordered[m:])
        slack = _tighten(chosen, rest, sum(c for c, _ in chosen) - need)
        chosen.sort()
        out = {h: c for c, h in chosen}
        if slack:
            c, h = chosen[-1]  # the leftover stays together on one host
            out[h] = c - slack
        return out, m

    # -- tiers

    def run(self) -> Decision:
        reasons: list[str] = []
        largest: dict[int, int] = {}
        for tier in range(self.tmax + 1):
            got = self.try_tier(tier, largest)
            if got is not None:
                return self.finish(got, tier, largest, reasons)
        return self.pending(largest)

    def try_tier(self, tier: int, largest: dict[int, int]):
        """A placement spanning at most ``tier`` inside one tier-``tier`` domain, or None."""
        need = self.need
        caps = self.caps(tier)
        if tier == 0:
            best = None
            top = 0
            if self.max_host >= need:
                for u, lst in self.hcap.items():
                    if u not in caps:
                        continue
                    f = self.flagged(u, 0)
                    for c, h in lst:
                        if c > top:
                            top = c
                        if c >= need:
                            key = (f, c, caps[u], h)
                            if best is None or key < best[0]:
                                best = (key, u, h)
            else:
                top = self.max_host
            largest[0] = top
            if best is None:
                return None
            (f, _, _, h), u, _ = best
            plain = self._best_host_ignoring_flags(need, caps) if self.flag_from else None
            return {"placed": {h: need}, "units": [u], "domain": h, "lb": 1, "alt": plain}
        seg = self.req.segments
        gang = seg is not None and UNIT_TIER <= seg.tier < tier
        if tier == UNIT_TIER:
            top = max(caps.values(), default=0)
            largest[1] = top
            if top < need:
                return None
            best = None
            for u, c in caps.items():
                if c >= need:
                    f = self.flagged(u, 1)
                    m = _cover_count(sorted((hc for hc, _ in self.hcap[u]), reverse=True), need)
                    key = (f, m, c, u)
                    if best is None or key < best:
                        best = key
            f, _, _, u = best
            placed, _ = self.hosts_in(u, need)
            alt = None
            if self.flag_from:  # what the choice would have been without congestion
                alt = min(
                    (_cover_count(sorted((hc for hc, _ in self.hcap[u2]), reverse=True), need), c2, u2)
                    for u2, c2 in caps.items()
                    if c2 >= need
                )[2]
            return {"placed": placed, "units": [u], "domain": u, "lb": 1, "alt": [alt] if alt else None}
        # tiers 2-4: domains whose free capacity covers the request
        cands = []
        top = 0
        for key, units in self.idx.tier_units[tier].items():
            s = 0
            for u in units:
                s += caps.get(u, 0)
            if s > top:
                top = s
            if s >= need:
                cands.append((key, units))
        largest[tier] = top
        if not cands:
            return None
        if gang:
            return self.try_gang(tier, cands, caps)
        hot = bool(self.flag_from)
        best = alt_best = None
        for key, units in cands:
            items = [(caps[u], self.flagged(u, tier), u) for u in units if u in caps]
            k = _cover_count(sorted((c for c, _, _ in items), reverse=True), need)
            if best is not None and k > best[0][0]:
                continue
            x, chosen, slack = _pick(items, need, k)
            rank = (k, x, slack, key)
            if best is None or rank < best[0]:
                best = (rank, key, chosen, slack)
            if hot and any(f for _, f, _ in items):  # the choice had congestion been ignored
                _, alt_chosen, alt_slack = _pick([(c, False, u) for c, _, u in items], need, k)
                alt_rank = (k, alt_slack, key)
                if alt_best is None or alt_rank < alt_best[0]:
                    alt_best = (alt_rank, [u for _, u in alt_chosen])
        (k, _, _, _), key, chosen, slack = best
        alt = alt_best[1] if alt_best is not None and alt_best[0][0] == k else None
        placed, partial = self.spread(chosen, slack)
        fit = (
            f"best fit: {slack} of the chosen units' {self._slot_word()} stay free, in {self.idx.name(partial)}"
            if slack
            else f"best fit: the chosen units' {self._slot_word()} are used exactly"
        )
        return {
            "placed": placed,
            "units": [u for _, u in chosen],
            "domain": key,
            "lb": k,
            "alt": alt,
            "fit": fit,
        }

    def _best_host_ignoring_flags(self, need: int, caps: dict[str, int]) -> list[str]:
        best = min(
            (c, caps[u], h, u) for u, lst in self.hcap.items() if u in caps for c, h in lst if c >= need
        )
        return [best[3]]

    def spread(self, chosen: list[tuple[int, str]], slack: int) -> tuple[dict[str, int], str | None]:
        """Take every free slot of the chosen units but one unit's ``slack``; that partial unit is
        the one where the rest needs the fewest hosts. Returns (host → slots, partial unit)."""
        placed: dict[str, int] = {}
        partial = None
        if slack:
            best = None
            for c, u in chosen:
                part, m = self.hosts_in(u, c - slack)
                saved = len(self.hcap[u]) - m
                if best is None or (-saved, u) < best[0]:
                    best = ((-saved, u), u, part)
            _, partial, part = best
            placed.update(part)
        for _, u in chosen:
            if u != partial:
                for c, h in self.hcap[u]:
                    placed[h] = c
        return placed, partial

    def try_gang(self, tier: int, cands, caps: dict[str, int]):
        """Segments of M hosts each inside one tier-``s`` domain (s < ``tier``), greedily: each
        segment goes where it needs the fewest units (then best fit); a segment of M hosts always
        leaves ⌊cap/M⌋ − 1 segments' room in its domain, so the greedy never fails once the
        count ⌊cap(E)/M⌋ summed over the domains E covers the segments. Which group takes the
        next segment is :meth:`_segment_picks`'s; the rest (the domains, the hosts taken, the
        best domain) is shared with :class:`_RescanEngine`."""
        seg = self.req.segments
        best = None
        for key, units in cands:
            groups: dict[str, list[str]] = {}
            for u in units:
                if u in caps:
                    gk = u if seg.tier == UNIT_TIER else self.idx.unit_path[u][seg.tier - 1]
                    groups.setdefault(gk, []).append(u)
            ucap = {u: caps[u] for g in groups.values() for u in g}
            if sum(sum(ucap[u] for u in g) // seg.hosts for g in groups.values()) < seg.count:
                continue
            picks = self._segment_picks(tier, groups, ucap)
            taken: set[str] = set()
            segments: list[list[str]] = []
            used_units: list[str] = []
            flagged_used = 0
            sites = self.loc.hosts
            for _ in range(seg.count):
                x, chosen, slack = next(picks)
                flagged_used += x
                hosts = self._take_hosts(chosen, slack, taken)
                segments.append(sorted(hosts))
                for h in hosts:
                    taken.add(h)
                for _, u in chosen:
                    ucap[u] -= sum(1 for h in hosts if sites[h].unit == u)
                    if u not in used_units:
                        used_units.append(u)
            items = [(caps[u], False, u) for u in units if u in caps]
            lb = _cover_count(sorted((c for c, _, _ in items), reverse=True), self.need)
            rank = (len(used_units), flagged_used, key)
            if best is None or rank < best[0]:
                best = (rank, key, segments, used_units, lb)
        if best is None:
            return None
        _, key, segments, used_units, lb = best
        placed = {h: 1 for s in segments for h in s}
        return {
            "placed": placed,
            "units": used_units,
            "domain": key,
            "lb": lb,
            "alt": None,
            "segments": segments,
        }

    def _segment_picks(self, tier: int, groups: dict[str, list[str]], ucap: dict[str, int]):
        """Yield ``(flagged, chosen units, slack)`` for each next segment, the best-ranked group's
        (:func:`_rank_group`); the caller takes the hosts and lowers ``ucap`` before asking for the
        next. Each group's rank depends only on its own units' free capacity, and a segment takes
        hosts from one group only: the ranks are kept in a heap and only the group a segment was
        taken from is ranked again — the choices of re-ranking every group for every segment
        (:meth:`_RescanEngine._segment_picks`), in O((groups + segments) · log groups) rankings
        instead of groups × segments."""
        m = self.req.segments.hosts
        flags = {u: self.flagged(u, tier) for u in ucap}
        heap = [r for gk, g in groups.items() if (r := _rank_group(gk, g, ucap, flags, m))]
        heapify(heap)
        while True:
            (_, x, _, _, gk), chosen, slack = heappop(heap)
            yield x, chosen, slack
            again = _rank_group(gk, groups[gk], ucap, flags, m)
            if again is not None:
                heappush(heap, again)

    def _take_hosts(self, chosen: list[tuple[int, str]], slack: int, taken: set[str]) -> list[str]:
        """Hosts (slots of 1) from the chosen units, all but ``slack`` of them, skipping taken."""
        g = self.free.gpus.get
        out: list[str] = []
        need = sum(c for c, _ in chosen) - slack
        for _, u in sorted(chosen, reverse=True):
            last = self.last
            free_hosts = sorted((h in last, g(h, 0), h) for c, h in self.hcap[u] if h not in taken)
            for _, _, h in free_hosts:
                if len(out) == need:
                    break
                out.append(h)
        return out

    # -- outcome

    def finish(self, got: dict, tier: int, largest: dict[int, int], reasons: list[str]) -> Decision:
        req, idx = self.req, self.idx
        placed_slots: dict[str, int] = got["placed"]
        w = self.weight
        placed = {h: n * w for h, n in sorted(placed_slots.items())}
        units = sorted(set(got["units"]))
        what = req.count_words(req.count)
        where = f"host {got['domain']}" if tier == 0 else f"{TIER_NAMES[tier]} {idx.name(got['domain'])}"
        if tier == 0:
            reasons.append(f"placed {what} on {where} (tier 0)")
        else:
            reasons.append(
                f"placed {what} on {len(placed)} hosts in "
                f"{len(units)} unit{'s' if len(units) != 1 else ''} of {where} (tier {tier})"
            )
        for t in range(tier):
            if t in largest and not (t == 0 and req.gpus_per_host):
                reasons.append(
                    f"no {TIER_NAMES[t]} has {self.need} {self._slot_word()} (largest: {largest[t]})"
                )
        if tier >= UNIT_TIER:
            lb = got["lb"]
            reasons.append(
                f"lower bound {lb} unit{'s' if lb != 1 else ''}: the fewest units whose "
                f"{self._slot_word()} cover the request in one {TIER_NAMES[tier]}"
                + ("" if len(units) == lb else f"; segments use {len(units)}")
            )
        if got.get("fit"):
            reasons.append(got["fit"])
        if req.tier is not None:
            reasons.append(f"required: within one {TIER_NAMES[req.tier]} (tier {req.tier})")
        congested: list[str] = []
        for u in units:
            congested.extend(k for k in self.why(u, tier) if k not in congested)
        avoided: list[str] = []
        alt = got.get("alt")
        if alt:
            for u in alt:
                if u not in units:
                    avoided.extend(k for k in self.why(u, tier) if k not in avoided and k not in congested)
        if self.cong is not None and self.cong.avoid:
            excluded = sorted({k for u in self.ucap for k in self.why(u, tier)})
            if excluded:
                reasons.append(f"congested, not used: {self._marks(excluded)}")
        if avoided:
            reasons.append(
                f"avoided congested {self._marks(avoided)} (an equal placement without them exists)"
            )
        if congested:
            reasons.append(f"uses congested {self._marks(congested)}: no equal placement avoids them")
        if self.skipped:
            reasons.append(f"skipped {self._hosts_unusable()}")
        return Decision(
            code=PLACED,
            placed=placed,
            tier=tier,
            units=len(units),
            lower_bound=got["lb"],
            domain=got["domain"],
            segments=got.get("segments") or self._split_segments(placed_slots),
            congested=congested,
            avoided=avoided,
            reasons=reasons,
        )

    def _split_segments(self, placed_slots: dict[str, int]) -> list[list[str]]:
        seg = self.req.segments
        if seg is None:
            return []
        hosts = sorted(placed_slots, key=lambda h: (self.loc.hosts[h].path, h))
        return [hosts[i * seg.hosts : (i + 1) * seg.hosts] for i in range(seg.count)]

    def _slot_word(self) -> str:
        if self.req.gpus_per_host:
            return f"hosts with ≥ {self.req.gpus_per_host} free GPUs"
        return f"free {self.req.unit_word}"

    def _marks(self, keys: Iterable[str]) -> str:
        out = []
        for k in keys:
            mark = self.cong.marks[k]
            label = f"{self.idx.name(k)} ({mark.score:g}"
            out.append(label + (f": {mark.reason})" if mark.reason else ")"))
        return ", ".join(out)

    def _hosts_unusable(self) -> str:
        names = self.skipped
        shown = ", ".join(f"{h} ({self.free.reason_unusable(h)})" for h in names[:_LIST_MAX])
        more = f" and {len(names) - _LIST_MAX} more" if len(names) > _LIST_MAX else ""
        return f"{len(names)} unusable host{'s' if len(names) != 1 else ''}: {shown}{more}"

    def pending(self, largest: dict[int, int]) -> Decision:
        req = self.req
        need, tmax = self.need, self.tmax
        word = self._slot_word()
        cap_word = f"hosts with ≥ {req.gpus_per_host} GPUs" if req.gpus_per_host else req.unit_word
        what = req.count_words(req.count)
        reasons: list[str] = []
        # 1. never fits: bigger than any fabric (capacity) or than every domain of the tier (constraint)
        total = self._total_capacity()
        if total is not None:
            fab = self._domain_max(total, TOP_TIER)
            if fab < need:
                reasons.append(
                    f"{what} is more than any eligible fabric has (the largest has {fab} {cap_word})"
                )
                return Decision(code=PENDING_CAPACITY, reasons=reasons)
            if req.tier is not None and tmax < TOP_TIER:
                biggest = self._domain_max(total, tmax)
                if biggest < need:
                    reasons.append(
                        f"{what} can never fit in one {TIER_NAMES[tmax]}: the largest has {biggest} {cap_word}"
                    )
                    return Decision(code=PENDING_CONSTRAINT, reasons=reasons)
            seg = req.segments
            if seg is not None and seg.tier >= UNIT_TIER:
                biggest = self._domain_max(total, seg.tier)
                if biggest < seg.hosts:
                    reasons.append(
                        f"a segment of {seg.hosts} hosts can never fit in one {TIER_NAMES[seg.tier]}: "
                        f"the largest has {biggest} {cap_word}"
                    )
                    return Decision(code=PENDING_CONSTRAINT, reasons=reasons)
        # 2. not enough free now (in request units: GPUs for whole-GPU requests)
        free_units = self._free_by_fabric()
        best_free = max(free_units.values(), default=0)
        if best_free < req.count:
            reasons.append(f"{what} asked, {best_free} free in the best eligible fabric")
            if self.skipped:
                reasons.append(f"not counted: {self._hosts_unusable()}")
            return Decision(code=PENDING_CAPACITY, reasons=reasons)
        # 3. congestion: it places when congested units may be used
        if self.cong is not None and self.cong.avoid and self.flag_from:
            relaxed = _Engine(
                self.loc, self.free, req, Congestion(self.cong.marks, self.cong.threshold, False)
            )
            got = relaxed.run()
            if got.ok:
                keys = sorted({k for u in self.ucap for _, k in self.flag_why.get(u, ())})
                reasons.append(f"{what} fits only on congested units: {self._marks(keys)}")
                return Decision(code=PENDING_CONGESTION, reasons=reasons)
        # 4. fragmentation: enough free, wrong shape
        reasons.append(f"{what} asked and {best_free} free, but not in the shape asked for")
        if req.gpus_per_host:
            hosts_ok = sum(len(lst) for lst in self.hcap.values())
            reasons.append(
                f"{hosts_ok} hosts have ≥ {req.gpus_per_host} free GPUs ({need} needed in one domain)"
            )
        for t in range(tmax + 1):
            if t not in largest or (req.gpus_per_host and t == TIERS["host"]):
                continue  # one host holds at most one host with enough free GPUs: says nothing
            count_word = word.replace("hosts with", "host with", 1) if largest[t] == 1 else word
            reasons.append(f"largest in one {TIER_NAMES[t]}: {largest[t]} {count_word} ({need} needed)")
        if req.segments is not None:
            reasons.append(
                f"segments: {req.segments.count} × {req.segments.hosts} hosts, each inside one "
                f"{TIER_NAMES[req.segments.tier]}"
            )
        if self.skipped:
            reasons.append(f"not counted: {self._hosts_unusable()}")
        return Decision(code=PENDING_FRAGMENTATION, reasons=reasons)

    def _total_capacity(self) -> dict[str, int] | None:
        """Slot capacity per unit if every host were free (None for MIG/fractions: unknown)."""
        if self.req.kind != "gpu":
            return None
        p = self.req.gpus_per_host
        fid = self.req.fabric_id
        out = self.idx.totals.get((p, fid))  # a property of the locality: computed once
        if out is None:
            gpus = self.idx.total_gpus
            out = {}
            for u, hosts in self.idx.unit_hosts.items():
                if fid is not None and self.idx.unit_fabric[u] != fid:
                    continue
                out[u] = sum((1 if gpus[h] >= p else 0) if p else gpus[h] for h in hosts)
            self.idx.totals[(p, fid)] = out
        return out

    def _domain_max(self, per_unit: dict[str, int], tier: int) -> int:
        if tier == 0:
            p = self.req.gpus_per_host
            gpus = self.idx.total_gpus
            hosts = (h for u in per_unit for h in self.idx.unit_hosts[u])
            return max(((1 if gpus[h] >= p else 0) if p else gpus[h] for h in hosts), default=0)
        if tier == UNIT_TIER:
            return max(per_unit.values(), default=0)
        return max(
            (sum(per_unit.get(u, 0) for u in units) for units in self.idx.tier_units[tier].values()),
            default=0,
        )

    def _free_by_fabric(self) -> dict[int, int]:
        """Free GPUs (slices, shares) per eligible fabric on usable hosts, whatever the shape."""
        out: dict[int, int] = {}
        req = self.req
        fid = req.fabric_id
        unusable = self.free.unusable
        if req.kind == "gpu":  # only hosts with free GPUs count: read them from the map
            host_fabric = self.idx.host_fabric
            for u in self.idx.unit_hosts:  # every eligible fabric has its entry, as below
                f = self.idx.unit_fabric[u]
                if fid is None or f == fid:
                    out.setdefault(f, 0)
            for h, n in self.free.gpus.items():
                f = host_fabric.get(h)
                if f is not None and (fid is None or f == fid) and h not in unusable:
                    out[f] += n
            return out
        count = _slot_capacity(req, self.free)
        for u, hosts in self.idx.unit_hosts.items():
            f = self.idx.unit_fabric[u]
            if fid is not None and f != fid:
                continue
            out[f] = out.get(f, 0) + sum(count(h) for h in hosts if h not in unusable)
        return out


def place(
    locality: Locality, free: FreeState, request: Request, congestion: Congestion | None = None
) -> Decision:
    """Place ``request`` on ``locality`` given ``free`` (see the module docstring for the order of
    the objective and the pending codes). Pure: reads its arguments, changes nothing; the same
    inputs give the same decision. ``locality`` must not be changed once placed on (its index is
    cached by identity). Raises :class:`RequestError`/:class:`UnknownTier` only when
    the :class:`Request` is built, never here.

    Path-aware congestion (``congestion.paths``, :class:`PathCosts`): on a fabric whose routes are
    read, step 3 of the objective is scored by the hot ports on the chosen hosts' routes, not by
    the leaf/spine-block marks: when the placement's hosts may cross hot ports, the engine runs
    again without the hosts whose routes cross any at that tier, and takes that placement when it
    spans the same tier and no more units (always, with ``avoid``: then a job that only fits on
    such hosts is pending ``congestion``); failing that, a whole-host request takes those hosts last
    inside the same units. The decision lists the hot ports avoided and those
    still crossed, with their utilisation and congestion in %. On a fabric whose routes are not
    read yet the marks are used, and the reasons say so.
    """
    return _decide(_Engine, locality, free, request, congestion)


def _decide(engine, locality, free, request, congestion) -> Decision:
    """One engine run, then the path-aware step of :func:`place` (``engine``: the class)."""
    d = engine(locality, free, request, congestion).run()
    paths = congestion.paths if congestion is not None else None
    if paths is None or not d.ok:
        return d
    sites = locality.hosts
    if sites[next(iter(d.placed))].fabric_id not in paths.routed:
        d.scoring = "leaf"
        d.reasons.append(
            "congestion scored per leaf and spine block (the uplinks' alarms): this fabric's routes "
            "are not read yet"
        )
        return d
    d.scoring = "paths"
    if d.tier == 0:
        return d  # one host: its GPUs talk over NVLink/PCIe, no fabric link
    crossed = paths.crossed(d.placed, d.tier)
    if not crossed:
        d.reasons.append(f"paths: the routes of its {len(d.placed)} hosts cross no hot port")
        return d
    hot_hosts = {h for h in paths.hosts if paths.hot(h, d.tier)}
    alt = engine(locality, free, request, congestion, exclude=hot_hosts).run()
    if alt.ok and (congestion.avoid or (alt.tier == d.tier and alt.units <= d.units)):
        still = paths.crossed(alt.placed, alt.tier)
        alt.scoring = "paths"
        alt.hot_ports = sorted(still.values(), key=lambda p: p.key)
        alt.avoided_ports = sorted((p for k, p in crossed.items() if k not in still), key=lambda p: p.key)
        if alt.avoided_ports:
            alt.reasons.append(
                f"paths: avoided hot ports {_port_list(alt.avoided_ports)} that the routes of an "
                "equal placement would cross"
            )
        alt.reasons.append(
            f"paths: the routes of its {len(alt.placed)} hosts cross no hot port"
            if not still
            else f"paths: its routes may cross hot ports {_port_list(alt.hot_ports)}"
        )
        return alt
    if congestion.avoid:
        return Decision(
            code=PENDING_CONGESTION,
            scoring="paths",
            hot_ports=sorted(crossed.values(), key=lambda p: p.key),
            reasons=[
                f"{request.count_words(request.count)} fits only on hosts whose routes cross hot "
                f"ports: {_port_list(crossed.values())}"
            ],
        )
    avoided: list[HotPort] = []
    if request.gpus_per_host:  # the same units, their hosts off hot routes first
        fewer = engine(locality, free, request, congestion, last=hot_hosts).run()
        if fewer.ok and (fewer.tier, fewer.units) == (d.tier, d.units):
            less = paths.crossed(fewer.placed, fewer.tier)
            if len(less) < len(crossed):
                avoided = sorted((p for k, p in crossed.items() if k not in less), key=lambda p: p.key)
                d, crossed = fewer, less
                d.scoring = "paths"
    d.hot_ports = sorted(crossed.values(), key=lambda p: p.key)
    d.avoided_ports = avoided
    if avoided:
        d.reasons.append(
            f"paths: avoided hot ports {_port_list(avoided)} by taking, in the same units, hosts whose "
            "routes do not cross them"
        )
    d.reasons.append(
        f"paths: its routes may cross hot ports {_port_list(d.hot_ports)}: no placement equal in "
        "tier and units avoids them"
    )
    return d


def _port_list(ports: Iterable[HotPort]) -> str:
    ports = sorted(ports, key=lambda p: -max(p.utilisation or 0, p.congestion or 0))
    shown = ", ".join(p.text() for p in ports[:_LIST_MAX])
    return shown + (f" and {len(ports) - _LIST_MAX} more" if len(ports) > _LIST_MAX else "")


class _RescanEngine(_Engine):
    """The engine with the gang greedy as it was before issue 24 (every group ranked again for
    every segment: groups × segments rankings): the reference the property test compares
    :meth:`_Engine._segment_picks` with (through the shared :meth:`_Engine.try_gang`), and the
    baseline ``bench/placement.py`` times. Same answers, slower."""

    def _segment_picks(self, tier: int, groups: dict[str, list[str]], ucap: dict[str, int]):
        """Every group ranked again for every segment (groups × segments rankings)."""
        m = self.req.segments.hosts
        while True:
            pick = None
            for gk, g in groups.items():
                gcap = sum(ucap[u] for u in g)
                if gcap < m:
                    continue
                items = [(ucap[u], self.flagged(u, tier), u) for u in g if ucap[u]]
                k = _cover_count(sorted((c for c, _, _ in items), reverse=True), m)
                x, chosen, slack = _pick(items, m, k)
                rank = (k, x, slack, gcap, gk)
                if pick is None or rank < pick[0]:
                    pick = (rank, chosen, slack)
            (_, x, _, _, _), chosen, slack = pick
            yield x, chosen, slack


def place_rescanning(
    locality: Locality, free: FreeState, request: Request, congestion: Congestion | None = None
) -> Decision:
    """:func:`place` with the gang greedy of before issue 24 (:class:`_RescanEngine`): the same
    decision, slower for large gangs. For the equivalence test and ``bench/placement.py``'s
    baseline only."""
    return _decide(_RescanEngine, locality, free, request, congestion)


def first_fit(locality: Locality, free: FreeState, request: Request) -> Decision:
    """The naive baseline: hosts in name order, take what each has until the request is met.

    Knows nothing of tiers, congestion or segments (whole hosts and unusable hosts are honoured);
    ``tier``/``units`` are what the result happens to span; ``lower_bound`` is None. Code
    :data:`PLACED` or :data:`PENDING_CAPACITY`.
    """
    idx = _index(locality)
    cap_of = _slot_capacity(request, free)
    fid = request.fabric_id
    unusable = free.unusable
    need = request.slots
    w = request.gpus_per_host or 1
    sites = locality.hosts
    placed: dict[str, int] = {}
    for h in idx.host_order:
        if h in unusable or (fid is not None and sites[h].fabric_id != fid):
            continue
        c = cap_of(h)
        if c > 0:
            take = min(c, need)
            placed[h] = take * w
            need -= take
            if not need:
                break
    if need:
        return Decision(code=PENDING_CAPACITY, reasons=[f"first fit: {need} slots short"])
    fabrics = {sites[h].fabric_id for h in placed}
    if len(fabrics) > 1:  # first fit may cross fabrics; that is not a placement
        return Decision(code=PENDING_CAPACITY, reasons=["first fit: no single fabric holds it"], placed={})
    tier, units = locality.span(placed)
    return Decision(
        code=PLACED, placed=placed, tier=tier, units=units, reasons=["first fit in host-name order"]
    )


# --------------------------------------------------------------------------------------------
# Preemption


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A running job as the preemption search sees it: ``placed`` host → whole GPUs it holds."""

    job_id: Any
    priority: int
    placed: Mapping[str, int]
    preemptible: bool = True


@dataclass(slots=True)
class Preemption:
    """Victims (job ids, fewest first, then the lowest highest priority) and the decision the
    request gets once they release; ``truncated`` when the search stopped at its budget."""

    victims: tuple[Any, ...]
    decision: Decision
    truncated: bool = False


def select_victims(
    locality: Locality,
    free: FreeState,
    request: Request,
    running: Iterable[RunningJob],
    *,
    priority: int,
    congestion: Congestion | None = None,
    max_victims: int = 8,
    max_checks: int = 2000,
) -> Preemption | None:
    """Pick the jobs to preempt so that ``request`` (priority ``priority``) places under its
    constraint: the fewest victims, then the lowest highest victim priority, then the most
    compact tier the request gets, then the fewest GPUs released. Only preemptible jobs of lower
    priority are candidates.

    Returns ``Preemption((), decision)`` when the request places without preemption, ``None``
    when no set of at most ``max_victims`` candidates makes room. When the search of a non-plain
    request stops at its budget, ``truncated`` is set: the victims are the first set found, or
    none with the pending decision when none was found in the budget. Whole-GPU requests only
    (:class:`RequestError` otherwise).

    The fewest victims and the lowest highest priority are exact (within the budget); the last two
    keys break ties among the candidate sets found per domain. Plain GPU-count requests (no
    ``gpus_per_host``, no segments, congestion not avoided) are solved by counting: the request
    fits in a domain D iff D's free plus released GPUs cover it, so per D the fewest victims are
    the ones holding the most GPUs in D. Other requests are searched by increasing victim count,
    then increasing priority bound, one tier-``tier`` domain at a time (a victim set holding the
    request always fits in one such domain, so its members all touch it): see ``_VictimSearch``.
    """
    if request.kind != "gpu":
        raise RequestError("preemption selects victims for whole-GPU requests only")
    decision = place(locality, free, request, congestion)
    if decision.ok:
        return Preemption((), decision)
    cands = [j for j in running if j.preemptible and j.priority < priority]
    if not cands:
        return None
    idx = _index(locality)
    fid = request.fabric_id
    unusable = free.unusable
    sites = locality.hosts
    tmax = TOP_TIER if request.tier is None else request.tier

    def domains_of(h: str) -> list[tuple[int, str]]:
        s = sites[h]
        return [(0, h)] + [(t, s.path[t - 1]) for t in range(UNIT_TIER, tmax + 1)]

    def usable(h: str) -> bool:
        return h in sites and h not in unusable and (fid is None or sites[h].fabric_id == fid)

    # GPUs each candidate holds per domain (usable hosts of eligible fabrics only), by domain
    by_domain: dict[tuple[int, str], dict[int, int]] = {}
    for i, j in enumerate(cands):
        for h, n in j.placed.items():
            if n > 0 and usable(h):
                for dk in domains_of(h):
                    m = by_domain.setdefault(dk, {})
                    m[i] = m.get(i, 0) + n
    # free GPUs (and hosts with ≥ gpus_per_host free) per domain: hosts, then units, then up
    p = request.gpus_per_host
    g = free.gpus.get
    freed: dict[tuple[int, str], int] = {}
    ok_hosts: dict[tuple[int, str], int] = {}
    for u, hosts in idx.unit_hosts.items():
        if fid is not None and idx.unit_fabric[u] != fid:
            continue
        fu = ou = 0
        for h in hosts:
            n = g(h, 0)
            if n > 0 and h not in unusable:
                freed[(0, h)] = n
                fu += n
                if p and n >= p:
                    ok_hosts[(0, h)] = 1
                    ou += 1
        for t in range(UNIT_TIER, tmax + 1):
            dk = (t, idx.unit_path[u][t - 1])
            freed[dk] = freed.get(dk, 0) + fu
            ok_hosts[dk] = ok_hosts.get(dk, 0) + ou

    def in_domain(h: str, dk: tuple[int, str]) -> bool:
        return h == dk[1] if dk[0] == 0 else sites[h].path[dk[0] - 1] == dk[1]

    def released_free(victims: Sequence[int]) -> FreeState:
        gp = dict(free.gpus)
        for i in victims:
            for h, n in cands[i].placed.items():
                gp[h] = gp.get(h, 0) + n
        return FreeState(gpus=gp, mig=free.mig, shared=free.shared, unusable=free.unusable)

    def total_released(victims: Sequence[int]) -> int:
        return sum(sum(cands[i].placed.values()) for i in victims)

    avoid = congestion is not None and congestion.avoid
    if request.gpus_per_host is None and request.segments is None and not avoid:
        return _victims_by_count(locality, free, request, congestion, cands, by_domain, freed, max_victims,
                                 released_free, total_released)  # fmt: skip

    # general requests: increasing k; per k, the lowest priority bound π first; per tier-tmax
    # domain, a pruned depth-first search (see _VictimSearch)
    search = _VictimSearch(locality, free, request, congestion, cands, max_checks, usable, released_free)
    top = sorted(dk for dk in by_domain if dk[0] == tmax)
    prios = sorted({cands[i].priority for dk in top for i in by_domain[dk]})
    for k in range(1, min(max_victims, len(cands)) + 1):
        for pi in prios:
            found = []
            for dk in top:
                members = [i for i in by_domain[dk] if cands[i].priority <= pi]
                hit = search.first(dk, members, by_domain[dk], k, freed.get(dk, 0), ok_hosts.get(dk, 0))
                if hit is not None:
                    combo, after = hit
                    found.append(((after.tier, total_released(combo), dk[1]), combo, after))
                if search.truncated:
                    break
            if found:
                # (k, π) is settled; a set inside a smaller domain places the request more compactly
                for t in range(tmax):
                    for dk in sorted(d for d in by_domain if d[0] == t):
                        members = [i for i in by_domain[dk] if cands[i].priority <= pi]
                        hit = search.first(
                            dk, members, by_domain[dk], k, freed.get(dk, 0), ok_hosts.get(dk, 0)
                        )
                        if hit is not None:
                            combo, after = hit
                            found.append(((after.tier, total_released(combo), dk[1]), combo, after))
                    if any(f[0][0] <= t for f in found) or search.truncated:
                        break
                _, combo, after = min(found, key=lambda f: f[0])
                return Preemption(tuple(cands[i].job_id for i in sorted(combo)), after, search.truncated)
            if search.truncated:
                return Preemption((), decision, truncated=True)
    return None


class _VictimSearch:
    """The victim search of :func:`select_victims` for requests that are not a plain GPU count.

    Inside one tier-``tmax`` domain D, combinations of exactly ``k`` candidates, depth first,
    largest (GPUs in D) first, pruned by two necessary conditions: GPUs (D's free plus released
    GPUs cover the request) and, for whole hosts, hosts (hosts of D already holding
    ``gpus_per_host`` free plus the hosts the victims touch that are below it now cover the hosts
    needed). Whole-host requests without segments or congestion avoidance are then decided
    exactly by counting D's hosts that reach ``gpus_per_host``; the others by :func:`place` (at
    most ``max_checks`` calls, and ``50 × max_checks`` search nodes: then ``truncated``).
    """

    def __init__(self, locality, free, request, congestion, cands, max_checks, usable, released_free):
        self.loc, self.free, self.req, self.cong = locality, free, request, congestion
        self.cands = cands
        self.max_checks = max_checks
        self.usable = usable
        self.released_free = released_free
        self.p = request.gpus_per_host
        self.exact_hosts = (
            self.p is not None and request.segments is None and not (congestion and congestion.avoid)
        )
        self.checks = self.nodes = 0
        self.truncated = False

    def first(self, dk, members, held, k, have, have_ok):
        """The first feasible ``k``-combination of ``members`` in domain ``dk`` (held: GPUs per
        candidate in dk; have/have_ok: free GPUs and hosts with gpus_per_host free in dk), as
        ``(combo, decision)``, or None."""
        if len(members) < k:
            return None
        g, p = self.free.gpus.get, self.p
        tier, key = dk
        sites = self.loc.hosts
        hosts_of = {
            i: {
                h: n
                for h, n in self.cands[i].placed.items()
                if n > 0 and self.usable(h) and (h == key if tier == 0 else sites[h].path[tier - 1] == key)
            }
            for i in members
        }
        pot = {i: sum(1 for h in hosts_of[i] if p and g(h, 0) < p) for i in members}
        members = sorted(members, key=lambda i: (-held[i], -pot[i], self.cands[i].priority, i))
        need, slots = self.req.count, self.req.slots
        combo: list[int] = []

        def check() -> Decision | None:
            if self.exact_hosts:
                rel: dict[str, int] = {}
                for i in combo:
                    for h, n in hosts_of[i].items():
                        rel[h] = rel.get(h, 0) + n
                if have_ok + sum(1 for h, n in rel.items() if g(h, 0) < p <= g(h, 0) + n) < slots:
                    return None
            elif self.checks >= self.max_checks:
                self.truncated = True
                return None
            else:
                self.checks += 1
            after = place(self.loc, self.released_free(combo), self.req, self.cong)
            return after if after.ok else None

        def dfs(start: int, gpus: int, hosts_pot: int) -> Decision | None:
            if len(combo) == k:
                if gpus >= need and (p is None or have_ok + hosts_pot >= slots):
                    return check()
                return None
            r = k - len(combo)
            for pos in range(start, len(members) - r + 1):
                self.nodes += 1
                if self.nodes > 50 * self.max_checks:
                    self.truncated = True
                    return None
                # members are sorted by GPUs: the next r bound what this branch can still release
                if gpus + sum(held[members[q]] for q in range(pos, pos + r)) < need:
                    return None
                i = members[pos]
                combo.append(i)
                got = dfs(pos + 1, gpus + held[i], hosts_pot + pot[i])
                if got is not None:
                    return got
                combo.pop()
                if self.truncated:
                    return None
            return None

        after = dfs(0, have, 0)
        return (tuple(combo), after) if after is not None else None


def _victims_by_count(locality, free, request, congestion, cands, by_domain, freed, max_victims,
                      released_free, total_released) -> Preemption | None:  # fmt: skip
    """Plain GPU-count requests: a domain D holds the request iff D's free plus released GPUs
    cover it, so per D the fewest victims are the ones holding the most GPUs in D; then the lowest
    priority bound π with which k victims still cover it; then best fit (fewest GPUs released)."""
    need = request.count
    best = None
    for dk, held in by_domain.items():
        deficit = need - freed.get(dk, 0)
        if deficit <= 0 or sum(held.values()) < deficit:
            continue
        k = _cover_count(sorted(held.values(), reverse=True), deficit)
        if k > max_victims or (best is not None and k > best[0][0]):
            continue
        for pi in sorted({cands[i].priority for i in held}):
            pool = [(n, i) for i, n in held.items() if cands[i].priority <= pi]
            if _cover_count(sorted((n for n, _ in pool), reverse=True), deficit) == k:
                break
        ordered = sorted(pool, key=lambda ni: (-ni[0], cands[ni[1]].priority, ni[1]))
        chosen = [(n, f"{i:09d}") for n, i in ordered[:k]]
        rest = sorted((n, f"{i:09d}") for n, i in ordered[k:])
        _tighten(chosen, rest, sum(n for n, _ in chosen) - deficit)
        victims = sorted(int(i) for _, i in chosen)
        rank = (k, max(cands[i].priority for i in victims), dk[0], total_released(victims), dk[1])
        if best is None or rank < best[0]:
            best = (rank, victims)
    if best is None:
        return None
    victims = best[1]
    after = place(locality, released_free(victims), request, congestion)
    if not after.ok:  # cannot happen while the counting argument holds; refuse rather than guess
        return None
    return Preemption(tuple(cands[i].job_id for i in victims), after)
