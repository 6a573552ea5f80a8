"""Preemption (pure): :func:`select_victims`, which preemptible running jobs to preempt so that a
request places (see :mod:`scheduler.placement`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..locality import TOP_TIER, UNIT_TIER, Locality
from .engine import place
from .select import cover_count, locality_index, tighten
from .shapes import (
    Congestion,
    Decision,
    FreeState,
    Request,
    RequestError,
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
    idx = locality_index(locality)
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
        k = cover_count(sorted(held.values(), reverse=True), deficit)
        if k > max_victims or (best is not None and k > best[0][0]):
            continue
        for pi in sorted({cands[i].priority for i in held}):
            pool = [(n, i) for i, n in held.items() if cands[i].priority <= pi]
            if cover_count(sorted((n for n, _ in pool), reverse=True), deficit) == k:
                break
        ordered = sorted(pool, key=lambda ni: (-ni[0], cands[ni[1]].priority, ni[1]))
        chosen = [(n, f"{i:09d}") for n, i in ordered[:k]]
        rest = sorted((n, f"{i:09d}") for n, i in ordered[k:])
        tighten(chosen, rest, sum(n for n, _ in chosen) - deficit)
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
