"""The placement engine (``scheduler.placement``) against brute-force references.

Trees are built directly (``tests.support.localities``): 2-level fat trees, 3- and 4-level trees,
rail-optimised pods and two fabrics side by side, with random free states and unusable hosts.

What the engine guarantees, and what is asserted:

- *tier*: the lowest tier T at which one domain's usable free capacity covers the request (a
  placement exists inside it; none at a lower tier);
- *units = lower bound*: among the tier-T domains that can hold the request, the fewest units
  whose free capacity covers it (top-k per domain, minimised over the domains) — no placement
  inside any one tier-T domain can use fewer units, since any j units of a domain hold at most
  its j largest; the engine always attains it (for non-gang requests);
- *completeness*: a request is pending only when no domain of the allowed tiers can hold it
  (whole GPUs, whole hosts, and gang segments, whose feasibility is Σ⌊cap/M⌋ ≥ segments);
- *constraints*: never above the required tier, never an unusable host, never two fabrics, never
  more than a host has free, whole hosts get exactly ``gpus_per_host``;
- *congestion*: the congested units used are the fewest any lower-bound placement can use;
- *preemption*: the fewest victims, then the lowest highest victim priority, then the most
  compact placement (brute force).
"""

from __future__ import annotations

import itertools
import json
import random

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from scheduler.locality import TOP_TIER, Locality, UnknownTier
from scheduler.placement import (
    PENDING_CODES,
    PLACED,
    Congestion,
    Decision,
    Fraction,
    FreeState,
    Mark,
    Request,
    RequestError,
    RunningJob,
    Segments,
    first_fit,
    place,
    select_victims,
)
from tests.support.localities import fat_tree, merge, rail_pods, tree
from tests.support.placement_strategies import SETTINGS, localities, spread, states

# --------------------------------------------------------------------------------------------
# Strategies


# --------------------------------------------------------------------------------------------
# References (brute force over the Locality's own domains)


def slot_caps(loc: Locality, free: FreeState, req: Request) -> dict[str, int]:
    """Usable slots per host for a whole-GPU request."""
    out = {}
    for h, site in loc.hosts.items():
        if h in free.unusable or (req.fabric_id is not None and site.fabric_id != req.fabric_id):
            continue
        n = free.gpus.get(h, 0)
        out[h] = (1 if n >= req.gpus_per_host else 0) if req.gpus_per_host else n
    return out


def domain_hosts(loc: Locality, tier: int) -> list[tuple[str, ...]]:
    if tier == 0:
        return [(h,) for h in sorted(loc.hosts)]
    return [d.hosts for d in loc.at_tier(tier)]


def unit_caps(loc: Locality, hosts, caps: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for h in hosts:
        if caps.get(h):
            out[loc.hosts[h].unit] = out.get(loc.hosts[h].unit, 0) + caps[h]
    return out


def cover(values, need) -> int | None:
    total = 0
    for i, v in enumerate(sorted(values, reverse=True)):
        total += v
        if total >= need:
            return i + 1
    return None


def reference(loc: Locality, caps: dict[str, int], need: int, tmax: int) -> tuple[int, int] | None:
    """(lowest feasible tier, lower bound in units) or None when nothing at tiers ≤ tmax holds it."""
    for t in range(tmax + 1):
        ks = [cover(unit_caps(loc, hs, caps).values(), need) for hs in domain_hosts(loc, t)]
        ks = [k for k in ks if k is not None]
        if ks:
            return t, (1 if t == 0 else min(ks))
    return None


def gang_feasible(loc: Locality, caps: dict[str, int], seg: Segments, tmax: int) -> bool:
    for t in range(tmax + 1):
        for hs in domain_hosts(loc, t):
            if seg.tier >= t:
                if sum(caps.get(h, 0) for h in hs) >= seg.count * seg.hosts:
                    return True
                continue
            inner = [e.hosts for e in loc.at_tier(seg.tier) if set(e.hosts) <= set(hs)]
            if sum(sum(caps.get(h, 0) for h in e) // seg.hosts for e in inner) >= seg.count:
                return True
    return False


def sizes(top: int):
    """Request sizes 1..top over the whole range (not mostly one host's worth)."""
    return st.one_of(spread(1, top), st.floats(0, 1).map(lambda f: max(1, min(top, round(f * top)))))


def check_valid(loc: Locality, free: FreeState, req: Request, d: Decision) -> None:
    """Every hard rule of a placed decision."""
    assert d.code == PLACED
    assert sum(d.placed.values()) == req.count
    sites = [loc.hosts[h] for h in d.placed]
    assert len({s.fabric_id for s in sites}) == 1
    if req.fabric_id is not None:
        assert sites[0].fabric_id == req.fabric_id
    for h, n in d.placed.items():
        assert h not in free.unusable
        assert 0 < n <= free.gpus.get(h, 0)
        if req.gpus_per_host:
            assert n == req.gpus_per_host
    tier, units = loc.span(d.placed)
    assert (d.tier, d.units) == (tier, units)
    if req.tier is not None:
        assert tier <= req.tier
    if req.segments is not None:
        seg = req.segments
        assert len(d.segments) == seg.count
        assert all(len(s) == seg.hosts for s in d.segments)
        flat = [h for s in d.segments for h in s]
        assert len(flat) == len(set(flat)) and set(flat) == set(d.placed)
        for s in d.segments:
            assert loc.span(s)[0] <= seg.tier


# --------------------------------------------------------------------------------------------
# Properties


@SETTINGS
@given(st.data())
def test_units_spanned_equal_the_lower_bound(data):
    """Compact requests of whole GPUs on random fragmented states: the lowest feasible tier, and
    exactly the lower bound of units at that tier."""
    loc = data.draw(localities())
    free = data.draw(states(loc))
    caps = slot_caps(loc, free, Request(1))
    best_fabric = max(
        (sum(caps.get(h, 0) for h in f.hosts) for f in loc.fabrics()),
        default=0,
    )
    assume(best_fabric > 0)
    need = data.draw(sizes(best_fabric))
    req = Request(need)
    d = place(loc, free, req)
    event(f"tier {d.tier}, units {d.units}")
    check_valid(loc, free, req, d)
    assert (d.tier, d.units) == reference(loc, caps, need, TOP_TIER)
    assert d.lower_bound == d.units
    # the same request required at the tier it got, or any tier above, is placed the same way
    for t in range(d.tier, TOP_TIER + 1):
        again = place(loc, free, Request(need, tier=t))
        assert (again.tier, again.units, again.placed) == (d.tier, d.units, d.placed)


@SETTINGS
@given(st.data())
def test_whole_host_requests_attain_the_lower_bound_in_hosts(data):
    loc = data.draw(localities())
    free = data.draw(states(loc))
    p = data.draw(st.integers(1, max(s.gpus for s in loc.hosts.values())))
    caps = slot_caps(loc, free, Request(p, gpus_per_host=p))
    hosts_ok = sum(caps.values())
    assume(hosts_ok > 0)
    n = data.draw(sizes(hosts_ok))
    req = Request(n * p, gpus_per_host=p)
    ref = reference(loc, caps, n, TOP_TIER)
    d = place(loc, free, req)
    if ref is None:  # enough hosts, but on two fabrics
        assert d.code in PENDING_CODES and not d.placed
        return
    check_valid(loc, free, req, d)
    assert (d.tier, d.units) == ref


@SETTINGS
@given(st.data())
def test_required_constraints_are_never_violated_and_nothing_that_fits_stays_pending(data):
    loc = data.draw(localities())
    free = data.draw(states(loc))
    maxg = max(s.gpus for s in loc.hosts.values())
    p = data.draw(st.one_of(st.none(), st.integers(1, maxg)))
    seg = None
    if p is not None and data.draw(st.booleans()):
        seg = Segments(
            data.draw(st.integers(1, 3)), data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3))
        )
        count = seg.count * seg.hosts * p
    else:
        count = data.draw(sizes(len(loc.hosts) * maxg // (p or 1))) * (p or 1)
    tier = data.draw(
        st.one_of(st.none(), st.integers(0, TOP_TIER), st.sampled_from(["leaf", "block", "spine-group"]))
    )
    fabric = data.draw(
        st.one_of(st.none(), st.sampled_from(sorted({s.fabric_id for s in loc.hosts.values()})))
    )
    req = Request(count, gpus_per_host=p, segments=seg, tier=tier, fabric_id=fabric)
    d = place(loc, free, req)
    caps = slot_caps(loc, free, req)
    tmax = TOP_TIER if req.tier is None else req.tier
    feasible = (
        gang_feasible(loc, caps, seg, tmax) if seg else reference(loc, caps, req.slots, tmax) is not None
    )
    assert d.ok == feasible
    event(f"{'gang' if seg else 'whole hosts' if p else 'gpus'}: {d.code}")
    if d.ok:
        check_valid(loc, free, req, d)
        if seg is None:
            assert (d.tier, d.units) == reference(loc, caps, req.slots, tmax)
        else:
            assert d.units >= d.lower_bound
    else:
        assert d.code in PENDING_CODES and not d.placed and d.reasons


@SETTINGS
@given(st.data())
def test_congested_units_are_used_only_when_no_equal_placement_avoids_them(data):
    loc = data.draw(localities(max_hosts=4))
    free = data.draw(states(loc, unusable=False))
    caps = slot_caps(loc, free, Request(1))
    total = max(sum(caps.get(h, 0) for h in f.hosts) for f in loc.fabrics())
    assume(total > 0)
    need = data.draw(sizes(total))
    keys = sorted(d.key for d in loc.domains.values() if d.tier < TOP_TIER)
    marked = data.draw(st.sets(st.sampled_from(keys), max_size=4))
    cong = Congestion({keys[0]: Mark(0.1)} | {k: Mark(0.9, "PortXmitWait") for k in marked}, threshold=0.5)
    plain = place(loc, free, Request(need))
    d = place(loc, free, Request(need), cong)
    # congestion never costs a tier or a unit
    assert (d.tier, d.units, d.lower_bound) == (plain.tier, plain.units, plain.lower_bound)
    check_valid(loc, free, Request(need), d)
    tier = d.tier

    def flagged(u: str) -> bool:  # the unit's mark, or a marked block/group whose uplinks the job crosses
        path = loc.hosts[loc.domains[u].hosts[0]].path
        return u in marked or any(path[t - 1] in marked for t in range(2, tier))

    used = {loc.hosts[h].unit for h in d.placed}
    # brute force: the fewest flagged units any lower-bound placement at this tier can use
    best = None
    for hs in domain_hosts(loc, tier):
        uc = unit_caps(loc, hs, caps)
        if tier == 0:
            options = [[loc.hosts[hs[0]].unit]] if caps.get(hs[0], 0) >= need else []
        else:
            options = [c for c in itertools.combinations(uc, d.units) if sum(uc[u] for u in c) >= need]
        for c in options:
            x = sum(1 for u in c if flagged(u))
            best = x if best is None else min(best, x)
    assert sum(1 for u in used if flagged(u)) == best
    event(f"congested used {best}, avoided {bool(d.avoided)}")
    assert bool(d.congested) == (best > 0)
    assert set(d.avoided) <= marked and not set(d.avoided) & set(d.congested)
    # avoiding instead of penalising: never a flagged unit; pending "congestion" only if it would place
    a = place(loc, free, Request(need), Congestion(cong.marks, 0.5, avoid=True))
    if a.ok:
        check_valid(loc, free, Request(need), a)
        tier = a.tier
        assert not any(flagged(loc.hosts[h].unit) for h in a.placed)
    else:
        assert a.code == "congestion"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_preemption_picks_the_fewest_victims(data):
    """Against brute force over every subset of the candidates (small trees, ≤ 6 running jobs):
    the fewest victims, then the lowest highest priority, then the most compact placement."""
    loc = data.draw(localities(max_hosts=2))
    names = sorted(loc.hosts)
    busy = {h: 0 for h in names}
    jobs = []
    for j in range(data.draw(st.integers(0, 6))):
        hosts = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
        placed = {}
        for h in hosts:
            room = loc.hosts[h].gpus - busy[h]
            if room:
                placed[h] = room - data.draw(st.integers(0, room - 1))  # mostly all that is left
                busy[h] += placed[h]
        if placed:
            prio = data.draw(st.integers(0, 3))
            jobs.append(RunningJob(f"job{j}", prio, placed, not data.draw(st.integers(0, 4)) == 0))
    gpus = {h: data.draw(st.integers(0, loc.hosts[h].gpus - busy[h])) for h in names}
    bad = {h: "links down" for h in names if data.draw(st.integers(0, 12)) == 0}
    free = FreeState(gpus=gpus, unusable=bad)
    maxg = max(s.gpus for s in loc.hosts.values())
    p = data.draw(st.one_of(st.none(), st.integers(1, maxg)))
    tier = data.draw(st.one_of(st.none(), st.integers(0, TOP_TIER)))
    if p is not None and data.draw(st.integers(0, 3)) == 0:  # gang segments: checked by place()
        seg = Segments(
            data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3))
        )
        req = Request(seg.count * seg.hosts * p, gpus_per_host=p, segments=seg, tier=tier)
    else:
        req = Request(data.draw(sizes(len(names) * maxg // (p or 1))) * (p or 1), gpus_per_host=p, tier=tier)
    cong = None
    if data.draw(st.integers(0, 3)) == 0:  # congestion avoided: checked by place()
        units = [u.key for u in loc.units()]
        cong = Congestion(
            {k: Mark(1.0) for k in data.draw(st.sets(st.sampled_from(units), max_size=2))}, avoid=True
        )
    prio = 4 - data.draw(st.integers(0, 4))
    got = select_victims(loc, free, req, jobs, priority=prio, congestion=cong)

    eligible = [j for j in jobs if j.preemptible and j.priority < prio]

    def release(victims) -> FreeState:
        g = dict(gpus)
        for v in victims:
            for h, n in v.placed.items():
                g[h] += n
        return FreeState(gpus=g, unusable=bad)

    best = None  # (victims, highest victim priority, tier the request then gets)
    for k in range(len(eligible) + 1):
        for combo in itertools.combinations(eligible, k):
            after = place(loc, release(combo), req, cong)
            if after.ok:
                rank = (k, max((v.priority for v in combo), default=-1), after.tier)
                best = rank if best is None else min(best, rank)
        if best is not None:
            break
    event(f"victims {best[0] if best else None}")
    if best is None:
        assert got is None
        return
    assert got is not None and not got.truncated
    victims = [j for j in jobs if j.job_id in got.victims]
    assert len(victims) == len(got.victims)
    assert (len(victims), max((v.priority for v in victims), default=-1), got.decision.tier) == best
    assert all(v.preemptible and v.priority < prio for v in victims)
    check_valid(loc, release(victims), req, got.decision)


# --------------------------------------------------------------------------------------------
# Examples


def fragmented(loc: Locality, seed: int = 7) -> dict[str, int]:
    rng = random.Random(seed)
    return {h: rng.randint(0, s.gpus) for h, s in loc.hosts.items()}


def test_tier_names_and_bad_requests_are_refused_at_construction():
    assert Request(8, tier="spine-group").tier == 3
    assert Request(8, tier="Block").tier == 2
    assert Request(8, tier="4").tier == 4
    with pytest.raises(UnknownTier, match="known: host, leaf, block"):
        Request(8, tier="rack")
    with pytest.raises(UnknownTier):
        Request(8, tier=7)
    with pytest.raises(UnknownTier):
        Segments(2, 4, "pod")
    for bad in (
        dict(count=0),
        dict(count=10, gpus_per_host=4),
        dict(count=16, segments=Segments(2, 1, "leaf")),
        dict(count=16, gpus_per_host=8, segments=Segments(2, 2, "leaf")),
        dict(count=2, fraction=Fraction(1000, 10)),
        dict(count=1, mig_profile="1g.10gb", fraction=Fraction(1000, 10)),
        dict(count=8, mig_profile="1g.10gb", gpus_per_host=8),
    ):
        with pytest.raises(RequestError):
            Request(**bad)
    with pytest.raises(RequestError, match="inside one host"):
        Segments(2, 4, "host")


def test_a_small_job_goes_to_the_best_fitting_host_of_the_fullest_leaf():
    loc = fat_tree(2, 2)  # hosts f1n00001-2 on leaf 1, f1n00003-4 on leaf 2
    free = FreeState(gpus={"f1n00001": 8, "f1n00002": 3, "f1n00003": 8, "f1n00004": 5})
    d = place(loc, free, Request(3))
    assert (d.code, d.placed, d.tier, d.units) == (PLACED, {"f1n00002": 3}, 0, 1)
    d = place(loc, free, Request(5))
    assert d.placed == {"f1n00004": 5}
    d = place(loc, free, Request(11))  # one leaf: leaf 1 (8+3) fits exactly, leaf 2 (8+5) would leave 2
    assert (d.placed, d.tier, d.units) == ({"f1n00001": 8, "f1n00002": 3}, 1, 1)
    assert d.reasons[0] == "placed 11 GPUs on 2 hosts in 1 unit of leaf f1-leaf1 (tier 1)"
    assert "no host has 11 free GPUs (largest: 8)" in d.reasons


def test_best_fit_among_equal_unit_counts_keeps_the_biggest_free_leaf_whole():
    loc = fat_tree(4, 4, gpus=4)  # leaves of 16 GPUs
    gpus = {}
    for i, n in enumerate([16, 12, 8, 8]):  # free per leaf, whole hosts first
        hosts = loc.units()[i].hosts
        for j, h in enumerate(hosts):
            gpus[h] = max(0, min(4, n - 4 * j))
    d = place(loc, FreeState(gpus=gpus), Request(20))
    assert (d.tier, d.units, d.lower_bound) == (2, 2, 2)
    leaves = sorted({loc.domains[loc.hosts[h].unit].name for h in d.placed})
    assert leaves == ["f1-leaf2", "f1-leaf3"]  # 12 + 8 = 20 exactly; the 16-GPU leaf stays whole
    assert "lower bound 2 units: the fewest units whose free GPUs cover the request in one block" in d.reasons
    assert "best fit: the chosen units' free GPUs are used exactly" in d.reasons


def test_rail_pods_are_one_unit():
    loc = rail_pods(1, 2, 4, 4)  # 2 pods of 4 rail leaves, 4 hosts each
    assert len(loc.units()) == 2
    free = FreeState(gpus={h: 8 for h in loc.hosts})
    d = place(loc, free, Request(32))
    assert (d.tier, d.units) == (1, 1)
    assert "+" in loc.domains[d.domain].name  # the pod's rail leaves, collapsed
    d = place(loc, free, Request(40))
    assert (d.tier, d.units) == (2, 2)


def test_fragmentation_reasons_count_hosts_per_leaf_in_words():
    """A whole-host request pending for fragmentation names the largest leaf in hosts, singular for
    one ("1 host with", not "1 hosts with"), and has no "largest in one host" line: one host holds
    at most one host, which said "1 hosts with ≥ 8 free GPUs (8 needed)" on the demo's queue page."""
    loc = fat_tree(4, 4)  # 4 leaves × 4 hosts × 8 GPUs
    first_of_leaf = {h for i, h in enumerate(sorted(loc.hosts)) if i % 4 == 0}
    free = FreeState(gpus={h: 8 if h in first_of_leaf else 4 for h in loc.hosts})  # 1 host per leaf with 8
    d = place(loc, free, Request(16, gpus_per_host=8, tier="leaf"))
    assert d.code == "fragmentation" and not d.placed
    assert "largest in one leaf: 1 host with ≥ 8 free GPUs (2 needed)" in d.reasons, d.reasons
    assert not [r for r in d.reasons if r.startswith("largest in one host")], d.reasons


def test_pending_codes_capacity_constraint_fragmentation():
    loc = fat_tree(4, 4)  # 4 leaves × 4 hosts × 8 GPUs
    half = FreeState(gpus={h: 4 for h in loc.hosts})  # 64 free, 16 per leaf, no host with 8
    d = place(loc, half, Request(65))
    assert d.code == "capacity" and not d.placed
    assert d.reasons == ["65 GPUs asked, 64 free in the best eligible fabric"]
    d = place(loc, half, Request(129))
    assert d.code == "capacity" and "more than any eligible fabric has" in d.reasons[0]
    d = place(loc, half, Request(40, tier="leaf"))  # a leaf has 32 GPUs: never
    assert d.code == "constraint"
    assert d.reasons == ["40 GPUs can never fit in one leaf: the largest has 32 GPUs"]
    d = place(loc, half, Request(24, tier="leaf"))  # fits a leaf, but 16 free per leaf now
    assert d.code == "fragmentation"
    assert "largest in one leaf: 16 free GPUs (24 needed)" in d.reasons
    d = place(loc, half, Request(16, gpus_per_host=8))  # 64 free GPUs, no host with 8
    assert d.code == "fragmentation"
    assert "0 hosts have ≥ 8 free GPUs (2 needed in one domain)" in d.reasons
    d = place(loc, half, Request(16, gpus_per_host=4, segments=Segments(2, 2, "leaf")))
    assert d.ok and sorted(len(s) for s in d.segments) == [2, 2]
    d = place(loc, half, Request(40, gpus_per_host=4, segments=Segments(2, 5, "leaf")))  # 5 > 4 hosts a leaf
    assert d.code == "constraint" and "a segment of 5 hosts can never fit in one leaf" in d.reasons[0]
    assert json.loads(json.dumps(d.as_dict()))["code"] == "constraint"


def test_gang_segments_each_inside_one_block():
    loc = tree(1, 3, 2, 4)  # 3 blocks × 2 leaves × 4 hosts
    gpus = {h: 8 for h in loc.hosts}
    for h in loc.domains["f1/block/0x0001020000000000"].hosts[:5]:
        gpus[h] = 0  # block 1: 3 whole hosts free
    free = FreeState(gpus=gpus)
    d = place(loc, free, Request(3 * 5 * 8, gpus_per_host=8, segments=Segments(3, 5, "block")))
    assert d.code == "fragmentation"  # two blocks hold one 5-host segment each (8 // 5), block 1 none
    d = place(loc, free, Request(2 * 5 * 8, gpus_per_host=8, segments=Segments(2, 5, "block")))
    check_valid(loc, free, Request(80, gpus_per_host=8, segments=Segments(2, 5, "block")), d)
    assert d.tier == 3 and d.units == 4  # 5 hosts need 2 leaves in each block
    blocks = [{loc.hosts[h].domain(2) for h in s} for s in d.segments]
    assert all(len(b) == 1 for b in blocks) and blocks[0] != blocks[1]


def test_unusable_hosts_are_skipped_and_said():
    loc = fat_tree(2, 2)
    free = FreeState(gpus={h: 8 for h in loc.hosts}, unusable={"f1n00001": "links down"})
    before = dict(free.gpus)
    d = place(loc, free, Request(16))
    assert d.placed == {"f1n00003": 8, "f1n00004": 8}
    assert free.gpus == before  # pure: the free state is read, never changed
    assert "skipped 1 unusable host: f1n00001 (links down)" in d.reasons
    d = place(loc, FreeState(gpus=free.gpus, unusable={"f1n00001"}), Request(32))
    assert d.code == "capacity" and "not counted: 1 unusable host: f1n00001 (unusable)" in d.reasons


def test_fabrics_are_never_joined_and_fabric_restriction_holds():
    loc = merge(fat_tree(1, 2, fabric_id=1), fat_tree(1, 2, fabric_id=2))
    free = FreeState(gpus={h: 8 for h in loc.hosts})
    d = place(loc, free, Request(24))
    assert d.code == "capacity"  # 32 free in all, 16 per fabric
    d = place(loc, free, Request(16, fabric_id=2))
    assert set(d.placed) == {"f2n00001", "f2n00002"}
    ff = first_fit(loc, free, Request(24))
    assert ff.code == "capacity"


def test_congestion_avoided_and_explained():
    loc = fat_tree(3, 2)
    free = FreeState(gpus={h: 8 for h in loc.hosts})
    leaf1 = loc.units()[0].key
    cong = Congestion({leaf1: Mark(0.8, "PortXmitWait on uplinks")}, threshold=0.5)
    d = place(loc, free, Request(16), cong)
    assert loc.hosts[next(iter(d.placed))].unit != leaf1
    assert d.avoided == [leaf1] and d.congested == []
    assert (
        "avoided congested f1-leaf1 (0.8: PortXmitWait on uplinks) (an equal placement without them exists)"
        in d.reasons
    )
    # 40 GPUs need 3 leaves: the congested one too, and the decision says so
    d = place(loc, free, Request(40), cong)
    assert d.units == 3 and d.congested == [leaf1]
    assert any(r.startswith("uses congested f1-leaf1") for r in d.reasons)
    d = place(loc, free, Request(40), Congestion(cong.marks, 0.5, avoid=True))
    assert d.code == "congestion" and "f1-leaf1" in d.reasons[0]
    # a mark at or below the threshold is no mark
    d = place(loc, free, Request(16), Congestion({leaf1: Mark(0.5)}, threshold=0.5))
    assert d.avoided == [] and loc.hosts[next(iter(d.placed))].unit == leaf1


def test_mig_slices_and_shared_fractions():
    loc = fat_tree(2, 2)
    free = FreeState(
        mig={"f1n00001": {"1g.10gb": 2}, "f1n00003": {"1g.10gb": 7, "3g.40gb": 1}},
        shared={"f1n00002": [(20000, 50), (70000, 100)], "f1n00004": [(10000, 30)]},
    )
    d = place(loc, free, Request(4, mig_profile="1g.10gb"))
    assert d.placed == {"f1n00003": 4} and d.reasons[0] == "placed 4 1g.10gb slices on host f1n00003 (tier 0)"
    d = place(loc, free, Request(9, mig_profile="1g.10gb"))
    assert d.placed == {"f1n00001": 2, "f1n00003": 7} and d.tier == 2
    assert place(loc, free, Request(2, mig_profile="3g.40gb")).code == "capacity"
    d = place(loc, free, Request(1, fraction=Fraction(15000, 40)))
    assert d.placed == {"f1n00002": 1}
    assert place(loc, free, Request(1, fraction=Fraction(80000, 10))).code == "capacity"


def test_first_fit_baseline_spans_more_units_than_the_engine():
    loc = fat_tree(8, 8)
    free = FreeState(gpus=fragmented(loc))
    d = place(loc, free, Request(100))
    ff = first_fit(loc, free, Request(100))
    assert ff.ok and sum(ff.placed.values()) == 100
    assert ff.units > d.units == d.lower_bound
    # in host-name order: the first hosts with free GPUs
    assert min(ff.placed) == min(h for h, n in free.gpus.items() if n)


def test_preemption_examples():
    loc = fat_tree(2, 2)
    free = FreeState(gpus={"f1n00001": 0, "f1n00002": 0, "f1n00003": 2, "f1n00004": 0})
    jobs = [
        RunningJob("a", 1, {"f1n00001": 8}),
        RunningJob("b", 0, {"f1n00002": 8}),
        RunningJob("c", 0, {"f1n00003": 6, "f1n00004": 8}),
        RunningJob("d", 0, {"f1n00001": 0}, preemptible=False),
    ]
    got = select_victims(loc, free, Request(16), jobs, priority=5)
    assert got.victims == ("c",)  # one victim frees 14 + 2 free
    got = select_victims(loc, free, Request(8, tier="host"), jobs, priority=5)
    assert got.victims == ("b",)  # one host: b (priority 0) rather than a (priority 1)
    assert select_victims(loc, free, Request(8), jobs, priority=0) is None  # nobody lower
    assert select_victims(loc, free, Request(2), jobs, priority=5).victims == ()
    got = select_victims(loc, free, Request(16, gpus_per_host=8), jobs, priority=5)
    assert got.victims == ("c",) and got.decision.placed == {"f1n00003": 8, "f1n00004": 8}
    with pytest.raises(RequestError):
        select_victims(loc, free, Request(1, mig_profile="1g.10gb"), jobs, priority=5)
