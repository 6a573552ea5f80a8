"""Which directed ports a host's traffic would cross, from the routes (pure, no Django): what
path-aware placement scores (issue 24 §2, ``scheduler.placement.PathCosts``).

A job's pairs exchange data over the switches' own forwarding tables: the packets of a pair
``(a, b)`` follow the LFT entries for ``b``'s LID from the switch ``a`` is cabled to (IBTA Vol 1
14.2.5.10; ``routing.paths``, the one walker of the LFTs). Under the all-to-all model (the
default, ``scheduler.jobpaths``) every member of a rail sends to every other, so the ports a
placement crosses are, for each chosen host ``b`` and each of its LIDs, the ports on the routes
toward that LID from the ingress switches of the other chosen hosts — plus each host's own HCA
ports. The ring model crosses a subset of them.

The placement engine does not know the other hosts in advance, so :func:`route_incidence`
records, per directed port and host, the **lowest tier** at which a job holding the host can
cross the port toward that host's LIDs: the tier of the smallest locality domain (unit, block,
spine group, fabric) holding both the host and some ingress switch whose route toward one of
the host's LIDs crosses the port. A job spanning tier ``T`` can only have sources inside the
host's tier-``T`` domain, so a port recorded at a tier above ``T`` is never crossed by it; a
port at or below ``T`` may be (exactly when a source sits on such an ingress switch). This is
conservative: a host counts as crossing a hot port if *some* placement of that span would.

Cost: one walk per (ingress switch, host LID) pair (``routing.paths.pair_paths``, memoised per
pair): ~ leaves × LIDs walks, computed once per routes snapshot and locality (the caller caches
it); a pass then only looks up the few hot ports (:func:`hot_ports_by_host`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from routing.paths import pair_paths
from routing.tables import CA, RouteTables

#: A tier above every real one: a port no route of the host's domain chain reaches
_NO_TIER = 5


@dataclass(frozen=True, slots=True)
class Incidence:
    """``ports``: directed port ``(node GUID, port number)`` → ``{host name: lowest tier}`` (module
    docstring); ``hosts``: the hosts whose LIDs were found in the tables (a host of the locality
    missing here has no routed LID: the engine cannot score it by its paths)."""

    ports: dict[tuple[str, int], dict[str, int]]
    hosts: frozenset[str]


def _lca_tier(a: Sequence[str], b: Sequence[str]) -> int:
    """The lowest tier (1-4) whose domain keys agree in two locality paths (``HostSite.path``)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x == y:
            return i + 1
    return _NO_TIER


def route_incidence(
    t: RouteTables,
    host_lids: Mapping[str, Sequence[int]],
    host_paths: Mapping[str, Sequence[str]],
    only: Collection[str] | None = None,
) -> Incidence:
    """The port → host → lowest-tier incidence of the module docstring.

    ``host_lids``: host name → the base LIDs of its HCA ports on this fabric (every rail);
    ``host_paths``: host name → its locality path (``HostSite.path``: unit key first). Ingress
    switches are the switches the given hosts' HCAs are cabled to; each is represented by one
    LID cabled to it (the route from a switch depends on the switch and the destination only).
    LIDs the tables do not know and HCAs not cabled to a switch are left out. ``only``: compute
    the ports of these hosts only (the ingress switches are still every given host's), e.g. the
    :func:`candidates` of the hot ports; ``Incidence.hosts`` are then those of them with a LID.
    """
    switch_path: dict[int, Sequence[str]] = {}
    rep: dict[int, int] = {}
    own: dict[str, list[tuple[int, int]]] = {}  # host -> [(lid, CA endpoint)]
    for h, lids in sorted(host_lids.items()):
        path = host_paths.get(h)
        if path is None:
            continue
        for lid in lids:
            o = t.lid_owner.get(lid)
            if o is None or o[0] != CA or t.ca_attach[o[1]] is None:
                continue
            own.setdefault(h, []).append((lid, o[1]))
            s = t.ca_attach[o[1]][0]
            switch_path.setdefault(s, path)
            rep.setdefault(s, lid)
    ingress = sorted(rep)
    reps = [rep[s] for s in ingress]
    by_code: dict[int, dict[str, int]] = {}
    tiers_from: dict[int, list[int]] = {}  # home switch -> the tier of each ingress switch
    for h, mine in own.items():
        if only is not None and h not in only:
            continue
        path = host_paths[h]
        for lid, e in mine:
            home, port = t.ca_attach[e]
            tiers = tiers_from.get(home)
            if tiers is None:
                tiers = tiers_from[home] = [_lca_tier(switch_path[s], path) for s in ingress]
            seen: dict[int, int] = {-1 - e: 1, home * 256 + port: 1}  # its HCA link, both ways
            walks = pair_paths(t, [(r, lid) for r in reps])
            for s, tier, codes in zip(ingress, tiers, walks, strict=True):
                if not codes or tier >= _NO_TIER or s == home:
                    continue
                for code in codes:
                    if code >= 0 and seen.get(code, _NO_TIER) > tier:  # < 0: the source's HCA port
                        seen[code] = tier
            for code, tier in seen.items():
                per = by_code.get(code)
                if per is None:
                    by_code[code] = {h: tier}
                elif per.get(h, _NO_TIER) > tier:
                    per[h] = tier
    ports = {t.port_key(code): per for code, per in by_code.items()}
    return Incidence(ports, frozenset(own) if only is None else frozenset(own).intersection(only))


def candidates(
    t: RouteTables, host_lids: Mapping[str, Sequence[int]], ports: Iterable[tuple[str, int]]
) -> set[str]:
    """The hosts whose routes can cross one of ``ports`` (``(node GUID, port number)``): a packet
    for LID ``d`` leaves switch ``s`` by ``lfts[s][d]`` only, so a switch port ``p`` is on a route
    toward a host only when ``lfts[s][d] == p`` for one of its LIDs ``d``; a CA port only for its
    own host. Exact filter, one scan of the switch's LFT per port: :func:`route_incidence` with
    ``only`` then walks the routes toward these hosts alone."""
    owner: dict[int, str] = {lid: h for h, lids in host_lids.items() for lid in lids}
    ca_host: dict[tuple[str, int], str] = {}
    for e, lid in enumerate(t.ca_lids):
        if lid in owner:
            ca_host[t.ca_guids[e], t.ca_ports[e]] = owner[lid]
    out: set[str] = set()
    for guid, p in ports:
        s = t.switch_index.get(guid)
        if s is None:
            if (guid, p) in ca_host:
                out.add(ca_host[guid, p])
            continue
        lft, b = t.lfts[s], bytes([p])
        i = lft.find(b)
        while i >= 0:
            h = owner.get(i)
            if h is not None:
                out.add(h)
            i = lft.find(b, i + 1)
    return out


def hot_ports_by_host(
    inc: Incidence, hot: Mapping[tuple[str, int], object]
) -> dict[str, list[tuple[int, object]]]:
    """Host → ``[(lowest tier, hot port), ...]`` for the hot ports (``hot``: port key → any value,
    e.g. a ``scheduler.placement.HotPort``) on its routes; hosts crossing none are left out."""
    out: dict[str, list[tuple[int, object]]] = {}
    for k, v in hot.items():
        for h, tier in inc.ports.get(k, {}).items():
            out.setdefault(h, []).append((tier, v))
    return out
