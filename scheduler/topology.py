"""Build the scheduler's :class:`~scheduler.locality.Locality` from the stored fabrics.

Two parts, so the rules can be tested without a database:

- :func:`build_from_rows` (pure): plain rows of each fabric — its switches (GUID, name, tier,
  role), its switch-to-switch cables (``fabric.Link`` ids), its hosts with the leaf switch each of
  their HCAs is cabled to and their GPU count — to the locality tree;
- :func:`load_rows` / :func:`build_locality`: the thin loader that reads those rows from the
  database (``fabric`` topology, ``pools.Gpu`` for GPU counts and rails) and calls the builder.

The rules (issue 12, "Placement engine → Locality"):

1. Only ``compute`` fabrics and switches count (``fabric.choices.FabricRole``): a storage or
   management fabric, or switch, is skipped (a warning says so).
2. *Units* (tier 1). Leaf switches (switches with host HCAs) with identical host sets are one unit:
   a rail-optimised pod, where HCA *i* of every server is on the rail-*i* leaf, collapses into one
   unit (as Volcano's UFM discoverer and NVIDIA's SuperPOD documents group a scalable unit); a
   plain leaf is a unit of its own. A host with HCAs in several candidate units belongs to the one
   holding most of its HCAs (ties: the smaller host set, then the lower key). A leaf left with no
   host of its own whose hosts (more than :data:`RAIL_SHARE` of them) all went to one unit is a
   rail of that unit with a cable missing or a host mis-cabled, and joins it; one whose hosts
   went to several units reaches across units — a storage or management switch in the compute
   subnet, "not a leaf" — and is left out with a warning (set its role to silence it).
3. *Blocks* (tier 2): units joined through a common tier-2 (spine) switch, transitively.
4. *Spine groups* (tier 3): blocks joined through a common tier-3 (core) switch, transitively.
5. *Fabric* (tier 4): every unit of the fabric. Fabrics are never joined: a host name found on two
   fabrics is kept where it has more compute HCAs (a storage fabric reaches the same servers with
   fewer), ties to the lower fabric id, with a warning.

Tiers are ``fabric.Node.tier`` as the ingest derived them (``fabric.services.derive``: hop
distance from the leaves). Domains left without hosts are dropped. Uplinks (``fabric.Link`` ids,
for the congestion check): a unit's, from its leaves to non-leaf switches; a block's, from its
tier-2 switches to tier-3 ones; a spine group's, from its tier-3 switches to tier-3 switches
outside it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .locality import TOP_TIER, Domain, HostSite, Locality

COMPUTE = "compute"
SPINE_TIER = 2
CORE_TIER = 3
#: share of a host-less leaf's hosts that must sit in one unit for the leaf to join it as a rail
RAIL_SHARE = 0.75
#: names listed in one warning before "… and N more"
WARN_NAMES = 8


@dataclass(frozen=True, slots=True)
class SwitchRow:
    """A switch of a fabric: canonical node GUID, display name (``Node.name``), derived tier
    (``fabric.choices.Tier`` value: 1 leaf, 2 spine, 3 core, 9 unknown) and role."""

    guid: str
    name: str
    tier: int
    role: str = COMPUTE


@dataclass(frozen=True, slots=True)
class HcaRow:
    """One HCA port of a host cabled to a switch: the switch's GUID, the ``fabric.Link`` id of the
    cable, and ``order`` (the HCA's rail position: the lowest index of the GPUs whose closest CA it
    is, else its position by device name)."""

    switch_guid: str
    link_id: int
    order: int = 0


@dataclass(frozen=True, slots=True)
class HostRow:
    """A host (``fabric.Host``): pk, name, present GPUs (0 without inventory) and its cabled HCAs."""

    host_id: int
    name: str
    gpus: int
    hcas: tuple[HcaRow, ...]


@dataclass(frozen=True, slots=True)
class SwitchLink:
    """A cable between two switches (``fabric.Link`` id and both ends' GUIDs)."""

    link_id: int
    a: str
    b: str


@dataclass(slots=True)
class FabricRows:
    """Everything :func:`build_from_rows` needs of one fabric."""

    fabric_id: int
    name: str
    role: str = COMPUTE
    switches: list[SwitchRow] = field(default_factory=list)
    links: list[SwitchLink] = field(default_factory=list)
    hosts: list[HostRow] = field(default_factory=list)


# --- helpers -------------------------------------------------------------------------------------


def _natural(text: str) -> tuple:
    """Sort key that orders ``leaf-9`` before ``leaf-10``."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


def _listed(names: Iterable[str]) -> str:
    names = sorted(names, key=_natural)
    shown = ", ".join(names[:WARN_NAMES])
    return shown + (f" and {len(names) - WARN_NAMES} more" if len(names) > WARN_NAMES else "")


def group_name(names: Sequence[str]) -> str:
    """A readable name for several switches: ``MF0;LG28-{01..08}:MQM8700/U1`` for names that differ
    in one contiguous number, ``a{x,y}b`` for other differing middles (``a{x,...,z}b`` past four),
    the name itself for one. Display only (exports sanitise names themselves)."""
    names = sorted(set(names), key=_natural)
    if len(names) == 1:
        return names[0]
    first, last = names[0], names[-1]
    pre = 0
    while pre < min(len(n) for n in names) and all(n[pre] == first[pre] for n in names):
        pre += 1
    # keep whole numbers in the varying part: "leaf-09".."leaf-10" must not share the "0"
    while pre and first[pre - 1].isdigit():
        pre -= 1
    suf = 0
    shortest = min(len(n) for n in names) - pre
    while suf < shortest and all(n[len(n) - 1 - suf] == last[len(last) - 1 - suf] for n in names):
        suf += 1
    while suf and last[len(last) - suf].isdigit():
        suf -= 1
    middles = [n[pre : len(n) - suf] for n in names]
    head, tail = first[:pre], first[len(first) - suf :] if suf else ""
    if all(m.isdigit() for m in middles):
        values = [int(m) for m in middles]
        if values == list(range(values[0], values[0] + len(values))):
            return f"{head}{{{middles[0]}..{middles[-1]}}}{tail}"
    if len(middles) > 4:  # keep it short: the first and the last
        middles = [middles[0], "...", middles[-1]]
    if not head and not tail:
        return "+".join(middles)
    return f"{head}{{{','.join(middles)}}}{tail}"


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def groups(self, items: Iterable) -> list[list]:
        out: dict = defaultdict(list)
        for item in items:
            out[self.find(item)].append(item)
        return list(out.values())


# --- one fabric ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Unit:
    switches: set[str]
    hosts: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Placed:
    """A fabric after the unit rules, before duplicate host names across fabrics are resolved."""

    rows: FabricRows
    units: list[_Unit]
    host_unit: dict[str, int]  # host name -> index in units
    host_rails: dict[str, tuple[str, ...]]
    host_rows: dict[str, HostRow]
    switches: dict[str, SwitchRow]  # compute switches by GUID
    neighbours: dict[str, dict[str, list[int]]]  # guid -> neighbour guid -> link ids


def _place_units(rows: FabricRows, warnings: list[str]) -> _Placed:
    """Rules 1 and 2 for one compute fabric: units and the unit of every host."""
    fname = rows.name
    switches = {s.guid: s for s in rows.switches if s.role == COMPUTE}
    other = [s.name or s.guid for s in rows.switches if s.role != COMPUTE]
    if other:
        warnings.append(
            f"fabric {fname}: {len(other)} switches with a non-compute role left out: {_listed(other)}"
        )
    neighbours: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for link in rows.links:
        if link.a == link.b or link.a not in switches or link.b not in switches:
            continue
        neighbours[link.a][link.b].append(link.link_id)
        neighbours[link.b][link.a].append(link.link_id)

    # hosts on each leaf, and each host's HCAs per leaf
    leaf_hosts: dict[str, set[str]] = defaultdict(set)
    host_hcas: dict[str, list[HcaRow]] = {}
    host_rows: dict[str, HostRow] = {}
    no_leaf = []
    for host in rows.hosts:
        hcas = [h for h in host.hcas if h.switch_guid in switches]
        if not hcas:
            no_leaf.append(host.name)
            continue
        host_rows[host.name] = host
        host_hcas[host.name] = hcas
        for h in hcas:
            leaf_hosts[h.switch_guid].add(host.name)
    if no_leaf:
        warnings.append(
            f"fabric {fname}: {len(no_leaf)} hosts have no HCA on a compute switch, not placed: {_listed(no_leaf)}"
        )

    # candidate units: leaves with identical host sets (rail pods collapse)
    by_set: dict[frozenset[str], set[str]] = defaultdict(set)
    for leaf, hosts in leaf_hosts.items():
        by_set[frozenset(hosts)].add(leaf)
    candidates = sorted(
        (_Unit(set(leaves), set(hosts)) for hosts, leaves in by_set.items()), key=lambda u: min(u.switches)
    )
    cand_of_leaf = {leaf: i for i, u in enumerate(candidates) for leaf in u.switches}

    # each host goes to the candidate holding most of its HCAs
    host_cand: dict[str, int] = {}
    split = []
    for name, hcas in host_hcas.items():
        count: dict[int, int] = defaultdict(int)
        for h in hcas:
            count[cand_of_leaf[h.switch_guid]] += 1
        best = min(count, key=lambda c: (-count[c], len(candidates[c].hosts), c))
        host_cand[name] = best
        if len(count) > 1 and not _subset_rails(candidates, count, best):
            split.append(f"{name} ({'/'.join(str(n) for n in sorted(count.values(), reverse=True))})")
    if split:
        warnings.append(
            f"fabric {fname}: {len(split)} hosts have HCAs on leaves of several units (HCAs per unit), "
            f"each placed in the unit with most: {_listed(split)}"
        )

    # host-less candidates: a rail of one unit (joins it) or a switch across units (left out)
    owned: dict[int, set[str]] = defaultdict(set)
    for name, c in host_cand.items():
        owned[c].add(name)
    target = {c: c for c in owned}
    shared = []
    for c, unit in enumerate(candidates):
        if c in owned:
            continue
        homes: dict[int, int] = defaultdict(int)
        for name in unit.hosts:
            homes[host_cand[name]] += 1
        home, n = max(homes.items(), key=lambda kv: (kv[1], -kv[0]))
        if n > RAIL_SHARE * len(unit.hosts):
            target[c] = home
        else:
            shared.extend(switches[g].name or g for g in unit.switches)
    if shared:
        warnings.append(
            f"fabric {fname}: {len(shared)} switches reach hosts of several units and are not leaves "
            f"(storage or management switches? give them that role): {_listed(shared)}"
        )
    units: list[_Unit] = []
    index: dict[int, int] = {}
    for c in sorted(owned):
        index[c] = len(units)
        units.append(_Unit(set(candidates[c].switches), set(owned[c])))
    for c, t in target.items():
        if c not in owned:
            units[index[t]].switches |= candidates[c].switches
    host_unit = {name: index[c] for name, c in host_cand.items()}

    host_rails = {}
    for name, hcas in host_hcas.items():
        mine = units[host_unit[name]].switches
        host_rails[name] = tuple(
            h.switch_guid for h in sorted(hcas, key=lambda h: h.order) if h.switch_guid in mine
        )
    return _Placed(rows, units, host_unit, host_rails, host_rows, switches, neighbours)


def _subset_rails(candidates: list[_Unit], count: dict[int, int], best: int) -> bool:
    """True when a host's HCAs outside its unit are on leaves whose hosts are a subset of its
    unit's (a rail leaf with a cable missing elsewhere): not worth a warning of its own."""
    hosts = candidates[best].hosts
    return all(candidates[c].hosts <= hosts for c in count if c != best)


def _keep_on_one_fabric(placed: list[_Placed], warnings: list[str]) -> None:
    """Rule 5: a host name on several fabrics stays where it has most compute HCAs."""
    where: dict[str, list[_Placed]] = defaultdict(list)
    for p in placed:
        for name in p.host_unit:
            where[name].append(p)
    moved: dict[tuple[str, str], list[str]] = defaultdict(list)
    for name, fabrics in where.items():
        if len(fabrics) < 2:
            continue
        keep = min(fabrics, key=lambda p: (-len(p.host_rails[name]), p.rows.fabric_id))
        for p in fabrics:
            if p is not keep:
                p.units[p.host_unit.pop(name)].hosts.discard(name)
                moved[(p.rows.name, keep.rows.name)].append(name)
    for (lost, kept), names in sorted(moved.items()):
        warnings.append(
            f"{len(names)} hosts of fabric {lost} are also on fabric {kept} (more compute HCAs there, or "
            f"as many on the older fabric) and are placed there only (is {lost} a storage or management "
            f"fabric? give it that role): {_listed(names)}"
        )


def _domains(p: _Placed, locality: Locality) -> None:
    """Rules 3 and 4 and the tree of one fabric, written into ``locality``."""
    fid, fname = p.rows.fabric_id, p.rows.name
    units = [u for u in p.units if u.hosts]
    if not units:
        locality.warnings.append(f"fabric {fname}: no host placed, no locality tree")
        return
    sw = p.switches
    nb = p.neighbours
    leaves = {g for u in units for g in u.switches}

    def tier(g: str) -> int:
        return sw[g].tier

    unit_up = [
        {n for g in u.switches for n in nb.get(g, ()) if n not in leaves and tier(n) == SPINE_TIER}
        for u in units
    ]
    uf = _UnionFind()
    owner: dict[str, int] = {}
    for i, spines in enumerate(unit_up):
        uf.find(i)
        for s in spines:
            if s in owner:
                uf.union(owner[s], i)
            else:
                owner[s] = i
    blocks = sorted(
        (sorted(g) for g in uf.groups(range(len(units)))),
        key=lambda g: min(min(units[i].switches) for i in g),
    )
    block_switches = [set().union(*(unit_up[i] for i in g)) for g in blocks]
    block_cores = [{n for s in bs for n in nb.get(s, ()) if tier(n) == CORE_TIER} for bs in block_switches]
    uf = _UnionFind()
    owner = {}
    for b, cores in enumerate(block_cores):
        uf.find(b)
        for c in cores:
            if c in owner:
                uf.union(owner[c], b)
            else:
                owner[c] = b
    groups = sorted((sorted(g) for g in uf.groups(range(len(blocks)))), key=lambda g: min(g))

    def key(kind: str, guids: Iterable[str], fallback: Iterable[str]) -> str:
        guids = list(guids) or list(fallback)
        return f"f{fid}/{kind}/{min(guids)}"

    def name_of(guids: Iterable[str]) -> str:
        return group_name([sw[g].name or g for g in guids])

    fabric_key = f"f{fid}/fabric"
    unit_keys = [key("leaf", u.switches, ()) for u in units]
    block_keys = [key("block", block_switches[b], units[blocks[b][0]].switches) for b in range(len(blocks))]
    group_switches = [set().union(*(block_cores[b] for b in g)) for g in groups]
    group_keys = [
        key("spine_group", group_switches[i], [block_keys[g[0]].rsplit("/", 1)[1]])
        for i, g in enumerate(groups)
    ]
    block_group = {b: i for i, g in enumerate(groups) for b in g}
    unit_block = {u: b for b, g in enumerate(blocks) for u in g}

    def links(
        ends: Iterable[str], up: Iterable[str] | None = None, avoid: set[str] | frozenset = frozenset()
    ) -> tuple[int, ...]:
        up = set(up) if up is not None else None
        out = []
        for g in ends:
            for n, ids in nb.get(g, {}).items():
                if (up is None or n in up) and n not in avoid:
                    out.extend(ids)
        return tuple(sorted(out))

    all_hosts: list[str] = []
    for i, u in enumerate(units):
        b = unit_block[i]
        path = (unit_keys[i], block_keys[b], group_keys[block_group[b]], fabric_key)
        for name in u.hosts:
            row = p.host_rows[name]
            locality.hosts[name] = HostSite(name, row.host_id, fid, row.gpus, p.host_rails[name], path)
        all_hosts.extend(u.hosts)
        non_leaf_up = {n for g in u.switches for n in nb.get(g, ()) if n not in leaves}
        locality.domains[unit_keys[i]] = Domain(
            key=unit_keys[i], tier=1, name=name_of(u.switches), fabric_id=fid, parent=block_keys[b],
            switches=tuple(sorted(u.switches)), hosts=tuple(sorted(u.hosts)),
            uplinks=links(u.switches, non_leaf_up),
        )  # fmt: skip
    for b, members in enumerate(blocks):
        hosts = sorted(h for i in members for h in units[i].hosts)
        switches = block_switches[b]
        locality.domains[block_keys[b]] = Domain(
            key=block_keys[b], tier=2,
            name=name_of(switches) if switches else name_of(units[members[0]].switches), fabric_id=fid,
            parent=group_keys[block_group[b]], switches=tuple(sorted(switches)), hosts=tuple(hosts),
            children=tuple(sorted(unit_keys[i] for i in members)), uplinks=links(switches, block_cores[b]),
        )  # fmt: skip
    for i, members in enumerate(groups):
        hosts = sorted(h for b in members for h in locality.domains[block_keys[b]].hosts)
        cores = group_switches[i]
        outside = {n for c in cores for n in nb.get(c, ()) if tier(n) >= CORE_TIER and n not in cores}
        locality.domains[group_keys[i]] = Domain(
            key=group_keys[i], tier=3,
            name=name_of(cores) if cores else locality.domains[block_keys[members[0]]].name, fabric_id=fid,
            parent=fabric_key, switches=tuple(sorted(cores)), hosts=tuple(hosts),
            children=tuple(sorted(block_keys[b] for b in members)), uplinks=links(cores, outside),
        )  # fmt: skip
    locality.domains[fabric_key] = Domain(
        key=fabric_key, tier=TOP_TIER, name=fname, fabric_id=fid, parent=None,
        hosts=tuple(sorted(all_hosts)), children=tuple(sorted(group_keys)),
    )  # fmt: skip


def build_from_rows(fabrics: Iterable[FabricRows]) -> Locality:
    """The locality tree of ``fabrics`` (plain rows, no database), by the rules of this module's
    docstring. Fabrics are processed in id order; every warning names its fabric. Never raises for
    odd topologies: what cannot be placed is left out and reported in ``Locality.warnings``."""
    locality = Locality()
    placed = []
    for rows in sorted(fabrics, key=lambda r: r.fabric_id):
        if rows.role != COMPUTE:
            locality.warnings.append(f"fabric {rows.name} skipped: its role is {rows.role}, not compute")
            continue
        placed.append(_place_units(rows, locality.warnings))
    _keep_on_one_fabric(placed, locality.warnings)
    for p in placed:
        _domains(p, locality)
    return locality


# --- database loader -----------------------------------------------------------------------------


def load_rows(fabrics: Iterable | None = None) -> list[FabricRows]:
    """Read :class:`FabricRows` from the database for ``fabrics`` (``fabric.Fabric`` objects, pks
    or names; None: every fabric). A name or pk that matches no fabric raises
    ``fabric.models.Fabric.DoesNotExist`` naming it. A handful of queries per fabric (nodes,
    links, CA ports, GPUs), no per-row query.
    """
    from django.db.models import Q

    from fabric.choices import NodeType
    from fabric.models import Fabric, Host, Link, Node
    from pools.models import Gpu

    if fabrics is None:
        chosen = list(Fabric.objects.order_by("pk"))
    else:
        chosen = []
        for f in fabrics:
            if isinstance(f, Fabric):
                chosen.append(f)
                continue
            q = Q(pk=f) if isinstance(f, int) else Q(name=f)
            found = Fabric.objects.filter(q).first()
            if found is None:
                raise Fabric.DoesNotExist(f"no fabric {f!r}")
            chosen.append(found)
    out = []
    for fabric in chosen:
        rows = FabricRows(fabric.pk, fabric.name, fabric.role)
        node_guid: dict[int, str] = {}
        for pk, guid, name, tier, role in Node.objects.filter(
            fabric=fabric, node_type=NodeType.SWITCH
        ).values_list("pk", "node_guid", "name", "tier", "role"):
            node_guid[pk] = guid
            rows.switches.append(SwitchRow(guid, name, tier, role))
        ca_host: dict[int, tuple[int, str]] = {
            pk: (host_id, name)
            for pk, host_id, name in Node.objects.filter(fabric=fabric, host__isnull=False)
            .exclude(node_type=NodeType.SWITCH)
            .values_list("pk", "host_id", "name")
        }
        gpus: dict[int, int] = defaultdict(int)
        rail_order: dict[int, int] = {}
        for host_id, index, rail in Gpu.objects.filter(
            host__fabric=fabric, missing_since__isnull=True
        ).values_list("host_id", "index", "rail_node_id"):
            gpus[host_id] += 1
            if rail is not None:
                rail_order[rail] = min(index, rail_order.get(rail, index))
        hcas: dict[int, list[tuple]] = defaultdict(list)
        for link_id, a, b in Link.objects.filter(fabric=fabric).values_list(
            "pk", "port_a__node_id", "port_b__node_id"
        ):
            if a in node_guid and b in node_guid:
                rows.links.append(SwitchLink(link_id, node_guid[a], node_guid[b]))
                continue
            for ca, sw in ((a, b), (b, a)):
                if ca in ca_host and sw in node_guid:
                    host_id, ca_name = ca_host[ca]
                    # rail order: the CA's first GPU, then its device name (mlx5_0 < mlx5_1 < mlx5_10)
                    hcas[host_id].append(
                        (rail_order.get(ca, 1 << 16), _natural(ca_name), node_guid[sw], link_id)
                    )
        for host_id, name in Host.objects.filter(fabric=fabric).values_list("pk", "name"):
            mine = sorted(hcas.get(host_id, ()))
            rows.hosts.append(
                HostRow(
                    host_id,
                    name,
                    gpus.get(host_id, 0),
                    tuple(HcaRow(g, lid, i) for i, (_, _, g, lid) in enumerate(mine)),
                )
            )
        out.append(rows)
    return out


def build_locality(fabrics: Iterable | None = None) -> Locality:
    """The scheduler's locality tree of the stored fabrics (every fabric when ``fabrics`` is None;
    else ``fabric.Fabric`` objects, pks or names). Reads the database (:func:`load_rows`) and
    builds with :func:`build_from_rows`; raises ``Fabric.DoesNotExist`` for an unknown fabric."""
    return build_from_rows(load_rows(fabrics))
