"""The routing report (pure, no Django), as ``ibdiagnet --routing`` and ``check_lft_balance`` give it.

:func:`routing_report` reads one :class:`~routing.tables.RouteTables` and returns plain JSON:

* ``ports``: every switch out port with a link or a route: ``dest_lids`` (LIDs of CA ports and
  switches its LFT sends there), ``ca_lids`` (CA LIDs only: ``check_lft_balance``'s count) and
  ``paths`` (CA-to-CA paths crossing it: every ordered pair of distinct CA ports, by base LID);
* ``balance``: per switch, exactly ``check_lft_balance``'s rule (infiniband-diags
  ``check_lft_balance``, ``output_switch_port_usage``): count the CA LIDs per out port; leave out
  a port that carries none and has no link (Down), and a linked port that carries exactly
  ``2**LMC`` CA LIDs (the script's "directly connected host": it compares the far end's name with
  the hosts' names numerically, so in practice every Active port carrying exactly one host's LIDs
  is left out, also an up port that happens to carry one); the switch is *unbalanced* when the
  most-used port carries more than the least-used + 1. (The script reads ports 1-36 only.)
  ``leaves`` below is the semantic view of the same question;
* ``leaves``: per switch with CAs cabled to it, its up ports (cabled to switches): CA LIDs on each,
  ``max``/``min``, the ``share`` (total / ports, rounded up) and ``over_share`` (ports above it);
* ``hops``: histogram of CA-pair path lengths in links (two CAs on one switch: 2);
* ``credit_loops``: a cycle in the channel-dependency graph (Dally & Seitz 1987; ibdiagnet's
  credit-loop check, VL 0 only): nodes are switch-to-switch channels, an edge joins two channels
  some CA-to-switch-or-CA route uses one after the other. ``found`` and one ``cycle`` as
  ``[[switch GUID, port], ...]``;
* ``unrouted``: CA pairs without a path (count and the first few as LIDs).

Cost on Selene (666 switches, 4,341 CA ports): see ``bench/routing.py``.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from .parsers import UNASSIGNED
from .tables import CA, NONE, SWITCH, RouteTables

#: Unrouted pairs listed in the report (all are counted).
UNROUTED_SHOWN = 20


def _find_cycle(edges: dict[int, set[int]]) -> list[int] | None:
    """One cycle of the directed graph ``edges`` (iterative DFS), or None."""
    colour: dict[int, int] = {}
    for root in edges:
        if colour.get(root):
            continue
        stack = [(root, iter(edges.get(root, ())))]
        colour[root] = 1
        path = [root]
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                colour[node] = 2
                stack.pop()
                path.pop()
                continue
            c = colour.get(nxt, 0)
            if c == 1:
                return path[path.index(nxt) :]
            if c == 0:
                colour[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(edges.get(nxt, ()))))
    return None


def routing_report(t: RouteTables) -> dict[str, Any]:
    """The report of the module docstring for ``t``. Never raises on odd tables: broken routes
    count as unrouted pairs."""
    n_sw = len(t.switch_guids)
    # LIDs routed per out port, from the tables (itemgetter + Counter: C loops, not Python ones)
    dest: list[Counter] = []
    ca_dest: list[Counter] = []
    all_lids = sorted(t.lid_owner)
    ca_lid_set = [lid for lid in all_lids if t.lid_owner[lid][0] == CA]
    for s in range(n_sw):
        lft = t.lfts[s]
        d = Counter(lft[lid] for lid in all_lids if lid < len(lft))
        c = Counter(lft[lid] for lid in ca_lid_set if lid < len(lft))
        for cnt in (d, c):
            cnt.pop(UNASSIGNED, None)
            cnt.pop(0, None)
        dest.append(d)
        ca_dest.append(c)

    # CA-to-CA paths. For one destination the LFTs form an in-tree (each switch has one next hop):
    # sources enter at their switches (k there), flows add up towards the destination, so one pass
    # over the switches per destination counts every pair (no walk per source switch).
    ingress = [0] * n_sw
    ca_at: dict[int, int] = {}
    eps = [e for e, lid in enumerate(t.ca_lids) if lid]
    for e in eps:
        att = t.ca_attach[e]
        if att is not None:
            ingress[att[0]] += 1
            ca_at[e] = att[0]
    n_src = sum(ingress)
    paths_flat = [0] * (n_sw * 256)
    hops: Counter = Counter()
    edges: dict[int, set[int]] = {}
    unrouted = 0
    unrouted_shown: list[list[int]] = []
    lfts, nxt, peer = t.lfts, t.next_switch, t.peer
    switches = range(n_sw)
    for e_dst in eps:
        dlid = t.ca_lids[e_dst]
        home = ca_at.get(e_dst, -1)
        out = [lft[dlid] if dlid < len(lft) else UNASSIGNED for lft in lfts]
        nx = [-1] * n_sw
        children: list[list[int]] = [[] for _ in switches]
        roots = []
        for s in switches:
            p = out[s]
            if p == UNASSIGNED or p == 0:
                continue
            row = nxt[s]
            s2 = row[p] if p < len(row) else -1
            if s2 >= 0:
                nx[s] = s2
                children[s2].append(s)
            else:
                ports = peer[s]
                if p < len(ports) and ports[p][0] == CA and ports[p][1] == e_dst:
                    roots.append(s)
        # breadth-first from the switches that deliver to the destination: depth = switches on the path
        depth = [0] * n_sw
        order = []
        for r in roots:
            depth[r] = 1
            order.append(r)
        i = 0
        while i < len(order):
            s = order[i]
            i += 1
            ds = depth[s] + 1
            for c in children[s]:
                if not depth[c]:
                    depth[c] = ds
                    order.append(c)
        flow = ingress[:]
        if home >= 0:
            flow[home] -= 1  # the destination is not its own source
        for s in reversed(order):  # farthest first: a switch's flow is complete when it is pushed
            f = flow[s]
            if not f:
                continue
            k = ingress[s] - (s == home)
            if k:
                hops[depth[s] + 1] += k
            paths_flat[s * 256 + out[s]] += f
            s2 = nx[s]
            if s2 >= 0:
                flow[s2] += f
                if nx[s2] >= 0:
                    edges.setdefault(s * 256 + out[s], set()).add(s2 * 256 + out[s2])
        if len(order) < n_sw:  # sources whose switch does not reach the destination
            reached = set(order)
            for s0 in switches:
                k = ingress[s0] - (s0 == home)
                if k <= 0 or s0 in reached:
                    continue
                unrouted += k
                if len(unrouted_shown) < UNROUTED_SHOWN:
                    src = next(t.ca_lids[e] for e, at in ca_at.items() if at == s0 and e != e_dst)
                    unrouted_shown.append([src, dlid])
                s, seen = s0, set()  # their channels still depend on each other (a loop shows)
                while nx[s] >= 0 and s not in seen:
                    seen.add(s)
                    s2 = nx[s]
                    if nx[s2] >= 0:
                        edges.setdefault(s * 256 + out[s], set()).add(s2 * 256 + out[s2])
                    s = s2
    paths = [Counter() for _ in switches]
    for code, n in enumerate(paths_flat):
        if n:
            paths[code >> 8][code & 0xFF] = n

    ports_out: list[dict[str, Any]] = []
    balance: list[dict[str, Any]] = []
    leaves: list[dict[str, Any]] = []
    lmc = min((t.ca_lmc[e] for e in eps), default=0)
    per_host = 1 << lmc
    for s in range(n_sw):
        g, name = t.switch_guids[s], t.switch_names[s]
        nports = len(t.peer[s]) - 1
        counted: dict[int, int] = {}
        up: dict[int, int] = {}
        for p in range(1, nports + 1):
            kind, idx, pp = t.peer[s][p]
            if kind != NONE or dest[s][p] or paths[s][p]:
                far = None
                if kind == SWITCH:
                    far = {"guid": t.switch_guids[idx], "name": t.switch_names[idx], "port": pp}
                elif kind == CA:
                    far = {"guid": t.ca_guids[idx], "name": t.ca_names[idx], "port": pp}
                ports_out.append(
                    {
                        "guid": g,
                        "switch": name,
                        "port": p,
                        "peer": far,
                        "dest_lids": dest[s][p],
                        "ca_lids": ca_dest[s][p],
                        "paths": paths[s][p],
                    }  # fmt: skip
                )
            n = ca_dest[s][p]
            if kind == SWITCH:
                up[p] = n
            if n == 0 and kind == NONE:
                continue
            if kind != NONE and n == per_host:  # check_lft_balance's "directly connected" (see above)
                continue
            counted[p] = n
        if counted:
            hi, lo = max(counted.values()), min(counted.values())
            balance.append({"guid": g, "switch": name, "ports": {str(p): n for p, n in counted.items()}, "max": hi, "min": lo,
                            "unbalanced": hi > lo + 1})  # fmt: skip
        if ingress[s] and up:
            share = math.ceil(sum(up.values()) / len(up))
            leaves.append(
                {
                    "guid": g,
                    "switch": name,
                    "up_ports": {str(p): n for p, n in up.items()},
                    "max": max(up.values()),
                    "min": min(up.values()),
                    "share": share,
                    "over_share": sorted(p for p, n in up.items() if n > share),
                }  # fmt: skip
            )
    cycle = _find_cycle(edges)
    return {
        "switches": n_sw,
        "ca_ports": len(eps),
        "ca_pairs": n_src * (n_src - 1) if n_src else 0,
        "ports": ports_out,
        "balance": balance,
        "unbalanced_switches": [b["guid"] for b in balance if b["unbalanced"]],
        "leaves": leaves,
        "hops": {str(h): n for h, n in sorted(hops.items())},
        "credit_loops": {
            "found": cycle is not None,
            "channels": len({c for c in edges} | {c for v in edges.values() for c in v}),
            "dependencies": sum(len(v) for v in edges.values()),
            "cycle": [list(t.port_key(c)) for c in cycle] if cycle else [],
        },
        "unrouted": {"pairs": unrouted, "first": unrouted_shown},
    }
