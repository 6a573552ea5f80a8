"""Paths over the stored forwarding tables (pure, no Django): a hop-by-hop trace and the
directed ports a set of (source, destination) pairs crosses.

Semantics are the switches' own: a packet for destination LID ``d`` entering switch ``s`` leaves
by ``lfts[s][d]`` (IBTA Vol 1 14.2.5.10, 18.2.4.3.3), so a path depends only on the switch it
enters the fabric at and on ``d``. :func:`trace` gives what ``ibtracert <src> <dst>`` prints
(infiniband-diags ``ibtracert.c``: the source port, each switch's in and out port, the
destination). :func:`pair_paths` and :func:`port_loads` serve many pairs at once: they walk each
distinct (ingress switch, destination) once and share the result between the pairs that have it,
so a 1,024-host all-pairs job costs ~ leaves x destinations walks, not hosts² walks.

Directed-port ids and indices: see :mod:`routing.tables`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .parsers import UNASSIGNED
from .tables import CA, NONE, SWITCH, RouteTables

#: More switches than this on one path is a forwarding loop (IBTA's DR paths stop at 64 hops).
MAX_HOPS = 64


class RouteError(ValueError):
    """No path: ``reason`` is ``"unknown_lid"``, ``"no_route"`` (LFT entry unassigned),
    ``"dead_end"`` (forwarded to an unlinked port), ``"wrong_end"`` (delivered to another node)
    or ``"loop"``; ``str()`` says where."""

    def __init__(self, reason: str, message: str):
        self.reason = reason
        super().__init__(message)


@dataclass(frozen=True)
class Hop:
    """One switch on a path: index, in port (0 when the path starts at the switch) and out port
    (0 when the path ends at the switch)."""

    switch: int
    in_port: int
    out_port: int


@dataclass(frozen=True)
class Trace:
    """A traced path: ``src``/``dst`` as ``(kind, index)`` (:data:`~routing.tables.SWITCH` or
    :data:`~routing.tables.CA`), the LIDs, and the switch hops in order."""

    src: tuple[int, int]
    dst: tuple[int, int]
    src_lid: int
    dst_lid: int
    hops: tuple[Hop, ...]

    def switch_ports(self, t: RouteTables) -> list[tuple[str, int]]:
        """``(switch GUID, port)`` in and out of each switch, as ``fabric.parsers.route.parse_ibtracert``
        reads them from ``ibtracert`` (port 0 of a path's end switch left out)."""
        out: list[tuple[str, int]] = []
        for h in self.hops:
            g = t.switch_guids[h.switch]
            if h.in_port:
                out.append((g, h.in_port))
            if h.out_port:
                out.append((g, h.out_port))
        return out


def _name(t: RouteTables, s: int) -> str:
    return f"{t.switch_names[s] or t.switch_guids[s]} (LID {t.switch_lids[s]})"


def trace(t: RouteTables, src_lid: int, dst_lid: int) -> Trace:
    """The path from the port with ``src_lid`` (a CA port or a switch) to ``dst_lid``.

    Raises:
        RouteError: a LID no endpoint or switch has, a CA not cabled to a switch, an unassigned
            entry, a forward to an unlinked port, delivery to another node, or a loop.
    """
    src, dst = t.lid_owner.get(src_lid), t.lid_owner.get(dst_lid)
    if src is None or dst is None:
        bad = src_lid if src is None else dst_lid
        raise RouteError("unknown_lid", f"LID {bad} is not the LID of a CA port or switch of this fabric")
    if src == dst:
        return Trace(src, dst, src_lid, dst_lid, ())
    if src[0] == CA:
        att = t.ca_attach[src[1]]
        if att is None:
            raise RouteError(
                "dead_end", f"{t.ca_names[src[1]]} port {t.ca_ports[src[1]]} is not cabled to a switch"
            )
        s, in_port = att
    else:
        s, in_port = src[1], 0
    hops: list[Hop] = []
    for _ in range(MAX_HOPS):
        p = t.out_port(s, dst_lid)
        if p == UNASSIGNED:
            raise RouteError("no_route", f"{_name(t, s)} has no LFT entry for LID {dst_lid}")
        if p == 0:
            if dst == (SWITCH, s):
                hops.append(Hop(s, in_port, 0))
                return Trace(src, dst, src_lid, dst_lid, tuple(hops))
            raise RouteError("wrong_end", f"{_name(t, s)} forwards LID {dst_lid} to itself (port 0)")
        hops.append(Hop(s, in_port, p))
        ports = t.peer[s]
        kind, idx, pp = ports[p] if p < len(ports) else (NONE, -1, 0)
        if kind == NONE:
            raise RouteError(
                "dead_end", f"{_name(t, s)} forwards LID {dst_lid} to port {p}, which has no link"
            )
        if kind == CA:
            if dst == (CA, idx):
                return Trace(src, dst, src_lid, dst_lid, tuple(hops))
            raise RouteError(
                "wrong_end",
                f"{_name(t, s)} port {p} delivers LID {dst_lid} to {t.ca_names[idx]}, not its owner",
            )
        s, in_port = idx, pp
    raise RouteError("loop", f"LID {src_lid} -> {dst_lid}: more than {MAX_HOPS} switches (forwarding loop)")


def _walker(t: RouteTables):
    """``walk(s, dlid) -> tuple of switch directed-port ids or None`` (no route), memoised."""
    lfts, peer, nxt = t.lfts, t.peer, t.next_switch
    owner = t.lid_owner
    memo: dict[tuple[int, int], tuple[int, ...] | None] = {}

    def walk(s0: int, dlid: int) -> tuple[int, ...] | None:
        key = (s0, dlid)
        got = memo.get(key, False)
        if got is not False:
            return got
        codes: list[int] = []
        s = s0
        result: tuple[int, ...] | None = None
        want = owner.get(dlid)
        for _ in range(MAX_HOPS):
            lft = lfts[s]
            p = lft[dlid] if dlid < len(lft) else UNASSIGNED
            if p == UNASSIGNED:
                break
            if p == 0:
                if want == (SWITCH, s):
                    result = tuple(codes)
                break
            codes.append(s * 256 + p)
            row = nxt[s]
            s2 = row[p] if p < len(row) else -1
            if s2 < 0:
                ports = peer[s]
                if p < len(ports) and ports[p][0] == CA and want == (CA, ports[p][1]):
                    result = tuple(codes)
                break
            s = s2
        memo[key] = result
        return result

    return walk


def _ingress(t: RouteTables, lid: int) -> tuple[int, int | None] | None:
    """``(ingress switch, CA egress port id or None)`` of the port with ``lid``, or None."""
    own = t.lid_owner.get(lid)
    if own is None:
        return None
    if own[0] == SWITCH:
        return own[1], None
    att = t.ca_attach[own[1]]
    return None if att is None else (att[0], -1 - own[1])


def pair_paths(t: RouteTables, pairs: Iterable[tuple[int, int]]) -> list[tuple[int, ...] | None]:
    """The directed ports each ``(source LID, destination LID)`` pair crosses, in order: the
    source CA's port (``-1 - e``), then each switch out port (``s * 256 + p``); None for a pair
    without a path (see :func:`trace` for why: call it on that pair). A pair with itself is ``()``.

    Pairs that enter at the same switch for the same destination share one walk (and one tuple of
    switch ports). Cost: one dict lookup per pair + one walk per distinct (ingress, dst).
    """
    walk = _walker(t)
    ing_cache: dict[int, tuple[int, int | None] | None] = {}
    out: list[tuple[int, ...] | None] = []
    append = out.append
    for src, dst in pairs:
        if src == dst:
            append(())
            continue
        ing = ing_cache.get(src, False)
        if ing is False:
            ing = ing_cache[src] = _ingress(t, src)
        if ing is None:
            append(None)
            continue
        rest = walk(ing[0], dst)
        if rest is None:
            append(None)
        elif ing[1] is None:
            append(rest)
        else:
            append((ing[1], *rest))
    return out


def port_loads(t: RouteTables, pairs: Sequence[tuple[int, int]]) -> tuple[Counter, list[tuple[int, int]]]:
    """How many of ``pairs`` (``(source LID, destination LID)``) cross each directed port.

    Returns ``(loads, unrouted)``: ``loads[port id]`` = number of pairs (ids as in
    :func:`pair_paths`; :meth:`RouteTables.port_key` names them), ``unrouted`` the pairs without a
    path. Pairs are grouped by (ingress switch, destination) first, so the cost is one walk per
    distinct group plus its length.
    """
    groups: Counter = Counter()
    loads: Counter = Counter()
    ing_cache: dict[int, tuple[int, int | None] | None] = {}
    unrouted: list[tuple[int, int]] = []
    for src, dst in pairs:
        if src == dst:
            continue
        ing = ing_cache.get(src, False)
        if ing is False:
            ing = ing_cache[src] = _ingress(t, src)
        if ing is None:
            unrouted.append((src, dst))
            continue
        groups[ing[0], dst] += 1
        if ing[1] is not None:
            loads[ing[1]] += 1
    walk = _walker(t)
    bad_groups = set()
    for (s, dst), n in groups.items():
        codes = walk(s, dst)
        if codes is None:
            bad_groups.add((s, dst))
            continue
        for c in codes:
            loads[c] += n
    if bad_groups:  # rare: take the unrouted pairs' CA egress back out, list them
        for src, dst in pairs:
            ing = ing_cache.get(src)
            if src != dst and ing is not None and (ing[0], dst) in bad_groups:
                unrouted.append((src, dst))
                if ing[1] is not None:
                    loads[ing[1]] -= 1
    return loads, unrouted


def group_loads(t: RouteTables, groups: Iterable[Sequence[int]]) -> tuple[Counter, int]:
    """How many ordered pairs within each group of LIDs cross each directed port: the all-to-all
    traffic model of a collective (every member sends to every other member of its group; e.g.
    one group per rail of a job: its hosts' HCA LIDs on that rail).

    Returns ``(loads, unrouted)``: ``loads[port id]`` summed over the groups (ids as in
    :func:`pair_paths`), counting routed pairs only, exactly as :func:`port_loads` over the listed
    pairs; ``unrouted`` the number of pairs without a path (a member whose LID is unknown or whose
    CA is not cabled makes all its pairs unrouted). Pairs are never listed: per group, each
    destination is walked once from each ingress switch of the group, weighted by the members that
    enter there, so a 1,024-member group costs ~ 1,024 x its leaves walks, not 1,024² pairs.
    """
    lfts, nxt, peer, owner = t.lfts, t.next_switch, t.peer, t.lid_owner
    acc: dict[int, int] = {}
    unrouted = 0
    for group in groups:
        n = len(group)
        at: dict[int, tuple[int, int | None]] = {}
        for lid in group:
            ing = _ingress(t, lid)
            if ing is not None:
                at[lid] = ing
        m = len(at)
        unrouted += n * (n - 1) - m * (m - 1)
        ingress: dict[int, int] = {}
        for s, _e in at.values():
            ingress[s] = ingress.get(s, 0) + 1
        items = list(ingress.items())
        failed: dict[int, set[int]] = {}  # ingress switch -> destinations it cannot reach
        for dst, (home, _e) in at.items():
            want = owner.get(dst)
            for s0, k in items:
                if s0 == home:
                    k -= 1
                    if not k:
                        continue
                s = s0
                codes = []
                ok = False
                for _ in range(MAX_HOPS):
                    lft = lfts[s]
                    p = lft[dst] if dst < len(lft) else UNASSIGNED
                    if p == UNASSIGNED:
                        break
                    if p == 0:
                        ok = want == (SWITCH, s)
                        break
                    codes.append(s * 256 + p)
                    row = nxt[s]
                    s2 = row[p] if p < len(row) else -1
                    if s2 < 0:
                        ports = peer[s]
                        ok = p < len(ports) and ports[p][0] == CA and want == (CA, ports[p][1])
                        break
                    s = s2
                if ok:
                    for c in codes:
                        acc[c] = acc.get(c, 0) + k
                else:
                    unrouted += k
                    failed.setdefault(s0, set()).add(dst)
        for lid, (s, e) in at.items():
            if e is not None:
                bad = failed.get(s, ())
                sent = m - 1 - (len(bad) - (lid in bad))
                if sent:
                    acc[e] = acc.get(e, 0) + sent
    return Counter(acc), unrouted
