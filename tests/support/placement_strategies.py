"""Hypothesis strategies shared by the placement tests: random localities (fat trees, 3-/4-level trees, rail pods, two fabrics), random free states, and the settings they run with."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from scheduler.locality import Locality
from scheduler.placement import (
    FreeState,
)
from tests.support.localities import fat_tree, merge, rail_pods, tree

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def localities(draw, max_hosts: int = 5) -> Locality:
    """A random fat tree, 3- or 4-level tree, rail-optimised fabric, or two fabrics."""
    kind = draw(st.sampled_from(["fat", "three", "four", "rail", "two"]))
    gpus = draw(st.sampled_from([1, 2, 4, 8]))

    def hosts(n):
        return draw(st.lists(spread(1, max_hosts), min_size=n, max_size=n))

    if kind == "fat":
        leaves = draw(spread(1, 6))
        return fat_tree(leaves, hosts(leaves), gpus)
    if kind == "three":
        b, lv = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        return tree(1, b, lv, hosts(b * lv), gpus)
    if kind == "four":
        g, b, lv = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 3))
        return tree(g, b, lv, hosts(g * b * lv), gpus)
    if kind == "rail":
        b, p = draw(st.integers(1, 2)), draw(st.integers(1, 3))
        return rail_pods(b, p, draw(st.integers(2, 4)), hosts(b * p), gpus)
    a, b = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    return merge(fat_tree(a, hosts(a), gpus, fabric_id=1), tree(1, b, 2, hosts(2 * b), gpus, fabric_id=2))


@st.composite
def states(draw, loc: Locality, unusable: bool = True) -> FreeState:
    """Random free whole GPUs per host (0..capacity) and a few unusable hosts."""
    names = sorted(loc.hosts)
    gpus = {h: draw(st.integers(0, loc.hosts[h].gpus)) for h in names}
    bad = {}
    if unusable:
        for h in names:
            if draw(st.integers(0, 9)) == 0:
                bad[h] = "links down"
    return FreeState(gpus=gpus, unusable=bad)


def spread(lo: int, hi: int):
    """lo..hi, drawn from both ends (plain integers shrink and lean towards ``lo``)."""
    return st.one_of(st.integers(lo, hi), st.integers(lo, hi).map(lambda x: lo + hi - x))
