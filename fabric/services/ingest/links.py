"""Link rows: diff the parse's links against the stored ones, write the changes in bulk, and their
events (``link.up``, ``link.down``, ``link.degraded``)."""

from __future__ import annotations

from django.db.models import Q
from django.utils import timezone

from core.bulk import insert_rows

from ...keys import LinkKey, link_ends, link_key_str
from ...models import Fabric, Link, Port
from ...parsers.records import Topology
from ..isolation import clear_seen_linked, isolated_keys
from .changes import Changes, change_event, link_repr
from .columns import LINK_FIELDS
from .common import BATCH, fetch_rows
from .plan import Plan
from .reach import Reach


def sync_links(
    fabric: Fabric,
    topo: Topology,
    plan: Plan,
    port_ids: dict[tuple[str, int], int],
    scope: set[str] | None,
    reach: Reach,
    ch: Changes,
):
    """Diff and write the links with an end on a node of ``scope`` (None: all links)."""
    stored: dict[LinkKey, tuple[int, tuple]] = {}
    if not ch.initial and scope is None:
        port_key_of = {v: k for k, v in port_ids.items()}
        for link_id, a, b, *vals in fetch_rows(
            Link.objects.filter(fabric=fabric).values_list("id", "port_a_id", "port_b_id", *LINK_FIELDS)
        ):
            stored[link_ends(*port_key_of[a], *port_key_of[b])] = (link_id, tuple(vals))
    elif not ch.initial:
        # the links at the scope's ports, with their far ends' natural keys (those may lie outside)
        mine = [pid for (g, _), pid in port_ids.items() if g in scope]
        qs = Link.objects.filter(fabric=fabric).filter(Q(port_a_id__in=mine) | Q(port_b_id__in=mine))
        for link_id, a, ga, pa, b, gb, pb, *vals in fetch_rows(
            qs.values_list("id", "port_a_id", "port_a__node__node_guid", "port_a__port_num",
                           "port_b_id", "port_b__node__node_guid", "port_b__port_num", *LINK_FIELDS)
        ):  # fmt: skip
            stored[link_ends(ga, pa, gb, pb)] = (link_id, tuple(vals))
            port_ids.setdefault((ga, pa), a)
            port_ids.setdefault((gb, pb), b)
    wanted = {
        key: link
        for key, link in topo.links.items()
        if scope is None or key[0][0] in scope or key[1][0] in scope
    }
    used_ports = set()
    for key in topo.links:
        used_ports.update(key)
    to_delete: list[tuple[LinkKey, int]] = []
    for key, (link_id, _vals) in stored.items():
        if key in topo.links:
            continue
        if key[0] in used_ports or key[1] in used_ports or not reach.keeps_link(key):
            to_delete.append((key, link_id))
        else:
            ch.unsynced.update(end[0] for end in key)
    if to_delete:
        Link.objects.filter(id__in=[i for _, i in to_delete]).delete()
        ch.rows += len(to_delete)
        expected = isolated_keys(fabric)  # an isolated port's link is down on purpose: no link.down
        for key, _ in to_delete:
            skey = link_key_str(key)
            ch.removed["links"].append(skey)
            if key[0] in expected or key[1] in expected:
                continue
            ch.events.append(
                change_event(
                    "link.down",
                    f"link {link_repr(topo, key, ch.gone_names)} is down (no longer seen)",
                    object_type="link",
                    object_key=skey,
                    object_repr=link_repr(topo, key, ch.gone_names),
                )
            )
    missing = {end for key in wanted if key not in stored for end in key if end not in port_ids}
    if missing:  # not expected (a new link changes the digests of both ends); read rather than fail
        rows = Port.objects.filter(node__fabric=fabric, node__node_guid__in={g for g, _ in missing})
        for guid, num, pid in fetch_rows(rows.values_list("node__node_guid", "port_num", "id")):
            port_ids.setdefault((guid, num), pid)
    new_rows: list[tuple] = []
    added: list[LinkKey] = []
    now = timezone.now()
    updates: list[Link] = []
    planned = plan.links
    for key, link in wanted.items():
        values = planned[key]
        old = stored.get(key)
        if old is None and (key[0] in reach.fresher or key[1] in reach.fresher):
            ch.unsynced.update(end[0] for end in key)
            continue  # a notice saw an end go down after this snapshot: the snapshot is older
        if old is None:
            pa, pb = port_ids[key[0]], port_ids[key[1]]
            if pa > pb:
                pa, pb = pb, pa
            new_rows.append((fabric.pk, pa, pb, *values, now))
            added.append(key)
            skey = link_key_str(key)
            ch.added["links"].append(skey)
            if not ch.initial:
                ch.events.append(
                    change_event(
                        "link.up",
                        f"link {link_repr(topo, key)} is up ({link.width}{link.speed})",
                        object_type="link",
                        object_key=skey,
                        object_repr=link_repr(topo, key),
                        details={"width": link.width, "speed": link.speed},
                    )
                )
            continue
        link_id, old_values = old
        if old_values == values:
            continue
        skey = link_key_str(key)
        updates.append(Link(id=link_id, **dict(zip(LINK_FIELDS, values, strict=True))))
        ch.changed["links"].append(
            {
                "key": skey,
                "fields": {"width": [old_values[0], values[0]], "speed": [old_values[1], values[1]]},
            }
        )
        old_rate, new_rate = old_values[2] or 0, values[2] or 0
        code = "link.up" if new_rate > old_rate else "link.degraded"
        ch.events.append(
            change_event(
                code,
                f"link {link_repr(topo, key)} {old_values[0]}{old_values[1]} → {link.width}{link.speed}",
                object_type="link",
                object_key=skey,
                object_repr=link_repr(topo, key),
                details={
                    "old": f"{old_values[0]}{old_values[1]}",
                    "new": f"{link.width}{link.speed}",
                    "old_rate_gbps": old_values[2],
                    "new_rate_gbps": values[2],
                },
            )
        )
    if updates:
        Link.objects.bulk_update(updates, list(LINK_FIELDS), batch_size=BATCH)
        ch.rows += len(updates)
    if new_rows:
        cols = ["fabric_id", "port_a_id", "port_b_id", *LINK_FIELDS, "first_seen"]
        ch.rows += insert_rows(Link, cols, new_rows)
        if not ch.initial:  # an isolated port linked again was enabled outside Weft: no longer isolated
            clear_seen_linked(fabric, {end for key in added for end in key})
