"""The placement engine (pure): :func:`place` and its objective (see :mod:`scheduler.placement`),
:func:`place_rescanning` (the reference it is checked against) and :func:`first_fit` (the naive
baseline of ``bench/placement.py``)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from heapq import heapify, heappop, heappush

from ..locality import TIER_NAMES, TIERS, TOP_TIER, UNIT_TIER, Locality
from .select import cover_count, locality_index, pick_units, rank_group, tighten
from .shapes import (
    INF,
    LIST_MAX,
    PENDING_CAPACITY,
    PENDING_CONGESTION,
    PENDING_CONSTRAINT,
    PENDING_FRAGMENTATION,
    PLACED,
    Congestion,
    Decision,
    FreeState,
    HotPort,
    Request,
)

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
        self.idx = idx = locality_index(locality)
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
        return tier >= self.flag_from.get(u, INF)

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
        m = cover_count([c for c, _ in ordered], need)
        if m == 1:  # best fit: the smallest host that holds it
            c, h = min((c, h) for c, h in lst if c >= need)
            return {h: need}, 1
        chosen = ordered[:m]
        rest = sorted(ordered[m:])
        slack = tighten(chosen, rest, sum(c for c, _ in chosen) - need)
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
                    m = cover_count(sorted((hc for hc, _ in self.hcap[u]), reverse=True), need)
                    key = (f, m, c, u)
                    if best is None or key < best:
                        best = key
            f, _, _, u = best
            placed, _ = self.hosts_in(u, need)
            alt = None
            if self.flag_from:  # what the choice would have been without congestion
                alt = min(
                    (cover_count(sorted((hc for hc, _ in self.hcap[u2]), reverse=True), need), c2, u2)
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
            k = cover_count(sorted((c for c, _, _ in items), reverse=True), need)
            if best is not None and k > best[0][0]:
                continue
            x, chosen, slack = pick_units(items, need, k)
            rank = (k, x, slack, key)
            if best is None or rank < best[0]:
                best = (rank, key, chosen, slack)
            if hot and any(f for _, f, _ in items):  # the choice had congestion been ignored
                _, alt_chosen, alt_slack = pick_units([(c, False, u) for c, _, u in items], need, k)
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
            lb = cover_count(sorted((c for c, _, _ in items), reverse=True), self.need)
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
        (:func:`rank_group`); the caller takes the hosts and lowers ``ucap`` before asking for the
        next. Each group's rank depends only on its own units' free capacity, and a segment takes
        hosts from one group only: the ranks are kept in a heap and only the group a segment was
        taken from is ranked again — the choices of re-ranking every group for every segment
        (:meth:`_RescanEngine._segment_picks`), in O((groups + segments) · log groups) rankings
        instead of groups × segments."""
        m = self.req.segments.hosts
        flags = {u: self.flagged(u, tier) for u in ucap}
        heap = [r for gk, g in groups.items() if (r := rank_group(gk, g, ucap, flags, m))]
        heapify(heap)
        while True:
            (_, x, _, _, gk), chosen, slack = heappop(heap)
            yield x, chosen, slack
            again = rank_group(gk, groups[gk], ucap, flags, m)
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
        shown = ", ".join(f"{h} ({self.free.reason_unusable(h)})" for h in names[:LIST_MAX])
        more = f" and {len(names) - LIST_MAX} more" if len(names) > LIST_MAX else ""
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
    shown = ", ".join(p.text() for p in ports[:LIST_MAX])
    return shown + (f" and {len(ports) - LIST_MAX} more" if len(ports) > LIST_MAX else "")


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
                k = cover_count(sorted((c for c, _, _ in items), reverse=True), m)
                x, chosen, slack = pick_units(items, m, k)
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
    idx = locality_index(locality)
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
