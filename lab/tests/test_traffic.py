"""The demo traffic pattern (pure): counters rise by load x rate, hot spots congest, the wave moves."""

from __future__ import annotations

import itertools

import pytest

from lab.traffic import LEAF, SPINE, LinkEnd, TrafficLink, link_load, traffic_pattern

RATE = 25e9  # 4x HDR in bytes/s


def fat_tree(leaves: int = 4, spines: int = 2) -> list[TrafficLink]:
    links = []
    for li in range(leaves):
        for si in range(spines):
            links.append(
                TrafficLink(LinkEnd(f"leaf{li}", si + 1, LEAF), LinkEnd(f"spine{si}", li + 1, SPINE), RATE)
            )
        links.append(TrafficLink(LinkEnd(f"leaf{li}", 10, LEAF), LinkEnd(f"host{li}", 1, 0, False), RATE))
    return links


def test_counters_rise_by_load_times_rate():
    links = fat_tree()
    gen = traffic_pattern(links, 2.0, seed=7, wave_period_s=40.0)
    first, second = next(gen), next(gen)
    by_key = {(s.node, s.port, s.field): s.value for s in first}
    loads = link_load(links, 4.0, seed=7, wave_period_s=40.0)
    for s in second:
        if s.field != "PortCountersExtended.PortXmitData":
            continue
        i = next(
            k
            for k, link in enumerate(links)
            if (link.a.node, link.a.port) == (s.node, s.port)
            or (link.b.node, link.b.port) == (s.node, s.port)
        )
        direction = "ab" if (links[i].a.node, links[i].a.port) == (s.node, s.port) else "ba"
        expected = loads[(i, direction)].utilisation * RATE * 2.0 / 4
        assert s.value - by_key[(s.node, s.port, s.field)] == pytest.approx(expected, abs=1.5)
    # Host (CA) ports are not written: the heatmap shows switch ports.
    assert not any(s.node.startswith("host") for s in first)


def test_hot_spots_congest_and_wave_moves_across_leaves():
    links = fat_tree(leaves=6)
    busiest = []
    for t in (0.0, 10.0, 20.0, 30.0):
        loads = link_load(links, t, seed=1, hot_spots=2, wave_period_s=40.0)
        congested = [k for k, load in loads.items() if load.congestion >= 0.5 and load.utilisation >= 0.9]
        assert len(congested) >= 2
        up = {}
        for (i, d), load in link_load(links, t, seed=1, hot_spots=0, wave_period_s=40.0).items():
            src = links[i].a if d == "ab" else links[i].b
            dst = links[i].b if d == "ab" else links[i].a
            if src.tier == LEAF and dst.tier == SPINE:
                up[src.node] = max(up.get(src.node, 0), load.utilisation)
        busiest.append(max(up, key=up.get))
    assert len(set(busiest)) == 4, busiest


def test_xmit_wait_wraps_instead_of_saturating():
    links = fat_tree(leaves=2, spines=1)
    gen = traffic_pattern(links, 10.0, seed=3, hot_spots=1, ticks_per_s_full=5e7)
    series: dict[tuple, list[int]] = {}
    for steps in itertools.islice(gen, 12):
        for s in steps:
            if s.field == "PortXmitWait":
                series.setdefault((s.node, s.port), []).append(s.value)
    assert max(max(v) for v in series.values()) < 2**32 - 1
    # The hot port's counter went past the wrap point once: exactly one drop, never saturated.
    drops = [sum(1 for x, y in itertools.pairwise(v) if y < x) for v in series.values()]
    assert max(drops) == 1
