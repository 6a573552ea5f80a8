"""Synthetic :class:`~scheduler.locality.Locality` trees for the placement tests and bench.

Built directly (no database): ``tree`` makes a fabric of spine groups × blocks × leaves × hosts
(a 2-level fat tree is ``tree(1, 1, leaves, hosts)``, a 3-level one ``tree(1, blocks, leaves,
hosts)``); ``rail_pods`` a rail-optimised fabric whose units are pods of rail leaves sharing one
host set; ``merge`` puts fabrics side by side (never joined). Keys look like the real ones
(``f1/leaf/0x…``) and host names sort in tree order (``f1n00001``…).
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.locality import Domain, HostSite, Locality


def _guid(fabric_id: int, kind: int, n: int) -> str:
    return f"0x{fabric_id:04x}{kind:02x}{n:010x}"


def tree(
    spine_groups: int,
    blocks: int,
    leaves: int,
    hosts: int | Sequence[int],
    gpus: int = 8,
    fabric_id: int = 1,
) -> Locality:
    """``spine_groups`` × ``blocks`` (per group) × ``leaves`` (per block) leaves with ``hosts``
    hosts each (an int, or one count per leaf in tree order) of ``gpus`` GPUs each."""
    loc = Locality()
    f = fabric_id
    fab_key = f"f{f}/fabric"
    fab_children: list[str] = []
    leaf_n = host_n = 0
    all_hosts: list[str] = []
    for g in range(spine_groups):
        sg_key = f"f{f}/spine_group/{_guid(f, 3, g)}"
        fab_children.append(sg_key)
        sg_children, sg_hosts = [], []
        for b in range(blocks):
            blk_key = f"f{f}/block/{_guid(f, 2, g * blocks + b)}"
            sg_children.append(blk_key)
            blk_children, blk_hosts = [], []
            for _ in range(leaves):
                guid = _guid(f, 1, leaf_n)
                n_hosts = hosts if isinstance(hosts, int) else hosts[leaf_n]
                leaf_n += 1
                unit_key = f"f{f}/leaf/{guid}"
                blk_children.append(unit_key)
                names = []
                for _ in range(n_hosts):
                    host_n += 1
                    name = f"f{f}n{host_n:05d}"
                    names.append(name)
                    loc.hosts[name] = HostSite(
                        name=name, host_id=f * 1_000_000 + host_n, fabric_id=f, gpus=gpus, rails=(guid,),
                        path=(unit_key, blk_key, sg_key, fab_key),
                    )  # fmt: skip
                loc.domains[unit_key] = Domain(
                    key=unit_key, tier=1, name=f"f{f}-leaf{leaf_n}", fabric_id=f, parent=blk_key,
                    switches=(guid,), hosts=tuple(names), children=tuple(names),
                )  # fmt: skip
                blk_hosts += names
            loc.domains[blk_key] = Domain(
                key=blk_key, tier=2, name=f"f{f}-block{g * blocks + b + 1}", fabric_id=f, parent=sg_key,
                hosts=tuple(blk_hosts), children=tuple(blk_children),
            )  # fmt: skip
            sg_hosts += blk_hosts
        loc.domains[sg_key] = Domain(
            key=sg_key, tier=3, name=f"f{f}-group{g + 1}", fabric_id=f, parent=fab_key,
            hosts=tuple(sg_hosts), children=tuple(sg_children),
        )  # fmt: skip
        all_hosts += sg_hosts
    loc.domains[fab_key] = Domain(
        key=fab_key, tier=4, name=f"fabric{f}", fabric_id=f, parent=None,
        hosts=tuple(sorted(all_hosts)), children=tuple(fab_children),
    )  # fmt: skip
    return loc


def fat_tree(leaves: int, hosts: int | Sequence[int], gpus: int = 8, fabric_id: int = 1) -> Locality:
    """A 2-level fat tree: ``leaves`` leaves under one set of spines (one block, one group)."""
    return tree(1, 1, leaves, hosts, gpus, fabric_id)


def rail_pods(
    blocks: int, pods: int, rails: int, hosts: int | Sequence[int], gpus: int = 8, fabric_id: int = 1
) -> Locality:
    """A rail-optimised fabric: ``blocks`` × ``pods`` pods; each pod is ``rails`` rail leaves
    cabled to the same ``hosts`` hosts (HCA *r* of a host on rail leaf *r*), collapsed into one
    unit whose switches are the rail leaves."""
    loc = tree(1, blocks, pods, hosts, gpus, fabric_id)
    f = fabric_id
    for key, dom in list(loc.domains.items()):
        if dom.tier != 1:
            continue
        pod = int(dom.switches[0], 16) & 0xFFFFFFFFFF
        rail_guids = tuple(_guid(f, 0x10 + r, pod) for r in range(rails))
        loc.domains[key] = Domain(
            key=key, tier=1, name="+".join(f"pod{pod + 1}-rail{r + 1}" for r in range(rails)), fabric_id=f,
            parent=dom.parent, switches=rail_guids, hosts=dom.hosts, children=dom.children,
        )  # fmt: skip
        for h in dom.hosts:
            s = loc.hosts[h]
            loc.hosts[h] = HostSite(s.name, s.host_id, s.fabric_id, s.gpus, rail_guids, s.path)
    return loc


def merge(*localities: Locality) -> Locality:
    """Fabrics side by side in one index (their keys and host names must not collide)."""
    out = Locality()
    for loc in localities:
        out.hosts.update(loc.hosts)
        out.domains.update(loc.domains)
        out.warnings += loc.warnings
    return out
