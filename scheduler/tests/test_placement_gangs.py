"""Large gangs (issue 24 §4): the gang greedy keeps each group's rank in a heap and ranks again
only the group a segment was taken from; its decisions must be exactly those of ranking every
group for every segment (``scheduler.placement.place_rescanning``, the engine before)."""

from __future__ import annotations

import random

from hypothesis import event, given
from hypothesis import strategies as st

from scheduler.placement import Congestion, FreeState, Mark, Request, Segments, place, place_rescanning
from tests.support.localities import fat_tree, tree
from tests.support.placement_strategies import SETTINGS, localities, states


@SETTINGS
@given(st.data())
def test_the_heap_greedy_decides_exactly_as_re_ranking_every_group(data):
    loc = data.draw(localities(max_hosts=6))
    free = data.draw(states(loc))
    maxg = max(s.gpus for s in loc.hosts.values())
    p = data.draw(st.integers(1, maxg))
    seg = Segments(data.draw(st.integers(1, 6)), data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3)))
    tier = data.draw(st.one_of(st.none(), st.integers(2, 4)))
    cong = None
    if data.draw(st.booleans()):
        keys = sorted(d.key for d in loc.domains.values() if 1 <= d.tier < 4)
        marked = data.draw(st.sets(st.sampled_from(keys), max_size=4))
        cong = Congestion({k: Mark(0.9, "PortXmitWait") for k in marked}, 0.5, avoid=data.draw(st.booleans()))
    req = Request(seg.count * seg.hosts * p, gpus_per_host=p, segments=seg, tier=tier)
    d = place(loc, free, req, cong)
    assert d == place_rescanning(loc, free, req, cong)
    event(f"gang: {d.code}")


def test_a_large_gang_one_segment_per_leaf_on_a_fragmented_tree_is_the_same_decision():
    """The bench's shape, smaller: 40 leaves of 16 hosts, each leaf with 5-9 whole free hosts
    (room for one 5-host segment), the others partly busy; 30 segments, one per leaf."""
    loc = fat_tree(40, 16, gpus=8)
    rng = random.Random(7)
    for _ in range(3):
        free = {}
        for unit in loc.units():
            hosts = list(unit.hosts)
            rng.shuffle(hosts)
            whole = rng.randint(5, 9)
            for i, h in enumerate(hosts):
                free[h] = 8 if i < whole else rng.randint(0, 7)
        req = Request(30 * 5 * 8, gpus_per_host=8, segments=Segments(30, 5, "leaf"))
        d = place(loc, FreeState(gpus=free), req)
        assert d.ok and d == place_rescanning(loc, FreeState(gpus=free), req)
        assert len(d.segments) == 30 and d.units == 30
        units = [{loc.hosts[h].unit for h in s} for s in d.segments]
        assert all(len(u) == 1 for u in units) and len(set().union(*units)) == 30  # one segment per leaf
        assert all(free[h] == 8 for s in d.segments for h in s)


def test_segments_inside_blocks_of_a_three_level_tree_are_the_same_decision():
    loc = tree(1, 4, 4, 6, gpus=4)  # 4 blocks × 4 leaves × 6 hosts
    rng = random.Random(3)
    for _ in range(5):
        free = FreeState(gpus={h: rng.choice([0, 2, 4, 4, 4]) for h in loc.hosts})
        req = Request(6 * 7 * 4, gpus_per_host=4, segments=Segments(6, 7, "block"))
        d = place(loc, free, req)
        assert d == place_rescanning(loc, free, req)
        if d.ok:
            assert all(len({loc.hosts[h].path[1] for h in s}) == 1 for s in d.segments)


def test_the_placement_bench_runs_tiny_and_reports_the_gang_against_the_old_greedy():
    """``bench/placement.py --tiny`` (seconds): the figures exist and are positive, both greedies
    decided the same (the bench exits otherwise), and the load and quietness are reported."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[2] / "bench" / "placement.py"
    done = subprocess.run(
        [sys.executable, str(bench), "--tiny", "--json"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["tiny"] is True and out["gang_segments"] == [12, 10] and out["gang_job_gpus"] == 960
    assert 0 < out["gang_p50_cpu_ms"] <= out["gang_p99_cpu_ms"] and out["gang_baseline_p50_cpu_ms"] > 0
    assert out["gang_speedup_p50"] > 0 and len(out["load_average"]["start"]) == 3
    assert out["quiet"] == (out["load_average"]["start"][0] <= 0.5)
