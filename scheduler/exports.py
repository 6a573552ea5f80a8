"""Topology exports for other schedulers (pure: a :class:`~scheduler.locality.Locality` in, text out).

Formats (:data:`FORMATS`):

- ``slurm-tree``: Slurm ``topology.conf`` for ``TopologyPlugin=topology/tree`` — ``SwitchName=…
  Nodes=…`` for each unit (tier 1), ``SwitchName=… Switches=…`` above. Slurm's rules
  (``topology.conf(5)``; ``src/plugins/topology/tree/switch_record.c``): a name on every line,
  unique, at most 64 characters; no line with both ``Nodes=`` and ``Switches=``; every child
  switch defined; nodes in Slurm's host-list syntax (``scheduler.hostlist``). Switch and block
  names are the domains' names made safe (:func:`slurm_names`: ``[A-Za-z0-9._-]`` only, a short
  GUID tag when the description had to change or is shared, stable across exports). Every switch
  level is kept, even with one child (Selene's management leaf ``MLG01-04`` under its own spine
  ``MSPINE3-01``, under the core): a job on that leaf's hosts then knows it has a spine between it
  and the rest, as the Volcano export says. Only a domain with no switch of its own (the fabric,
  the spine group of a two-level tree) and one child adds nothing and is left out (its child goes
  up a level). Each fabric is its own tree with
  no common root: Slurm then never places a job across two fabrics, which cannot talk to each
  other (it logs "no switch can reach all nodes", as its docs say it should for such clusters).
- ``slurm-block``: ``topology/block`` — ``BlockName=… Nodes=…`` per unit, ``BlockSizes=``. Slurm
  (``topology.conf(5)``, ``src/plugins/topology/block/block_record.c``) takes the first size as
  the node count of every base block (``bblock_node_cnt``; a block with fewer nodes is fatal to
  slurmctld) and plans a job of *n* nodes as ``ceil(n / base)`` base blocks rounded up to a power
  of two (``eval_nodes_block.c``, ``_get_block_level``); it aggregates *consecutive* blocks of the
  file in groups of 2^k for each larger size base·2^k. So the base is the host count of one leaf
  unit of the fabric (:func:`block_units`): the smallest unit among the *full* units (those with
  at least half the hosts of the largest: a pod missing a few hosts is still a pod), never a
  two-host management leaf (Selene: 17, not 2, so a 20-node job is one or two base blocks, not
  16). Units with fewer hosts than the base cannot be Slurm blocks: they are left out of the block
  form, named in its header comment and in the warnings (their hosts stay in the tree form).
  Weft writes the units ordered by fabric, spine group and block, and lists a size only when every
  aggregate of that size lies inside one block (or is whole blocks inside one spine group, or
  whole spine groups) of one fabric.
- ``slurm-yaml``: Slurm 25.05 ``topology.yaml`` (``topology.yaml(5)``; field types from
  ``src/plugins/data_parser/*/parsers.c``): a list of topologies, ``topology`` first, then
  ``cluster_default``, then ``tree: {switches: [{switch, children | nodes}]}`` or ``block:
  {block_sizes: [..], blocks: [{block, nodes}]}``. Weft writes the tree (the cluster default) and
  the block form as two topologies a partition can choose from (``Topology=`` in slurm.conf).
- ``labels``: Kubernetes ``Node`` documents carrying the hierarchy labels (:data:`LABELS`), to
  apply with ``kubectl apply --server-side --field-manager=weft`` (list only the cluster's nodes:
  give the node list, or a missing node would be created).
- ``kueue``: a Kueue ``Topology`` (``kueue.x-k8s.io``, ``spec.levels[].nodeLabel`` from the
  coarsest to ``kubernetes.io/hostname``, at most 16 levels, the hostname level last; Kueue's
  ``site/content/en/docs/concepts/topology.md`` and CRD ``kueue.x-k8s.io_topologies.yaml``) and
  a ``ResourceFlavor`` per fabric (``spec.nodeLabels`` + ``spec.topologyName``).
- ``kai``: a KAI Scheduler ``Topology`` (``kai.scheduler/v1alpha1``, the same ``spec.levels``;
  NVIDIA/KAI-Scheduler ``pkg/apis/kai/v1alpha1/topology_types.go``, ``docs/topology``).
- ``volcano``: Volcano ``HyperNode`` objects (``topology.volcano.sh/v1alpha1``, cluster-scoped;
  volcano-sh/apis ``pkg/apis/topology/v1alpha1/hypernode_types.go``): ``spec.tier`` (an integer,
  1 the closest), ``spec.members[]`` of ``type: Node`` or ``HyperNode`` with ``selector.exactMatch.name``.
  Tier *n* is Weft's tier *n* (1 leaf, 2 block, 3 spine group, 4 fabric), so a job's
  ``highestTierAllowed`` means what the Weft tier number means. Rail-aware: a rail-optimised pod
  is one tier-1 HyperNode holding every server of the pod, as Volcano's own UFM discoverer
  groups it (not one per rail leaf, which would split every server eight ways).

Given the node list of the target scheduler (:func:`read_node_list`), only its nodes are written;
fabric hosts it does not know and its nodes that no fabric has are reported as warnings. Names a
target cannot hold (a host list's separators, Kubernetes' name rules) are left out with a warning.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import yaml

from core.errors import LocatedError

from .hostlist import HostlistError, check_name, expand, fold
from .locality import TOP_TIER, UNIT_TIER, Domain, Locality

FORMATS = ("slurm-tree", "slurm-block", "slurm-yaml", "kueue", "volcano", "kai", "labels")
#: media type of each format's text (the API answers with it)
MEDIA_TYPES = {
    "slurm-tree": "text/plain",
    "slurm-block": "text/plain",
    "slurm-yaml": "application/yaml",
    "kueue": "application/yaml",
    "volcano": "application/yaml",
    "kai": "application/yaml",
    "labels": "application/yaml",
}
#: the hierarchy's node labels, coarsest first (Weft tiers 4..1); the host level is kubernetes.io/hostname
LABEL_PREFIX = "topology.weft.io"
LABELS = {
    4: f"{LABEL_PREFIX}/fabric",
    3: f"{LABEL_PREFIX}/spine-group",
    2: f"{LABEL_PREFIX}/block",
    1: f"{LABEL_PREFIX}/leaf",
}
HOSTNAME_LABEL = "kubernetes.io/hostname"
KUEUE_API = "kueue.x-k8s.io/v1beta1"
KAI_API = "kai.scheduler/v1alpha1"
VOLCANO_API = "topology.volcano.sh/v1alpha1"
#: Slurm's limit on a switch name (``HOST_NAME_MAX``)
SLURM_NAME_MAX = 64
#: what a Slurm switch or block name may not hold (:func:`slurm_safe`)
_SLURM_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: Kubernetes object names (DNS-1123 subdomain) and label values
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
WARN_NAMES = 10


class ExportError(ValueError):
    """Nothing to export (no fabric, no host left), or an unknown format."""


@dataclass(slots=True)
class Export:
    """An export's ``text``, its ``media_type`` and the ``warnings`` a person should read."""

    text: str
    media_type: str
    warnings: list[str] = field(default_factory=list)


def _listed(names: Iterable[str]) -> str:
    names = sorted(names)
    shown = ", ".join(names[:WARN_NAMES])
    return shown + (f" and {len(names) - WARN_NAMES} more" if len(names) > WARN_NAMES else "")


def notes_for(warnings: Iterable[str], fabrics: Iterable[str]) -> list[str]:
    """The locality warnings that name one of the ``fabrics`` (``"fabric NAME…"``)."""
    pattern = re.compile("|".join(rf"\bfabric {re.escape(n)}(?![-\w.])" for n in fabrics) or r"(?!)")
    return [w for w in warnings if pattern.search(w)]


# --- node lists ----------------------------------------------------------------------------------


def read_node_list(text: str, source: str = "<nodes>") -> set[str]:
    """The node names of a node list: host-list expressions separated by commas, spaces or lines
    (``sinfo -h -N -o %N``, ``scontrol show hostnames``, ``kubectl get nodes -o name`` with or
    without the ``node/`` prefix), or ``slurm.conf`` lines whose ``NodeName=`` values are taken
    (``NodeName=DEFAULT`` skipped). ``#`` starts a comment. Raises :class:`~core.errors.LocatedError`
    (file, line) for an expression that cannot be read."""
    names: set[str] = set()
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        found = re.findall(r"(?i)\bNodeName=(\S+)", line)
        exprs = [e for e in found if e.upper() != "DEFAULT"] if found else [line]
        for expr in exprs:
            try:
                hosts = expand(expr)
            except HostlistError as exc:
                raise LocatedError(str(exc), source, n) from None
            names.update(h.removeprefix("node/") for h in hosts)
    return names


# --- the tree to export --------------------------------------------------------------------------


@dataclass(slots=True)
class _View:
    """The part of a locality to export: domains that keep at least one written host."""

    locality: Locality
    hosts: dict[str, list[str]]  # domain key -> written hosts below it, sorted
    fabrics: list[Domain]


def _view(locality: Locality, fabric_ids: Iterable[int] | None, nodes: set[str] | None, warnings: list[str],
          name_rule=check_name, target: str = "Slurm") -> _View:  # fmt: skip
    fabrics = locality.fabrics()
    if fabric_ids is not None:
        wanted = set(fabric_ids)
        fabrics = [f for f in fabrics if f.fabric_id in wanted]
    if not fabrics:
        raise ExportError("no fabric with placed hosts to export")
    on_fabrics = {h for f in fabrics for h in f.hosts}
    written = set(on_fabrics)
    if nodes is not None:
        unknown = on_fabrics - nodes
        if unknown:
            warnings.append(
                f"{len(unknown)} fabric hosts are not {target} nodes, left out: {_listed(unknown)}"
            )
        missing = nodes - set(locality.hosts)
        if missing:
            warnings.append(f"{len(missing)} {target} nodes are on no fabric: {_listed(missing)}")
        elsewhere = (nodes & set(locality.hosts)) - on_fabrics
        if elsewhere:
            warnings.append(f"{len(elsewhere)} {target} nodes are on other fabrics: {_listed(elsewhere)}")
        written &= nodes
    bad = {h: why for h in written if (why := name_rule(h))}
    if bad:
        warnings.append(f"{len(bad)} host names {target} cannot hold, left out: {_listed(bad.values())}")
        written -= set(bad)
    if not written:
        raise ExportError(
            "no host left to export" + (" (none of the fabric hosts is in the node list)" if nodes else "")
        )
    hosts = {}
    for key, d in locality.domains.items():
        if d.fabric_id in {f.fabric_id for f in fabrics}:
            mine = [h for h in d.hosts if h in written]
            if mine:
                hosts[key] = mine
    return _View(locality, hosts, [f for f in fabrics if f.key in hosts])


def _children(view: _View, d: Domain) -> list[Domain]:
    return [view.locality.domains[c] for c in d.children if c in view.hosts]


def _units_in_order(view: _View) -> list[Domain]:
    """Units by fabric, spine group, block, then name (natural order)."""
    out: list[Domain] = []

    def walk(d: Domain) -> None:
        if d.tier == UNIT_TIER:
            out.append(d)
            return
        for c in sorted(_children(view, d), key=lambda c: _natural(c.name)):
            walk(c)

    for f in view.fabrics:
        walk(f)
    return out


def _natural(text: str) -> tuple:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text) if p)


# --- Slurm ---------------------------------------------------------------------------------------


def plain_name(name: str) -> str:
    """A domain name without the brace groups of ``scheduler.topology.group_name``:
    ``LG28-{01..08}`` → ``LG28-01-08``, ``a{x,y}`` → ``ax-y``."""
    name = re.sub(r"\{([^{}.,]*)\.\.([^{}.,]*)\}", r"\1-\2", name)
    return re.sub(r"\{([^{}]*)\}", lambda m: m.group(1).replace(",", "-"), name)


def slurm_safe(name: str) -> str:
    """``name`` in the characters real ``topology.conf`` switch names use (``[A-Za-z0-9._-]``, as in
    ``$WEFT_REALDATA/slurm_topology``: ``S-0008f1050020369c``, ``switch.2.1``, ``abacusc-0``):
    brace groups as :func:`plain_name`, every run of other characters (whitespace, Slurm's
    ``[ ] , = #``, a node description's ``;`` ``:`` ``/``) one ``_``, no ``_`` at either end;
    may be empty."""
    return _SLURM_UNSAFE.sub("_", plain_name(name)).strip("_")


def slurm_suffix(d: Domain) -> str:
    """The stable tag of domain ``d`` in a Slurm name: the last 6 hex digits of its lowest switch
    GUID (``0x0002c90200402ab8`` → ``402ab8``; the GUID its key is made of), or for a domain
    without switches (a fabric, a block without spines) 8 hex digits of the SHA-256 of its key."""
    if d.switches:
        return min(d.switches).lower().removeprefix("0x")[-6:]
    return _short_hash(d.key)


def slurm_names(domains: Iterable[Domain]) -> dict[str, str]:
    """Domain key → its Slurm switch or block name, unique among ``domains`` (every domain an
    export may write) and the same in every export of the same topology (it depends only on the
    domains, never on the order they are written in).

    The mapping: :func:`slurm_safe` of the domain's name (empty: its tier name), as it is when
    that is the name itself (brace groups aside: ``leaf-{01..02}`` is ``leaf-01-02``), at most 64 characters and no other domain's; otherwise
    ``<safe name>-<slurm_suffix>`` (the safe name cut so the whole is ≤ 64), so a description
    Slurm could not hold (``MF0;leaf-1:MQM8700/U1`` → ``MF0_leaf-1_MQM8700_U1-402ab8``) or one
    shared by several switches (default node descriptions) still tells the switch by its GUID. A
    name still taken after that (a raw name that happens to equal another's tagged one) gets the
    16 hex digits of its key's SHA-256 instead."""
    domains = sorted(domains, key=lambda d: (d.tier, d.key))
    safe = {d.key: slurm_safe(d.name) or d.tier_name for d in domains}
    shared = Counter((d.tier, safe[d.key]) for d in domains)
    out: dict[str, str] = {}
    taken: set[str] = set()
    for d in domains:  # tier by tier, lowest first: a name a lower tier holds is taken
        base = safe[d.key]
        name = base
        if (
            base != plain_name(d.name)
            or len(base) > SLURM_NAME_MAX
            or shared[(d.tier, base)] > 1
            or base in taken
        ):
            for tag in (slurm_suffix(d), hashlib.sha256(d.key.encode()).hexdigest()[:16]):
                name = f"{base[: SLURM_NAME_MAX - len(tag) - 1]}-{tag}"
                if name not in taken:
                    break
        out[d.key] = name
        taken.add(name)
    return out


@dataclass(slots=True)
class _Switch:
    name: str
    domain: Domain
    nodes: list[str] | None = None
    children: list[str] | None = None


def _slurm_switches(view: _View) -> list[list[_Switch]]:
    """Per fabric, the switches of the tree form, units first, single-child domains left out."""
    names = _slurm_names(view)
    per_fabric = []
    for f in view.fabrics:
        switches: list[_Switch] = []
        _emit(view, f, names, switches)
        switches.sort(key=lambda s: s.domain.tier)  # leaves first, as Slurm's examples
        per_fabric.append(switches)
    return per_fabric


def _slurm_names(view: _View) -> dict[str, str]:
    """:func:`slurm_names` of every domain the view keeps (tree and block forms share them)."""
    return slurm_names(view.locality.domains[key] for key in view.hosts)


def _emit(view: _View, d: Domain, names: dict[str, str], switches: list[_Switch]) -> list[str]:
    """Append ``d``'s switch (and its children's) to ``switches``; the names at its top."""
    if d.tier == UNIT_TIER:
        s = _Switch(names[d.key], d, nodes=view.hosts[d.key])
        switches.append(s)
        return [s.name]
    children = sorted(_children(view, d), key=lambda c: _natural(c.name))
    tops = [t for c in children for t in _emit(view, c, names, switches)]
    if len(tops) == 1 and not d.switches:  # a switch level is kept even above one child
        return tops
    s = _Switch(names[d.key], d, children=tops)
    switches.append(s)
    return [s.name]


def _header(view: _View, what: str) -> list[str]:
    names = ", ".join(f.name for f in view.fabrics)
    nodes = sum(len(view.hosts[f.key]) for f in view.fabrics)
    return [f"# {what} generated by Weft from fabric {names}: {nodes} nodes"]


def slurm_tree(view: _View) -> str:
    lines = _header(view, "Slurm topology.conf (topology/tree)")
    for switches in _slurm_switches(view):
        lines.append("")
        lines.append(f"# fabric {view.locality.domains[_fabric_key(switches[0].domain)].name}")
        for s in switches:
            lines.append(f"# {s.domain.tier_name} {s.domain.key}: {s.domain.name}")
            if s.nodes is not None:
                lines.append(f"SwitchName={s.name} Nodes={fold(s.nodes)}")
            else:
                lines.append(f"SwitchName={s.name} Switches={fold(s.children or [])}")
    return "\n".join(lines) + "\n"


def _fabric_key(d: Domain) -> str:
    return f"f{d.fabric_id}/fabric"


@dataclass(slots=True)
class _Blocks:
    """The block form's units: ``units`` written as blocks (fabric/spine group/block order),
    ``left_out`` the units with fewer hosts than ``base`` (the base block's node count)."""

    units: list[Domain]
    left_out: list[Domain]
    base: int


def block_units(view: _View) -> _Blocks:
    """The base block size and the units the block form writes (see the module docstring).

    ``base``: the smallest host count among the full units, a unit being full when it has at
    least half the hosts of the largest unit; every unit with at least ``base`` hosts is a block,
    the others are ``left_out`` (Slurm refuses a block smaller than the base)."""
    units = _units_in_order(view)
    largest = max(len(view.hosts[u.key]) for u in units)
    base = min(n for u in units if 2 * (n := len(view.hosts[u.key])) >= largest)
    kept = [u for u in units if len(view.hosts[u.key]) >= base]
    return _Blocks(kept, [u for u in units if len(view.hosts[u.key]) < base], base)


def _block_notes(view: _View, blocks: _Blocks) -> list[str]:
    """The block form's header lines on how uneven units were handled."""
    sizes = sorted({len(view.hosts[u.key]) for u in blocks.units})
    out = [
        f"# base block: {blocks.base} nodes, the smallest full leaf unit (units hold "
        f"{sizes[0]}-{sizes[-1]} nodes; a unit with more than the base counts as one base block "
        f"that Slurm may fill beyond the base)"
    ]
    if blocks.left_out:
        hosts = sum(len(view.hosts[u.key]) for u in blocks.left_out)
        out.append(
            f"# left out: {len(blocks.left_out)} units with fewer than {blocks.base} nodes ({hosts} nodes, "
            f"e.g. management leaves), which Slurm cannot hold as blocks: "
            + ", ".join(f"{u.name} ({len(view.hosts[u.key])})" for u in blocks.left_out[:WARN_NAMES])
            + (" ..." if len(blocks.left_out) > WARN_NAMES else "")
        )
    return out


def block_sizes(view: _View, units: Sequence[Domain], base: int | None = None) -> list[int]:
    """``BlockSizes``: ``base`` (default: the smallest unit's node count), then base·2^k for each
    k whose aggregates of 2^k consecutive units stay inside one domain, or are whole domains, at
    every tier, and never span two fabrics (see the module docstring)."""
    if base is None:
        base = min(len(view.hosts[u.key]) for u in units)
    sizes = [base]
    n = len(units)
    loc = view.locality
    paths = [[loc.hosts[view.hosts[u.key][0]].domain(t) for t in range(2, TOP_TIER + 1)] for u in units]
    count: list[dict[str, int]] = [{} for _ in range(2, TOP_TIER + 1)]
    for p in paths:
        for i, key in enumerate(p):
            count[i][key] = count[i].get(key, 0) + 1
    k = 1
    while (1 << (k - 1)) < n:
        size = 1 << k
        ok = True
        for start in range(0, n, size):
            window = paths[start : start + size]
            if len({p[-1] for p in window}) > 1:  # two fabrics
                ok = False
                break
            for i in range(len(count)):
                keys = {p[i] for p in window}
                if len(keys) > 1 and any(
                    sum(1 for p in window if p[i] == key) != count[i][key] for key in keys
                ):
                    ok = False
                    break
            if not ok:
                break
        if ok:
            sizes.append(base * size)
        k += 1
    return sizes


def slurm_block(view: _View, blocks: _Blocks | None = None) -> str:
    blocks = blocks or block_units(view)
    names = _slurm_names(view)
    lines = _header(view, "Slurm topology.conf (topology/block)")
    lines.append(
        "# blocks: one per unit (leaf switch or rail-optimised pod), in fabric/spine group/block order"
    )
    lines += _block_notes(view, blocks)
    for u in blocks.units:
        lines.append(f"BlockName={names[u.key]} Nodes={fold(view.hosts[u.key])}")
    lines.append(f"BlockSizes={','.join(str(s) for s in block_sizes(view, blocks.units, blocks.base))}")
    return "\n".join(lines) + "\n"


def slurm_yaml(view: _View, name: str = "weft") -> str:
    tree = []
    for switches in _slurm_switches(view):
        for s in switches:
            entry: dict = {"switch": s.name}
            if s.nodes is not None:
                entry["nodes"] = fold(s.nodes)
            else:
                entry["children"] = fold(s.children or [])
            tree.append(entry)
    chosen = block_units(view)
    names = _slurm_names(view)
    blocks = [{"block": names[u.key], "nodes": fold(view.hosts[u.key])} for u in chosen.units]
    doc = [
        {"topology": f"{name}-tree", "cluster_default": True, "tree": {"switches": tree}},
        {"topology": f"{name}-block", "cluster_default": False,
         "block": {"block_sizes": block_sizes(view, chosen.units, chosen.base), "blocks": blocks}},
    ]  # fmt: skip
    head = "\n".join(_header(view, "Slurm topology.yaml (25.05)") + _block_notes(view, chosen)) + "\n"
    return head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


# --- Kubernetes ----------------------------------------------------------------------------------


def k8s_name_problem(name: str) -> str | None:
    """Why ``name`` is no valid Kubernetes node name (DNS-1123 subdomain, ≤ 253), or None."""
    if len(name) > 253 or not _K8S_NAME.match(name):
        return f"{name!r} is not a DNS-1123 subdomain"
    return None


def _short_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:8]


def label_values(view: _View) -> dict[str, str]:
    """Domain key → label value: the domain's name made a valid label value (≤ 63 characters of
    ``[-_.A-Za-z0-9]``, alphanumeric at both ends), distinct per tier (a short hash of the key
    is appended when two names would meet)."""
    out: dict[str, str] = {}
    taken: dict[int, set[str]] = {}
    for key in sorted(view.hosts):
        d = view.locality.domains[key]
        value = (
            re.sub(r"[^-A-Za-z0-9_.]+", "-", plain_name(d.name)).strip("-_.")[:63].strip("-_.") or d.tier_name
        )
        seen = taken.setdefault(d.tier, set())
        if value in seen:
            value = f"{value[:54].strip('-_.')}-{_short_hash(key)}"
        seen.add(value)
        assert _LABEL_VALUE.match(value), value
        out[key] = value
    return out


def _object_name(prefix: str, d: Domain, used: set[str]) -> str:
    base = re.sub(r"[^a-z0-9.-]+", "-", plain_name(d.name).lower()).strip("-.")
    base = re.sub(r"\.{2,}", ".", base)[:200].strip("-.")
    name = f"{prefix}-{d.tier_name.replace('_', '-')}-{base}" if base else f"{prefix}-{_short_hash(d.key)}"
    name = re.sub(r"-*\.-*", ".", name).strip("-.")
    if name in used or not _K8S_NAME.match(name):
        name = f"{prefix}-{d.tier_name.replace('_', '-')}-{_short_hash(d.key)}"
    used.add(name)
    return name


def _yaml_docs(docs: list[dict], header: list[str]) -> str:
    head = "".join(f"# {h}\n" for h in header)
    return head + yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False)


def node_labels(view: _View) -> dict[str, dict[str, str]]:
    """Host → its hierarchy labels (:data:`LABELS`)."""
    values = label_values(view)
    out = {}
    for f in view.fabrics:
        for host in view.hosts[f.key]:
            site = view.locality.hosts[host]
            out[host] = {LABELS[t]: values[site.domain(t)] for t in range(TOP_TIER, UNIT_TIER - 1, -1)}
    return out


def labels_yaml(view: _View) -> str:
    docs = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": host, "labels": labels}}
        for host, labels in sorted(node_labels(view).items(), key=lambda kv: _natural(kv[0]))
    ]
    return _yaml_docs(docs, [
        "Kubernetes node labels of the fabric hierarchy, generated by Weft",
        "apply to existing nodes only: kubectl apply --server-side --field-manager=weft -f FILE",
    ])  # fmt: skip


def _levels() -> list[dict]:
    return [{"nodeLabel": LABELS[t]} for t in range(TOP_TIER, UNIT_TIER - 1, -1)] + [
        {"nodeLabel": HOSTNAME_LABEL}
    ]


def kueue_yaml(view: _View, name: str = "weft", api_version: str = KUEUE_API) -> str:
    values = label_values(view)
    docs: list[dict] = [{"apiVersion": api_version, "kind": "Topology", "metadata": {"name": name},
                         "spec": {"levels": _levels()}}]  # fmt: skip
    used: set[str] = set()
    for f in view.fabrics:
        docs.append({
            "apiVersion": api_version, "kind": "ResourceFlavor",
            "metadata": {"name": _object_name(name, f, used)},
            "spec": {"nodeLabels": {LABELS[TOP_TIER]: values[f.key]}, "topologyName": name},
        })  # fmt: skip
    return _yaml_docs(docs, [
        "Kueue Topology and one ResourceFlavor per fabric, generated by Weft",
        "the nodes need the hierarchy labels: export the 'labels' format",
    ])  # fmt: skip


def kai_yaml(view: _View, name: str = "weft") -> str:
    doc = {
        "apiVersion": KAI_API,
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": _levels()},
    }
    return _yaml_docs([doc], [
        "KAI Scheduler Topology, generated by Weft",
        "the nodes need the hierarchy labels: export the 'labels' format",
    ])  # fmt: skip


def volcano_yaml(view: _View, name: str = "weft") -> str:
    used: set[str] = set()
    names = {key: _object_name(name, view.locality.domains[key], used) for key in sorted(view.hosts)}
    docs = []
    for key in sorted(view.hosts, key=lambda k: (view.locality.domains[k].tier, k)):
        d = view.locality.domains[key]
        if d.tier == UNIT_TIER:
            members = [{"type": "Node", "selector": {"exactMatch": {"name": h}}} for h in view.hosts[key]]
        else:
            members = [
                {"type": "HyperNode", "selector": {"exactMatch": {"name": names[c.key]}}}
                for c in _children(view, d)
            ]
        docs.append({
            "apiVersion": VOLCANO_API, "kind": "HyperNode",
            "metadata": {"name": names[key],
                         "labels": {f"{LABEL_PREFIX}/tier": d.tier_name.replace("_", "-")},
                         "annotations": {f"{LABEL_PREFIX}/domain": d.key, f"{LABEL_PREFIX}/name": d.name}},
            "spec": {"tier": d.tier, "members": members},
        })  # fmt: skip
    return _yaml_docs(docs, [
        "Volcano HyperNodes, generated by Weft: tier 1 leaf or rail-optimised pod, 2 block, 3 spine group, 4 fabric",
    ])  # fmt: skip


# --- entry point ---------------------------------------------------------------------------------


def export(locality: Locality, fmt: str, *, fabric_ids: Iterable[int] | None = None,
           nodes: set[str] | None = None, name: str = "weft") -> Export:  # fmt: skip
    """The ``fmt`` export (:data:`FORMATS`) of ``locality``'s fabrics ``fabric_ids`` (all when
    None), restricted to ``nodes`` (the target's node names) when given.

    Raises :class:`ExportError` for an unknown format, no fabric, or no host left to write.
    """
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    warnings: list[str] = []
    k8s = fmt in ("kueue", "volcano", "kai", "labels")
    view = _view(locality, fabric_ids, nodes, warnings,
                 name_rule=k8s_name_problem if k8s else check_name,
                 target="Kubernetes" if k8s else "Slurm")  # fmt: skip
    if fmt in ("slurm-block", "slurm-yaml"):
        left_out = block_units(view).left_out
        if left_out:
            hosts = sum(len(view.hosts[u.key]) for u in left_out)
            warnings.append(
                f"block form: {len(left_out)} units smaller than the base block left out ({hosts} hosts): "
                + _listed(u.name for u in left_out)
            )
    if fmt == "slurm-tree":
        text = slurm_tree(view)
    elif fmt == "slurm-block":
        text = slurm_block(view)
    elif fmt == "slurm-yaml":
        text = slurm_yaml(view, name)
    elif fmt == "kueue":
        text = kueue_yaml(view, name)
    elif fmt == "kai":
        text = kai_yaml(view, name)
    elif fmt == "volcano":
        text = volcano_yaml(view, name)
    else:
        text = labels_yaml(view)
    return Export(text, MEDIA_TYPES[fmt], warnings)


# --- reading topology.conf back (tests, checks) ---------------------------------------------------


@dataclass(slots=True)
class ConfLine:
    """One parsed ``topology.conf`` line: ``kind`` (``switch``, ``block``, ``block_sizes``),
    ``name``, expanded ``nodes`` and ``switches``, ``sizes``, 1-based ``line``."""

    kind: str
    name: str = ""
    nodes: list[str] | None = None
    switches: list[str] | None = None
    sizes: list[int] | None = None
    line: int = 0


def parse_topology_conf(text: str, source: str = "topology.conf") -> list[ConfLine]:
    """Read a Slurm ``topology.conf`` (tree or block form) as Slurm would: keys case-insensitive,
    ``#`` to the end of the line a comment, host lists expanded (:func:`scheduler.hostlist.expand`).
    Checks Slurm's rules: a name on every line, ≤ 64 characters, unique; not both ``Nodes=`` and
    ``Switches=``; every child switch defined; no switch below itself (a tree); no block smaller
    than the first of ``BlockSizes`` (``block_record.c``); ``BlockSizes`` positive multiples of the
    first by powers of two. Raises :class:`~core.errors.LocatedError` (source, line) at the first
    break."""
    out: list[ConfLine] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        pairs = {}
        for word in line.split():
            key, sep, value = word.partition("=")
            if not sep or not value:
                raise LocatedError(f"expected KEY=VALUE, got {word!r}", source, n)
            pairs[key.lower()] = value
        try:
            if "switchname" in pairs:
                name = pairs["switchname"]
                if len(name) > SLURM_NAME_MAX:
                    raise LocatedError(f"switch name {name!r} is longer than {SLURM_NAME_MAX}", source, n)
                if "nodes" in pairs and "switches" in pairs:
                    raise LocatedError(f"switch {name} has both child switches and nodes", source, n)
                out.append(ConfLine("switch", name,
                                    expand(pairs["nodes"]) if "nodes" in pairs else None,
                                    expand(pairs["switches"]) if "switches" in pairs else None, line=n))  # fmt: skip
            elif "blockname" in pairs:
                if "nodes" not in pairs:
                    raise LocatedError(f"block {pairs['blockname']} has no nodes", source, n)
                out.append(ConfLine("block", pairs["blockname"], expand(pairs["nodes"]), line=n))
            elif "blocksizes" in pairs:
                sizes = [int(s) for s in pairs["blocksizes"].split(",")]
                if (
                    not sizes
                    or sizes[0] <= 0
                    or any(s % sizes[0] or (s // sizes[0]) & (s // sizes[0] - 1) for s in sizes)
                ):
                    raise LocatedError(
                        f"BlockSizes {pairs['blocksizes']}: base, then base times powers of two", source, n
                    )
                out.append(ConfLine("block_sizes", sizes=sizes, line=n))
            else:
                raise LocatedError("a line needs SwitchName=, BlockName= or BlockSizes=", source, n)
        except (HostlistError, ValueError) as exc:
            if isinstance(exc, LocatedError):
                raise
            raise LocatedError(str(exc), source, n) from None
    names: dict[str, int] = {}
    for c in out:
        if c.kind in ("switch", "block"):
            if c.name in names:
                raise LocatedError(
                    f"{c.kind} {c.name} is already defined on line {names[c.name]}", source, c.line
                )
            names[c.name] = c.line
    for c in out:
        for child in c.switches or []:
            if child not in names:
                raise LocatedError(f"switch {c.name} has undefined child {child!r}", source, c.line)
    _check_tree(out, source)
    sizes = next((c.sizes for c in out if c.kind == "block_sizes" and c.sizes), None)
    for c in out:
        if sizes and c.kind == "block" and len(set(c.nodes or [])) < sizes[0]:
            raise LocatedError(
                f"block {c.name} has {len(set(c.nodes or []))} nodes, fewer than the base block size "
                f"{sizes[0]} (slurmctld: children count lower than bblock_node_cnt)", source, c.line
            )  # fmt: skip
    return out


def _check_tree(lines: list[ConfLine], source: str) -> None:
    """Slurm's tree rule (``switch_record.c``: a switch's level is one more than its highest
    child's, resolved in at most 20 passes, else ``fatal: Switch configuration is not a tree``):
    no switch below itself.

    Raises:
        LocatedError: at the first switch found on a cycle of ``Switches=``.
    """
    children = {c.name: c.switches or [] for c in lines if c.kind == "switch"}
    line_of = {c.name: c.line for c in lines if c.kind == "switch"}
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    for root in children:
        if root in state:
            continue
        stack = [(root, iter(children[root]))]
        state[root] = 1
        while stack:
            name, it = stack[-1]
            child = next(it, None)
            if child is None:
                state[name] = 2
                stack.pop()
            elif state.get(child) == 1:
                raise LocatedError(
                    f"switch {child} is below itself (through {name}): not a tree", source, line_of[child]
                )
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(children[child])))
