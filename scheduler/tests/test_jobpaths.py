"""The job→links computation (``scheduler.jobpaths``) against ``routing.paths.trace`` on a
small generated two-level fat tree (pure: no database)."""

from __future__ import annotations

from collections import Counter

import pytest

from routing.parsers import UNASSIGNED
from routing.paths import trace
from routing.tables import build_tables
from scheduler.jobpaths import ALL_TO_ALL, RING, dead_ends, job_port_loads, rail_pairs

LEAVES, SPINES, HOSTS, RAILS = 3, 2, 2, 2


def fat_tree(cut: tuple[str, int] | None = None):
    """Leaves 0..2 (LIDs 100+), spines (LIDs 200+); per leaf ``HOSTS`` hosts x ``RAILS`` HCAs,
    each HCA on its leaf's port 1.. ; leaf uplink ``u`` (port 9+u) to spine ``u``. d-mod-k
    routing: a leaf sends a remote LID ``d`` up to spine ``d % SPINES``; spines go down."""
    cas, links, lid_of, leaf_of = [], [], {}, {}
    lid = 1
    for leaf in range(LEAVES):
        for h in range(HOSTS):
            for r in range(RAILS):
                guid = f"0x{leaf:02x}{h:02x}{r:02x}"
                cas.append((guid, 1, f"h{leaf}{h} mlx5_{r}", lid, 0))
                links.append((f"0x10{leaf}", 1 + h * RAILS + r, guid, 1))
                lid_of[leaf, h, r], leaf_of[lid] = lid, (leaf, 1 + h * RAILS + r)
                lid += 1
    top = 210
    switches = []
    for leaf in range(LEAVES):
        lft = [UNASSIGNED] * (top + 1)
        for d, (dl, port) in leaf_of.items():
            lft[d] = port if dl == leaf else 9 + d % SPINES
        lft[100 + leaf] = 0
        switches.append((f"0x10{leaf}", f"L{leaf}", 100 + leaf, bytes(lft), 12))
    for s in range(SPINES):
        lft = [UNASSIGNED] * (top + 1)
        for d, (dl, _p) in leaf_of.items():
            lft[d] = 1 + dl
        lft[200 + s] = 0
        switches.append((f"0x20{s}", f"S{s}", 200 + s, bytes(lft), LEAVES))
        for leaf in range(LEAVES):
            links.append((f"0x10{leaf}", 9 + s, f"0x20{s}", 1 + leaf))
    return build_tables(switches, cas, [x for x in links if x[:2] != cut]), lid_of


def traced(t, pairs) -> Counter:
    """The directed ports of each pair by ``trace`` (what ibtracert prints), counted."""
    c: Counter = Counter()
    for a, b in pairs:
        tr = trace(t, a, b)
        c[-1 - tr.src[1]] += 1
        for h in tr.hops:
            c[h.switch * 256 + h.out_port] += 1
    return c


@pytest.mark.parametrize("model", [ALL_TO_ALL, RING])
def test_job_links_equal_the_traced_paths_of_its_rails(model):
    t, lid_of = fat_tree()
    hosts = [(0, 0), (0, 1), (2, 1)]  # two hosts on leaf 0, one on leaf 2
    rails = {r + 1: [lid_of[leaf, h, r] for leaf, h in hosts] for r in range(RAILS)}
    per_rail, unrouted = job_port_loads(t, rails, model)
    assert unrouted == 0
    for rail, lids in rails.items():
        assert per_rail[rail] == traced(t, rail_pairs(lids, model))
    # real values: rail 1 LIDs 1, 3 on leaf 0 and 11 on leaf 2; leaf 0's uplink to spine
    # 11 % 2 = 1 (port 10) carries the pairs into 11; leaf 1 is crossed by nobody
    up = t.switch_port(t.switch_index["0x100"], 10)
    assert per_rail[1][up] == (2 if model == ALL_TO_ALL else 1)
    leaf1 = t.switch_index["0x101"]
    assert not [c for c in per_rail[1] if c >= 0 and c >> 8 == leaf1]
    assert t.port_key(up) == ("0x100", 10)


def test_ring_pairs_and_unknown_model():
    assert rail_pairs([1, 2, 3], RING) == [(1, 2), (2, 3), (3, 1)]
    assert rail_pairs([1, 2], RING) == [(1, 2), (2, 1)]
    assert rail_pairs([1], RING) == []
    assert len(rail_pairs([1, 2, 3], ALL_TO_ALL)) == 6
    with pytest.raises(ValueError, match="unknown traffic model"):
        rail_pairs([1, 2], "mesh")


def test_unrouted_pairs_are_counted_not_listed():
    t, lid_of = fat_tree()
    t.lfts[0] = bytes(UNASSIGNED if i == lid_of[2, 1, 0] else b for i, b in enumerate(t.lfts[0]))
    per_rail, unrouted = job_port_loads(t, {1: [lid_of[0, 0, 0], lid_of[2, 1, 0]]}, ALL_TO_ALL)
    assert unrouted == 1 and per_rail[1] == traced(t, [(lid_of[2, 1, 0], lid_of[0, 0, 0])])


def test_a_cut_uplink_is_where_the_pairs_through_it_stop():
    t, lid_of = fat_tree(cut=("0x100", 10))  # leaf 0 -> spine 1 cable gone, the LFTs unchanged
    lids = [lid_of[0, 0, 0], lid_of[2, 1, 0], lid_of[2, 0, 0]]  # LIDs 1, 11, 9
    per_rail, unrouted = job_port_loads(t, {1: lids}, ALL_TO_ALL)
    # 1 -> 11 and 1 -> 9 go up to spine d % 2 = 1 over the cut cable; 9 -> 1 and 11 -> 1 come
    # down from spine 1 (LID 1 is odd) over it too
    assert unrouted == 4
    dead = dead_ends(t, rail_pairs(lids, ALL_TO_ALL))
    assert dead == {
        t.switch_port(t.switch_index["0x100"], 10): 2,
        t.switch_port(t.switch_index["0x201"], 1): 2,
    }
