"""Server-side layout of the network map, so that the browser only draws.

The map is a layered drawing of the fat tree (Sugiyama style, without the crossing-minimisation
sweeps that would cost seconds at 5,000 nodes):

* rows from the top: switches of unknown tier and routers, core, spine, leaf, then hosts;
* leaves ordered by their name (``Node.name``: node-name map, else description) in natural order ("L2" before "L10"), as operators name
  switches by rack and position; spines and core switches ordered by the barycentre of the
  leaves/spines they connect to, hosts by the barycentre of their leaves (one barycentre pass);
* the CAs of one host (``Node.host``, from the host name in the NodeDescription) stacked in one
  column below the leaves, so a multi-rail DGX is one column under its rails' leaves; a CA with no
  host linked only to switches above the leaves (a SHARP Aggregation Node of a spine) is drawn
  just below its switch;
* parallel cables between the same two nodes drawn as one edge with a count, its width/speed the
  slowest of them and its state the lowest (Down < Init < Armed < Active, IBTA PortState);
* a cable that went down stays on the map, Down, while its ``link.down`` alarm is open (the link
  row is gone: the alarm's key names both ends): ``edges.down`` counts such cables per edge
  (``edges.n`` counts the live ones), so a flap shows where it happened until ``link.up`` clears it.

:func:`compute_layout` is pure (plain lists in, plain lists out); :func:`build_map` reads the
database with four flat ``values_list`` queries and returns the compact JSON of
``/api/fabric/fabrics/{id}/map/`` (parallel arrays, not one object per node).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

#: Tier values of ``fabric.choices.Tier`` (kept literal: this module's layout part is pure).
HOST, LEAF, SPINE, CORE, UNKNOWN = 0, 1, 2, 3, 9
#: NodeType values in the compact payload.
NODE_TYPE_CODES = {"ca": 0, "switch": 1, "router": 2}

_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple:
    """Sort key that orders embedded numbers by value: ``leaf2`` < ``leaf10``."""
    return tuple(int(p) if p.isdigit() else p.lower() for p in _DIGITS.split(text or ""))


@dataclass(frozen=True)
class LayoutNode:
    """One node for the layout: ``kind`` 0 CA, 1 switch, 2 router; ``group`` the host key or None."""

    kind: int
    tier: int
    name: str
    group: str | None = None


def compute_layout(
    nodes: Sequence[LayoutNode], edges: Sequence[tuple[int, int]]
) -> tuple[list[float], list[float]]:
    """Return ``(x, y)`` positions (graph units; y grows upwards, the top row is y = 0).

    Args:
        nodes: the nodes, addressed by index.
        edges: pairs of node indexes (each unordered pair once; self-loops ignored).

    Rows are spread over the same width (the longest row has one unit per item), tiers are
    ``gap`` apart with ``gap`` a fraction of the width so the drawing keeps a readable aspect.
    """
    n = len(nodes)
    x = [0.0] * n
    y = [0.0] * n
    if n == 0:
        return x, y
    neighbours: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        if a != b:
            neighbours[a].append(b)
            neighbours[b].append(a)

    def is_switch_row(i: int, tier: int) -> bool:
        return nodes[i].kind == 1 and nodes[i].tier == tier

    leaves = sorted((i for i in range(n) if is_switch_row(i, LEAF)), key=lambda i: natural_key(nodes[i].name))

    def barycentre(i: int, placed: dict[int, float]) -> float | None:
        vals = [placed[j] for j in neighbours[i] if j in placed]
        return sum(vals) / len(vals) if vals else None

    def sort_by_barycentre(items: list[int], placed: dict[int, float]) -> list[int]:
        keyed = []
        for i in items:
            bc = barycentre(i, placed)
            keyed.append(((1, 0.0) if bc is None else (0, bc), natural_key(nodes[i].name), i))
        keyed.sort()
        return [i for _, _, i in keyed]

    def normalise(row: list[int]) -> dict[int, float]:
        # Positions as fractions of the row so rows of different lengths compare.
        m = max(len(row), 1)
        return {i: (k + 0.5) / m for k, i in enumerate(row)}

    leaf_pos = normalise(leaves)
    spines = sort_by_barycentre([i for i in range(n) if is_switch_row(i, SPINE)], leaf_pos)
    spine_pos = normalise(spines)
    cores = sort_by_barycentre([i for i in range(n) if is_switch_row(i, CORE)], spine_pos)
    placed = {**leaf_pos, **spine_pos, **normalise(cores)}
    others = sort_by_barycentre(
        [
            i
            for i in range(n)
            if nodes[i].kind != 0 and not any(is_switch_row(i, t) for t in (LEAF, SPINE, CORE))
        ],
        placed,
    )
    placed.update(normalise(others))

    # A CA without host whose switches are all above the leaves (a SHARP Aggregation Node on a
    # spine, a management HCA on a core switch) is drawn just below its switch, not in the hosts.
    satellites: list[tuple[int, int]] = []
    upper = {i for i in placed if i not in leaf_pos}
    # Hosts: CAs grouped by host key; a CA without host is its own group.
    groups: dict[str, list[int]] = defaultdict(list)
    for i in range(n):
        if nodes[i].kind == 0:
            if nodes[i].group is None and neighbours[i] and all(j in upper for j in neighbours[i]):
                satellites.append((i, neighbours[i][0]))
                continue
            groups[nodes[i].group or f"\x00{i}"].append(i)
    keyed_groups = []
    for key, members in groups.items():
        members.sort(key=lambda i: natural_key(nodes[i].name))
        vals = [placed[j] for i in members for j in neighbours[i] if j in placed]
        bc = (0, sum(vals) / len(vals)) if vals else (1, 0.0)
        keyed_groups.append((bc, natural_key(key.lstrip("\x00") or nodes[members[0]].name), members))
    keyed_groups.sort(key=lambda t: (t[0], t[1]))
    host_groups = [members for _, _, members in keyed_groups]

    rows = [others, cores, spines, leaves]
    width = float(max(len(others), len(cores), len(spines), len(leaves), len(host_groups), 1))
    gap = max(width / 8.0, 4.0)
    stack = min(gap / 10.0, 0.9)

    level = 0
    for row in rows:
        if not row:
            continue
        step = width / len(row)
        for k, i in enumerate(row):
            x[i] = round((k + 0.5) * step, 3)
            y[i] = round(-level * gap, 3)
        level += 1
    if host_groups:
        step = width / len(host_groups)
        top = -level * gap
        for k, members in enumerate(host_groups):
            for s, i in enumerate(members):
                x[i] = round((k + 0.5) * step, 3)
                y[i] = round(top - s * stack, 3)
    for i, parent in satellites:
        x[i] = x[parent]
        y[i] = round(y[parent] - gap / 4.0, 3)
    return x, y


# --- layers other apps add ----------------------------------------------------------------------


@dataclass(frozen=True)
class MapLayer:
    """A layer another app draws on a fabric's map (the devices app's Ethernet links):
    ``build(fabric, payload) -> dict`` returns its part of the payload (``payload[name]``; it may
    read the IB part, e.g. the nodes' positions), ``cache_part(fabric) -> str`` a string that
    changes whenever its part would; the whole part goes into the light ``?part=edges`` payload,
    which an open map applies in place, the layer's nodes included (they are drawn apart from the
    IB layout or on its nodes, so the IB drawing does not move: they are not in ``nodes_version``)."""

    name: str
    build: object
    cache_part: object


#: registered layers, in drawing order (``AppConfig.ready()`` calls :func:`register_layer`)
LAYERS: dict[str, MapLayer] = {}


def register_layer(name: str, build, cache_part) -> None:
    """Add (or replace) the map layer ``name`` (see :class:`MapLayer`)."""
    LAYERS[name] = MapLayer(name, build, cache_part)


# --- overlays: what the other apps add to the IB drawing ------------------------------------------
# The fabric draws nodes and links; the apps above it register, in their ``AppConfig.ready()``,
# what they know about them (``register_overlay``), so this module imports none of them. Without
# an overlay the map is drawn without it (no Down cables, no rates, every node in a tier group).


def _no_rows(*args) -> list:
    return []


#: overlay name → provider (defaults: nothing to add)
OVERLAYS: dict[str, object] = {
    # events: object keys of the open ``link.down`` alarms of a fabric (cables drawn Down)
    "down_link_keys": _no_rows,
    # events: a string that changes whenever those alarms do (part of :func:`map_cache_key`)
    "down_links_stamp": lambda fabric: "0:None",
    # events: ``(port_id, object_key)`` of every open alarm of a fabric (``live.alarms``)
    "alarm_ports": _no_rows,
    # events: the open alarms on ``ports`` or named by ``keys`` (``map_edge_detail``'s ``alarms``)
    "edge_alarms": _no_rows,
    # telemetry: ``(port_id, utilisation, congestion)`` of the ports with a rate (``live``)
    "port_rates": _no_rows,
    # scheduler: ``{port key: [{"job", "name", "state", "paths", "share", "url"}]}`` of the jobs
    # whose routed paths leave by ``port keys`` (``fabric.keys.port_key``; share estimated), asked
    # only for the cables of the link panel (``map_edge_detail``'s ``jobs``), never for the map
    "edge_jobs": lambda fabric, keys, user=None: {},
    # scheduler: the locality domains of a fabric (``key``, ``name``, ``tier``, ``switches``,
    # ``hosts``: ``scheduler.locality.Domain``), the map's groups
    "domains": _no_rows,
}


def register_overlay(name: str, provider) -> None:
    """Set the provider of overlay ``name`` (one of :data:`OVERLAYS`; a typo raises KeyError)."""
    if name not in OVERLAYS:
        raise KeyError(f"no map overlay {name!r}: one of {', '.join(OVERLAYS)}")
    OVERLAYS[name] = provider


# --- database part ------------------------------------------------------------------------------


def build_map(fabric) -> dict:
    """The compact map payload of ``fabric`` (see the module docstring and ``MapSerializer``).

    ``nodes`` holds parallel arrays indexed by node position; ``edges.a``/``edges.b`` are node
    positions; ``edges.speed``/``edges.width`` index ``speeds``/``widths``; ``edges.state`` is the
    IBTA PortState value (0 = unknown, as in files, which carry no state); ``edges.rate`` Gb/s.
    """
    from ..models import Discovery, Link, Node, Port
    from .serializers import link_state

    rows = list(
        Node.objects.filter(fabric=fabric)
        .order_by("id")
        .values_list("id", "node_guid", "node_type", "tier", "lid", "name", "host_id", "host__name")
    )
    index = {row[0]: k for k, row in enumerate(rows)}
    host_names: list[str] = []
    host_index: dict[int, int] = {}
    lids: list[int | None] = [row[4] for row in rows]
    extra_lids: list[list[int]] = []
    for node_id, lid in (
        Port.objects.filter(node__fabric=fabric, lid__isnull=False, node__lid__isnull=True)
        .order_by("node_id", "port_num")
        .values_list("node_id", "lid")
    ):
        k = index[node_id]
        if lids[k] is None:
            lids[k] = lid
        elif lids[k] != lid:
            extra_lids.append([lid, k])

    layout_nodes = []
    host_of: list[int] = []
    for _, _, node_type, tier, _, name, host_id, host_name in rows:
        kind = NODE_TYPE_CODES.get(node_type, 0)
        if host_id is not None and host_id not in host_index:
            host_index[host_id] = len(host_names)
            host_names.append(host_name)
        host_of.append(host_index[host_id] if host_id is not None else -1)
        layout_nodes.append(LayoutNode(kind, tier, name, host_name if host_id is not None else None))

    agg: dict[tuple[int, int], list] = {}
    self_loops = 0
    link_rows = (
        Link.objects.filter(fabric=fabric)
        .order_by()
        .values_list(
            "port_a__node_id",
            "port_b__node_id",
            "port_a__state",
            "port_b__state",
            "width",
            "speed",
            "rate_gbps",
        )
    )
    n_links = 0
    for na, nb, sa, sb, width, speed, rate in link_rows:
        n_links += 1
        a, b = index[na], index[nb]
        if a == b:
            self_loops += 1
            continue
        key = (a, b) if a < b else (b, a)
        state = link_state(sa, sb)
        cur = agg.get(key)
        if cur is None:
            agg[key] = [1, state, width, speed, rate]
            continue
        cur[0] += 1
        if state and (not cur[1] or state < cur[1]):
            cur[1] = state
        if rate is not None and (cur[4] is None or rate < cur[4]):
            cur[2], cur[3], cur[4] = width, speed, rate

    down = _down_links(fabric, {row[1]: k for k, row in enumerate(rows)})
    for key in down:
        cur = agg.get(key)
        if cur is None:
            agg[key] = [0, 1, "", "", None]
        else:
            cur[1] = 1  # PortState Down
    xs, ys = compute_layout(layout_nodes, list(agg))
    speeds: list[str] = []
    widths: list[str] = []
    speed_idx: dict[str, int] = {}
    width_idx: dict[str, int] = {}
    edges = {"a": [], "b": [], "n": [], "down": [], "state": [], "speed": [], "width": [], "rate": []}
    for (a, b), (count, state, width, speed, rate) in agg.items():
        if speed not in speed_idx:
            speed_idx[speed] = len(speeds)
            speeds.append(speed)
        if width not in width_idx:
            width_idx[width] = len(widths)
            widths.append(width)
        edges["a"].append(a)
        edges["b"].append(b)
        edges["n"].append(count)
        edges["down"].append(down.get((a, b), 0))
        edges["state"].append(state)
        edges["speed"].append(speed_idx[speed])
        edges["width"].append(width_idx[width])
        edges["rate"].append(rate)

    type_counts = {"switches": 0, "cas": 0, "routers": 0}
    for node in layout_nodes:
        type_counts[("cas", "switches", "routers")[node.kind]] += 1
    last = Discovery.objects.filter(fabric=fabric).order_by("-id").values_list("id", flat=True).first()
    nodes = {
        "id": [r[0] for r in rows],
        "guid": [r[1] for r in rows],
        "name": [r[5] for r in rows],
        "type": [n.kind for n in layout_nodes],
        "tier": [r[3] for r in rows],
        "lid": lids,
        "host": host_of,
        "x": xs,
        "y": ys,
    }
    payload = {
        "fabric": {"id": fabric.pk, "name": fabric.name},
        "discovery": last,
        "nodes_version": "",
        "counts": {
            **type_counts,
            "links": n_links,
            "edges": len(edges["a"]),
            "self_loops": self_loops,
            "down_links": sum(down.values()),
        },  # fmt: skip
        "nodes": nodes,
        "hosts": host_names,
        "extra_lids": extra_lids,
        "edges": edges,
        "speeds": speeds,
        "widths": widths,
    }
    for layer in LAYERS.values():
        payload[layer.name] = layer.build(fabric, payload)
    payload["groups"] = build_groups(fabric, payload)
    # the IB nodes only: a layer's nodes come and go in place with its part (MapLayer)
    payload["nodes_version"] = _digest([nodes, host_names, extra_lids])
    return payload


def _digest(value) -> str:
    """A short digest of a JSON-able value (the map's ``nodes_version``)."""
    return hashlib.sha1(json.dumps(value, separators=(",", ":")).encode()).hexdigest()[:16]


def edges_part(payload: dict) -> dict:
    """The light part of a :func:`build_map` payload an open map refreshes in place: ``fabric``,
    ``discovery``, ``counts``, ``nodes_version`` (a digest of everything drawn of the IB nodes:
    ids, names, positions, LIDs, hosts; when it differs from the drawn one the map must be
    reloaded), ``edges``, ``speeds``, ``widths`` and each layer's part (nodes and edges, applied in
    place)."""
    keep = ("fabric", "discovery", "counts", "nodes_version", "edges", "speeds", "widths", *LAYERS)
    return {k: payload[k] for k in keep if k in payload}


def _down_links(fabric, index: dict[str, int]) -> dict[tuple[int, int], int]:
    """``{(node index, node index): cables}`` of the open ``link.down`` alarms of ``fabric`` whose
    two end nodes are on the map (lower index first; a loopback is not drawn)."""
    from ..keys import split_link_key

    out: dict[tuple[int, int], int] = {}
    for key in OVERLAYS["down_link_keys"](fabric):
        try:
            (ga, _), (gb, _) = split_link_key(key)
        except ValueError:
            continue
        a, b = index.get(ga), index.get(gb)
        if a is None or b is None or a == b:
            continue
        pair = (a, b) if a < b else (b, a)
        out[pair] = out.get(pair, 0) + 1
    return out


def map_cache_key(fabric) -> str:
    """A cache key that changes with every discovery, every node/link count change, every
    change of the open ``link.down`` alarms (drawn as Down cables), every node-name map change
    (``Fabric.node_name_map_changed``: the names are drawn), every switch role change (the
    groups follow the scheduler's locality, which skips storage and management switches) and
    with every registered layer's ``cache_part``."""
    from ..choices import FabricRole
    from ..models import Discovery, Link, Node

    last = Discovery.objects.filter(fabric=fabric).order_by("-id").values_list("id", flat=True).first()
    nodes = Node.objects.filter(fabric=fabric).count()
    # switch roles decide the groups (a storage switch is in no locality unit)
    roles = _digest(
        list(
            Node.objects.filter(fabric=fabric)
            .exclude(role=FabricRole.COMPUTE)
            .order_by("id")
            .values_list("id", "role")
        )
    )
    links = Link.objects.filter(fabric=fabric).count()
    down = OVERLAYS["down_links_stamp"](fabric)
    layers = ":".join(f"{layer.name}={layer.cache_part(fabric)}" for layer in LAYERS.values())
    return (
        f"weft:fabric-map:v4:{fabric.pk}:{last}:{fabric.last_discovery_id}:{nodes}:{links}:"
        f"{down}:{_stamp(fabric.node_name_map_changed)}:{roles}:{layers}"
    )


def _stamp(when) -> str:
    return f"{when.timestamp():.6f}" if when is not None else "-"


# --- grouping at scale (issue 14, "The map at Selene scale") -------------------------------------

#: Above this many nodes the map opens with its groups collapsed (a group drawn as one node).
GROUP_ABOVE = 300
#: Group kinds, from the scheduler's locality tiers (``scheduler.locality.Domain.tier``), plus
#: ``tier``: the nodes no locality domain holds, grouped by their tier and type.
UNIT, BLOCK, SPINE_GROUP, TIER_GROUP = "unit", "block", "spine_group", "tier"
_DOMAIN_KIND = {1: UNIT, 2: BLOCK, 3: SPINE_GROUP}
_TIER_LABEL = {
    HOST: "hosts",
    LEAF: "leaves",
    SPINE: "spines",
    CORE: "cores",
    UNKNOWN: "switches of unknown tier",
}


def build_groups(fabric, payload: dict) -> dict:
    """The groups of the map of ``fabric``: ``{"key", "name", "kind", "n", "x", "y"}`` parallel
    lists plus ``member`` (one group index per node of ``payload["nodes"]``) and ``collapsed``
    (True when the map has more than :data:`GROUP_ABOVE` nodes: opened collapsed).

    Groups are the scheduler's locality domains (overlay ``domains``: ``scheduler.maplayer``, from
    ``scheduler.topology.build_locality``, the one locality model): a unit (a leaf, or the rail leaves of a pod, with the CAs of its hosts), a
    block (its spine switches), a spine group (its core switches). Every node no domain holds
    (a storage fabric, a switch with another role, an unplaced host's CA) goes into a group of its
    tier and type (``kind`` ``tier``), so every node has a group. ``x``/``y`` are the mean layout
    position of the members (graph units, as the nodes'); ``n`` the member count.
    """
    nodes = payload["nodes"]
    count = len(nodes["id"])
    member = [-1] * count
    keys: list[str] = []
    names: list[str] = []
    kinds: list[str] = []
    if count == 0:
        return {
            "key": [],
            "name": [],
            "kind": [],
            "n": [],
            "x": [],
            "y": [],
            "member": [],
            "collapsed": False,
        }
    by_guid = {g: i for i, g in enumerate(nodes["guid"])}
    cas_of_host: dict[str, list[int]] = defaultdict(list)
    for i, h in enumerate(nodes["host"]):
        if h >= 0 and nodes["type"][i] != 1:
            cas_of_host[payload["hosts"][h]].append(i)
    domains = sorted(
        (d for d in OVERLAYS["domains"](fabric) if d.tier in _DOMAIN_KIND),
        key=lambda d: (-d.tier, natural_key(d.name), d.key),
    )
    for d in domains:
        members = [by_guid[g] for g in d.switches if g in by_guid]
        if d.tier == 1:
            members += [i for h in d.hosts for i in cas_of_host.get(h, ())]
        members = [i for i in members if member[i] < 0]
        if not members:
            continue
        for i in members:
            member[i] = len(keys)
        keys.append(d.key)
        names.append(d.name)
        kinds.append(_DOMAIN_KIND[d.tier])
    rest: dict[tuple[int, int], int] = {}
    for i in range(count):
        if member[i] >= 0:
            continue
        kind, tier = nodes["type"][i], nodes["tier"][i]
        slot = (kind, tier if kind == 1 else HOST)
        if slot not in rest:
            rest[slot] = len(keys)
            label = _TIER_LABEL.get(slot[1], "switches") if kind == 1 else ("routers" if kind == 2 else "CAs")
            keys.append(f"f{fabric.pk}/tier/{kind}-{slot[1]}")
            names.append(f"other {label}")
            kinds.append(TIER_GROUP)
        member[i] = rest[slot]
    sums = [[0, 0.0, 0.0] for _ in keys]
    for i, g in enumerate(member):
        s = sums[g]
        s[0] += 1
        s[1] += nodes["x"][i]
        s[2] += nodes["y"][i]
    return {
        "key": keys,
        "name": names,
        "kind": kinds,
        "n": [s[0] for s in sums],
        "x": [round(s[1] / s[0], 3) for s in sums],
        "y": [round(s[2] / s[0], 3) for s in sums],
        "member": member,
        "collapsed": count > GROUP_ABOVE,
    }


def collapse(payload: dict) -> dict:
    """The map as drawn with every group collapsed (pure): ``nodes`` the group count and
    ``edges`` ``{(group, group): cables}`` between distinct groups (cables inside a group are not
    drawn). What the browser draws first above :data:`GROUP_ABOVE` nodes (the map's scripts do the same
    aggregation, for any mix of collapsed and expanded groups)."""
    member = payload["groups"]["member"]
    E = payload["edges"]
    out: dict[tuple[int, int], int] = defaultdict(int)
    for a, b, n, down in zip(E["a"], E["b"], E["n"], E["down"], strict=True):
        ga, gb = member[a], member[b]
        if ga != gb:
            out[(ga, gb) if ga < gb else (gb, ga)] += n + down
    return {"nodes": len(payload["groups"]["key"]), "edges": dict(out)}


def build_live(fabric, payload: dict) -> dict:
    """Live state of the drawn edges, read at each request (not cached with the layout):
    ``util`` and ``cong`` the highest utilisation and congestion (0..1, ``telemetry.PortCounters``
    of the latest sweep; None when no port of the edge has a rate: a file import, a first sample)
    over both ends of every cable of the edge; ``alarms`` the open alarms on those ports or named
    by a ``link.*`` key between the edge's nodes. Lists parallel to ``payload["edges"]``."""
    from ..keys import split_link_key
    from ..models import Link

    nodes = payload["nodes"]
    index = {pk: k for k, pk in enumerate(nodes["id"])}
    E = payload["edges"]
    edge_of = {(a, b): e for e, (a, b) in enumerate(zip(E["a"], E["b"], strict=True))}
    n_edges = len(E["a"])
    util: list[float | None] = [None] * n_edges
    cong: list[float | None] = [None] * n_edges
    alarms = [0] * n_edges
    port_edge: dict[int, int] = {}
    for pa, pb, na, nb in (
        Link.objects.filter(fabric=fabric)
        .order_by()
        .values_list("port_a_id", "port_b_id", "port_a__node_id", "port_b__node_id")
    ):
        a, b = index.get(na), index.get(nb)
        if a is None or b is None or a == b:
            continue
        e = edge_of.get((a, b) if a < b else (b, a))
        if e is not None:
            port_edge[pa] = port_edge[pb] = e
    if port_edge:
        for port_id, u, c in OVERLAYS["port_rates"](fabric):
            e = port_edge.get(port_id)
            if e is None:
                continue
            if u is not None and (util[e] is None or u > util[e]):
                util[e] = round(u, 4)
            if c is not None and (cong[e] is None or c > cong[e]):
                cong[e] = round(c, 4)
    guid_index = {g: k for k, g in enumerate(nodes["guid"])}
    for port_id, key in OVERLAYS["alarm_ports"](fabric):
        e = port_edge.get(port_id) if port_id is not None else None
        if e is None and key.count("/") >= 2:
            try:
                (ga, _), (gb, _) = split_link_key(key)
            except ValueError:
                continue
            a, b = guid_index.get(ga), guid_index.get(gb)
            if a is not None and b is not None and a != b:
                e = edge_of.get((a, b) if a < b else (b, a))
        if e is not None:
            alarms[e] += 1
    return {"util": util, "cong": cong, "alarms": alarms}


def map_edge_detail(fabric, params, user=None) -> dict:
    """The cables between two nodes of ``fabric`` with both ends' counters and the open alarms on
    them (see ``FabricViewSet.map_edge`` for the shape). ``params`` holds ``a`` and ``b``, node
    ids; ``user`` the reader (the jobs crossing the cables are those they may read). Raises
    ``ValidationError`` (400) for a missing or bad id, ``NotFound`` (404) when a node is not on
    ``fabric``."""
    from django.db.models import Q
    from rest_framework.exceptions import NotFound, ValidationError

    from ..keys import link_key, port_key
    from ..models import Link, Node

    ids = {}
    for name in ("a", "b"):
        raw = params.get(name, "")
        if not str(raw).isdigit():
            raise ValidationError({name: [f"a node id (integer) is required, got {raw!r}"]})
        ids[name] = int(raw)
    ends = {n.pk: n for n in Node.objects.filter(fabric=fabric, pk__in=ids.values())}
    for pk in ids.values():
        if pk not in ends:
            raise NotFound(f"node {pk} is not on fabric {fabric.name}")
    a, b = ends[ids["a"]], ends[ids["b"]]
    links = (
        Link.objects.filter(fabric=fabric)
        .filter(Q(port_a__node=a, port_b__node=b) | Q(port_a__node=b, port_b__node=a))
        .select_related("port_a__node", "port_b__node", "port_a__counters", "port_b__counters")
        .order_by("id")
    )

    def end(port) -> dict:
        c = getattr(port, "counters", None)
        return {
            "port_id": port.pk, "port_num": port.port_num, "node": port.node_id,
            "state": port.get_state_display(), "width": port.width, "speed": port.speed,
            "rate_gbps": port.rate_gbps,
            "utilisation": c.utilisation if c else None, "congestion": c.congestion if c else None,
            "xmit_wait_per_s": c.xmit_wait_per_s if c else None,
            "xmit_bytes_per_s": c.xmit_bytes_per_s if c else None,
            "rcv_bytes_per_s": c.rcv_bytes_per_s if c else None,
            "error_deltas": (c.error_deltas or {}) if c else {}, "stale": bool(c and c.stale),
        }  # fmt: skip

    cables = []
    ports: list[int] = []
    keys: list[str] = []
    ends: list[tuple[str, str, str]] = []  # (egress port key, from end, to end) of each direction
    for link in links:
        pa, pb = (link.port_a, link.port_b) if link.port_a.node_id == a.pk else (link.port_b, link.port_a)
        cables.append({"a": end(pa), "b": end(pb)})
        ports += [pa.pk, pb.pk]
        ka, kb = port_key(pa.node.node_guid, pa.port_num), port_key(pb.node.node_guid, pb.port_num)
        keys.append(link_key((pa.node.node_guid, pa.port_num), (pb.node.node_guid, pb.port_num)))
        ends += [
            (ka, f"{a} [{pa.port_num}]", f"{b} [{pb.port_num}]"),
            (kb, f"{b} [{pb.port_num}]", f"{a} [{pa.port_num}]"),
        ]
    crossing = OVERLAYS["edge_jobs"](fabric, [k for k, _, _ in ends], user=user) if ends else {}
    jobs = [{**j, "port_key": k, "from": frm, "to": to} for k, frm, to in ends for j in crossing.get(k, ())]
    return {
        "a": {"id": a.pk, "name": str(a), "guid": a.node_guid},
        "b": {"id": b.pk, "name": str(b), "guid": b.node_guid},
        "cables": cables,
        "alarms": list(OVERLAYS["edge_alarms"](fabric, ports, keys)),
        "jobs": sorted(jobs, key=lambda j: (-j["share"], j["job"], j["from"])),
    }
