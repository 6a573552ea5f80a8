"""Path-aware placement (issue 24 §2): hosts scored by the measured load of the exact ports their
routes would cross (``scheduler.pathcost`` + ``scheduler.placement.PathCosts``), on a generated
two-level fat tree with d-mod-k routes (``tests.support.routed_trees``: host ``k`` of every leaf
is reached through spine ``k % spines`` from every other leaf). Pure: no database."""

from __future__ import annotations

from routing.tables import RouteTables
from scheduler.jobpaths import job_port_loads
from scheduler.pathcost import candidates, hot_ports_by_host, route_incidence
from scheduler.placement import (
    PENDING_CONGESTION,
    Congestion,
    FreeState,
    HotPort,
    Mark,
    PathCosts,
    Request,
    place,
    place_rescanning,
)
from tests.support.routed_trees import routed_fat_tree, spine_guid

LEAVES, SPINES, HOSTS = 3, 2, 2


def _tree():
    loc, t, lids = routed_fat_tree(LEAVES, SPINES, HOSTS)
    inc = route_incidence(t, lids, {h: s.path for h, s in loc.hosts.items()})
    return loc, t, lids, inc


def _hot_spine(t: RouteTables, spine: int = 0, congestion: float = 0.9) -> dict[tuple[str, int], HotPort]:
    """Every down port of one spine measured hot (as ibsim's PerformanceSet of PortXmitWait makes it)."""
    g = spine_guid(spine)
    return {
        (g, p): HotPort(f"{g}/{p}", f"spine-{spine + 1:02d} [{p}]", 0.35, congestion)
        for p in range(1, LEAVES + 1)
    }


def _crossed(t: RouteTables, lids, hosts) -> set[tuple[str, int]]:
    """The ports a job on ``hosts`` crosses, all-to-all (``scheduler.jobpaths``, as JobLink)."""
    per_rail, unrouted = job_port_loads(t, {1: [lids[h][0] for h in sorted(hosts)]})
    assert unrouted == 0
    return {t.port_key(c) for c in per_rail[1]}


def test_incidence_is_exactly_the_ports_an_all_to_all_job_crosses():
    loc, t, lids, inc = _tree()
    # a job on every host (sources on every leaf) crosses every port the incidence records at tier 2
    everyone = {k for k, per in inc.ports.items() if any(tier <= 2 for tier in per.values())}
    assert everyone == _crossed(t, lids, loc.hosts)
    # a one-leaf job crosses only the leaf's ports to its hosts and their HCA ports: tier 1
    leaf1 = sorted(loc.hosts)[:HOSTS]
    assert {k for k, per in inc.ports.items() if any(per.get(h) == 1 for h in leaf1)} == _crossed(
        t, lids, leaf1
    )
    # spine 1's port down to leaf 1 (port 1) is on the routes toward host 0 of leaf 1 only
    assert inc.ports[spine_guid(0), 1] == {"f1n00001": 2}
    assert inc.ports[spine_guid(1), 1] == {"f1n00002": 2}


def test_two_placements_tie_on_leaf_scores_and_path_aware_takes_the_one_off_the_hot_spine():
    loc, t, lids, inc = _tree()
    hot = _hot_spine(t, 0)
    by_host = hot_ports_by_host(inc, hot)
    assert sorted(by_host) == ["f1n00001", "f1n00003", "f1n00005"]  # host 0 of each leaf
    # one whole host free per leaf: any two leaves are equal for the leaf-level score
    free = FreeState(gpus={"f1n00002": 8, "f1n00003": 8, "f1n00006": 8})
    req = Request(16, gpus_per_host=8)
    block = loc.hosts["f1n00001"].path[1]
    leaf_level = place(
        loc, free, req, Congestion({block: Mark(1.6, "PortXmitWait on uplinks")}, threshold=0.0)
    )
    assert leaf_level.placed == {"f1n00003": 8, "f1n00006": 8}
    assert (spine_guid(0), 2) in _crossed(t, lids, leaf_level.placed)  # toward f1n00003 over spine-01
    paths = PathCosts(frozenset({1}), {h: tuple(v) for h, v in by_host.items()})
    cong = Congestion({block: Mark(1.6, "PortXmitWait on uplinks")}, threshold=0.0, paths=paths)
    d = place(loc, free, req, cong)
    assert d.ok and d.placed == {"f1n00002": 8, "f1n00006": 8}
    assert (d.tier, d.units) == (leaf_level.tier, leaf_level.units) == (2, 2)
    assert not {k for k in _crossed(t, lids, d.placed) if k[0] == spine_guid(0)}  # off spine-01
    assert d.scoring == "paths" and d.hot_ports == []
    assert [p.name for p in d.avoided_ports] == ["spine-01 [2]"]
    assert d.congested == [] and d.avoided == []  # the block's mark is replaced by the paths
    assert (
        "paths: avoided hot ports spine-01 [2] (utilisation 35%, congestion 90%) that the routes of an equal placement would cross"
        in d.reasons
    )
    assert "paths: the routes of its 2 hosts cross no hot port" in d.reasons
    assert d.as_dict()["avoided_ports"] == [
        {"key": f"{spine_guid(0)}/2", "name": "spine-01 [2]", "utilisation": 0.35, "congestion": 0.9}
    ]
    assert place_rescanning(loc, free, req, cong) == d


def test_a_one_leaf_job_crosses_no_spine_and_keeps_its_compact_placement():
    loc, t, lids, inc = _tree()
    paths = PathCosts(
        frozenset({1}), {h: tuple(v) for h, v in hot_ports_by_host(inc, _hot_spine(t, 0)).items()}
    )
    free = FreeState(gpus={"f1n00001": 8, "f1n00002": 8, "f1n00004": 8, "f1n00006": 8})
    d = place(loc, free, Request(16, gpus_per_host=8), Congestion(paths=paths))
    assert d.placed == {"f1n00001": 8, "f1n00002": 8} and d.tier == 1  # one leaf: spine-01 not crossed
    assert d.hot_ports == [] and d.avoided_ports == [] and d.scoring == "paths"


def test_when_every_equal_placement_crosses_the_hot_spine_it_says_which_ports():
    loc, t, lids, inc = _tree()
    paths = PathCosts(
        frozenset({1}), {h: tuple(v) for h, v in hot_ports_by_host(inc, _hot_spine(t, 0)).items()}
    )
    free = FreeState(gpus={"f1n00001": 8, "f1n00003": 8})  # both routed over spine-01
    req = Request(16, gpus_per_host=8)
    d = place(loc, free, req, Congestion(paths=paths))
    assert d.ok and set(d.placed) == {"f1n00001", "f1n00003"}
    assert [p.name for p in d.hot_ports] == ["spine-01 [1]", "spine-01 [2]"]
    assert any(
        r.startswith("paths: its routes may cross hot ports spine-01 [1] (utilisation 35%, congestion 90%)")
        and r.endswith("no placement equal in tier and units avoids them")
        for r in d.reasons
    )
    avoiding = place(loc, free, req, Congestion(avoid=True, paths=paths))
    assert avoiding.code == PENDING_CONGESTION
    assert "16 GPUs fits only on hosts whose routes cross hot ports" in avoiding.reasons[0]


def test_routes_not_read_fall_back_to_the_leaf_marks_and_say_so():
    loc, _t, _lids, _inc = _tree()
    leaf1 = loc.hosts["f1n00001"].unit
    free = FreeState(gpus={"f1n00001": 8, "f1n00004": 8})
    cong = Congestion({leaf1: Mark(0.8, "PortXmitWait on uplinks")}, threshold=0.5, paths=PathCosts())
    d = place(loc, free, Request(8, gpus_per_host=8), cong)
    assert d.placed == {"f1n00004": 8} and d.avoided == [leaf1]  # today's leaf-level score
    assert d.scoring == "leaf"
    assert (
        "congestion scored per leaf and spine block (the uplinks' alarms): this fabric's routes are not read yet"
        in d.reasons
    )


def test_candidates_are_the_hosts_an_lft_sends_through_the_port_and_only_computes_those():
    loc, t, lids, inc = _tree()
    leaf1 = loc.hosts["f1n00001"].rails[0]
    up = (leaf1, HOSTS + 1)  # leaf 1's uplink to spine-01: remote host 0 of each other leaf
    down = (spine_guid(0), 2)  # spine-01 toward leaf 2: every LID of leaf 2 in its LFT
    assert candidates(t, lids, [up]) == {"f1n00003", "f1n00005"}
    assert candidates(t, lids, [down]) == {"f1n00003", "f1n00004"}
    ca = (t.ca_guids[0], t.ca_ports[0])  # an HCA port: its own host
    assert candidates(t, lids, [ca]) == {t.ca_names[0].split()[0]}
    part = route_incidence(t, lids, {h: s.path for h, s in loc.hosts.items()}, only={"f1n00003", "f1n00005"})
    assert part.hosts == {"f1n00003", "f1n00005"}
    assert part.ports[up] == inc.ports[up] == {"f1n00003": 2, "f1n00005": 2}
    assert part.ports[down] == {"f1n00003": 2} == inc.ports[down]


def test_when_the_units_must_cross_it_their_hosts_off_the_hot_spine_are_taken_first():
    loc, t, lids, inc = _tree()
    paths = PathCosts(
        frozenset({1}), {h: tuple(v) for h, v in hot_ports_by_host(inc, _hot_spine(t, 0)).items()}
    )
    # 3 hosts: all of one leaf and one of another; the full leaf's host 0 is reached over spine-01
    free = FreeState(gpus={"f1n00001": 8, "f1n00002": 8, "f1n00003": 8, "f1n00004": 8})
    req = Request(24, gpus_per_host=8)
    assert place(loc, free, req).placed == {"f1n00001": 8, "f1n00003": 8, "f1n00004": 8}
    d = place(loc, free, req, Congestion(paths=paths))
    assert d.placed == {"f1n00002": 8, "f1n00003": 8, "f1n00004": 8}  # leaf 1's host off spine-01
    assert [p.name for p in d.avoided_ports] == ["spine-01 [1]"]
    assert [p.name for p in d.hot_ports] == ["spine-01 [2]"]  # toward f1n00003: leaf 2 is taken whole
    assert not {k for k in _crossed(t, lids, d.placed) if k[0] == spine_guid(0)} - {(spine_guid(0), 2)}
    assert d.reasons[-2:] == [
        "paths: avoided hot ports spine-01 [1] (utilisation 35%, congestion 90%) by taking, in the same "
        "units, hosts whose routes do not cross them",
        "paths: its routes may cross hot ports spine-01 [2] (utilisation 35%, congestion 90%): no placement "
        "equal in tier and units avoids them",
    ]
    assert place_rescanning(loc, free, req, Congestion(paths=paths)) == d
