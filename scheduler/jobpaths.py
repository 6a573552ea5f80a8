"""The links a job's traffic crosses (pure, no Django): its rails' collectives over the routes.

A job's *rails*: rail ``r`` is the HCA of index ``r`` of each of its hosts (``mlx5_3`` is rail 3,
as the fabric names it: ``scheduler.services.faults.rails``); its members are those HCAs' port LIDs, in
host-name order. The traffic model (``Job.traffic``, :class:`scheduler.choices.Traffic`) says
which ordered pairs of a rail exchange data:

* ``all-to-all`` (default): every member sends to every other (``routing.paths.group_loads``);
* ``ring``: member ``i`` sends to member ``i + 1`` and the last to the first (NCCL's ring).

The routes are the switches' own LFTs (``routing.paths``: a packet for LID ``d`` entering a
switch leaves by its LFT entry, IBTA Vol 1 14.2.5.10), so the result is the set of directed
ports (link egresses) those pairs cross, with how many pairs cross each — exactly what
``ibtracert`` prints for each pair, summed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from routing.parsers import UNASSIGNED
from routing.paths import MAX_HOPS, group_loads, pair_paths, port_loads
from routing.tables import CA, NONE, RouteTables

ALL_TO_ALL, RING = "all-to-all", "ring"


def rail_pairs(lids: Sequence[int], model: str) -> list[tuple[int, int]]:
    """The ordered ``(source LID, destination LID)`` pairs of one rail under ``model``.

    Raises:
        ValueError: an unknown model.
    """
    n = len(lids)
    if model == ALL_TO_ALL:
        return [(a, b) for a in lids for b in lids if a != b]
    if model == RING:
        if n < 2:
            return []
        if n == 2:
            return [(lids[0], lids[1]), (lids[1], lids[0])]
        return [(lids[i], lids[(i + 1) % n]) for i in range(n)]
    raise ValueError(f"unknown traffic model {model!r} (all-to-all or ring)")


def job_port_loads(
    t: RouteTables, rails: Mapping[int, Sequence[int]], model: str = ALL_TO_ALL
) -> tuple[dict[int, Counter], int]:
    """The directed ports each rail's traffic crosses and how many of its pairs cross each.

    ``rails``: rail number → its members' LIDs (host order). Returns ``(per_rail, unrouted)``:
    ``per_rail[rail][port id]`` = pairs of that rail crossing the port (port ids as in
    ``routing.paths.pair_paths``: ``s * 256 + p`` a switch out port, ``-1 - e`` a CA's uplink;
    ``t.port_key`` names them), ``unrouted`` the pairs without a path (all rails).

    Raises:
        ValueError: an unknown model.
    """
    out: dict[int, Counter] = {}
    unrouted = 0
    for rail, lids in sorted(rails.items()):
        lids = [x for x in lids if x]
        if model == ALL_TO_ALL:
            loads, bad = group_loads(t, [lids])
        else:
            loads, missing = port_loads(t, rail_pairs(lids, model))
            bad = len(missing)
        unrouted += bad
        out[rail] = Counter({k: v for k, v in loads.items() if v})
    return out, unrouted


def dead_ends(t: RouteTables, pairs: Sequence[tuple[int, int]]) -> Counter:
    """Where the pairs without a path stop at a port with no link: ``{port id: pairs}`` — the
    switch out port (``s * 256 + p``) an LFT forwards to whose cable is down or gone from the
    topology (``routing.paths.RouteError`` ``"dead_end"``), or the source CA's own port when the
    CA is not cabled. Pairs without a path for another reason (no LFT entry, loop) are not
    counted. Only the unrouted pairs are walked (``pair_paths`` first)."""
    out: Counter = Counter()
    for (src, dst), path in zip(pairs, pair_paths(t, pairs), strict=True):
        if path is not None:
            continue
        own = t.lid_owner.get(src)
        if own is None:
            continue
        if own[0] == CA:
            att = t.ca_attach[own[1]]
            if att is None:
                out[-1 - own[1]] += 1
                continue
            s = att[0]
        else:
            s = own[1]
        for _ in range(MAX_HOPS):
            p = t.out_port(s, dst)
            if p in (UNASSIGNED, 0):
                break
            ports = t.peer[s]
            kind, idx, _pp = ports[p] if p < len(ports) else (NONE, -1, 0)
            if kind == NONE:
                out[s * 256 + p] += 1
                break
            if kind == CA:
                break
            s = idx
    return out
