"""Placement's input and output shapes (pure): the request, the free state, congestion marks and
hot ports, the decision and its pending codes. See :mod:`scheduler.placement`."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..locality import TIER_NAMES, tier_number

PLACED = "placed"
PENDING_CAPACITY = "capacity"
PENDING_CONSTRAINT = "constraint"
PENDING_CONGESTION = "congestion"
PENDING_FRAGMENTATION = "fragmentation"
#: The codes of a pending decision (the queue adds ``quota`` before the engine is asked).
PENDING_CODES = (PENDING_CAPACITY, PENDING_CONSTRAINT, PENDING_CONGESTION, PENDING_FRAGMENTATION)

INF = 1 << 30
LIST_MAX = 5  # names listed in a reason before "and N more"


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
    or error rate of its uplinks, in the unit of the threshold), a ``reason`` people read and the
    ``code`` of the alarm behind it (``port.congestion``, ``port.symbol_errors``…; "" unknown)."""

    score: float
    reason: str = ""
    code: str = ""


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
