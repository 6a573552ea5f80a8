"""Node rows: diff the parse against the stored nodes, write the changes in bulk, and their events
(``node.added``, ``node.removed``, ``node.lid_changed``, ``node.description_changed``)."""

from __future__ import annotations

from django.utils import timezone

from core.bulk import insert_rows

from ...models import Fabric, Node
from ...parsers.records import Topology
from .changes import Changes, change_event, type_name
from .columns import NODE_FIELDS
from .common import BATCH, fetch_rows
from .plan import Plan
from .reach import Reach


def sync_nodes(
    fabric: Fabric,
    topo: Topology,
    plan: Plan,
    stored_nodes: dict[str, tuple[int, int | None, bool]],
    scope: set[str] | None,
    reach: Reach,
    ch: Changes,
) -> dict[str, int]:
    """Diff and write the node rows of ``scope`` (None: all); returns GUID → id of every stored
    and new node."""
    qs = Node.objects.filter(fabric=fabric)
    if scope is not None:
        qs = qs.filter(id__in=[stored_nodes[g][0] for g in scope if g in stored_nodes])
    stored = (
        {}
        if ch.initial
        else {
            row[1]: (row[0], row[2:]) for row in fetch_rows(qs.values_list("id", "node_guid", *NODE_FIELDS))
        }
    )
    now = timezone.now()
    new_rows: list[tuple] = []
    updates: list[Node] = []
    update_fields: set[str] = set()
    for guid, node in topo.nodes.items():
        if scope is not None and guid not in scope:
            continue
        values = plan.nodes[guid]
        old = stored.get(guid)
        if old is None:
            new_rows.append((fabric.pk, guid, *values, plan.digests[guid], now, now))
            ch.added["nodes"].append(guid)
            if not ch.initial:
                ch.events.append(
                    change_event(
                        "node.added",
                        f"{type_name(node.node_type)} {node.label or guid} ({guid}) appeared",
                        object_type="node",
                        object_key=guid,
                        object_repr=node.label or guid,
                        details={"node_type": node.node_type, "lid": node.lid},
                    )
                )
            continue
        node_id, old_values = old
        if old_values == values:
            continue
        diffs = {f: [o, n] for f, o, n in zip(NODE_FIELDS, old_values, values, strict=False) if o != n}
        obj = Node(
            id=node_id,
            node_guid=guid,
            fabric=fabric,
            last_seen=now,
            **dict(zip(NODE_FIELDS, values, strict=False)),
        )
        updates.append(obj)
        update_fields.update(diffs)
        ch.changed["nodes"].append(
            {"key": guid, "fields": {k: v for k, v in diffs.items() if k != "host_id"}}
        )
        label = node.label or guid
        if "lid" in diffs:
            ch.events.append(
                change_event(
                    "node.lid_changed",
                    f"switch {label} LID {diffs['lid'][0]} → {diffs['lid'][1]}",
                    object_type="node",
                    object_key=guid,
                    object_repr=label,
                    node_id=node_id,
                    details={"old": diffs["lid"][0], "new": diffs["lid"][1]},
                )
            )
        if "description" in diffs and diffs["description"][0].strip() != diffs["description"][1].strip():
            # (a change of leading/trailing spaces only is stored, not reported: display trims)
            ch.events.append(
                change_event(
                    "node.description_changed",
                    f"{guid} description {diffs['description'][0]!r} → {diffs['description'][1]!r}",
                    object_type="node",
                    object_key=guid,
                    object_repr=label,
                    node_id=node_id,
                    details={"old": diffs["description"][0], "new": diffs["description"][1]},
                )
            )
    if updates:
        Node.objects.bulk_update(updates, sorted(update_fields | {"last_seen"}), batch_size=BATCH)
        ch.rows += len(updates)
    new_ids = None
    if new_rows:
        cols = ["fabric_id", "node_guid", *NODE_FIELDS, "digest", "first_seen", "last_seen"]
        new_ids = insert_rows(Node, cols, new_rows, with_ids=True)
        ch.rows += len(new_rows)
    if reach.gone:
        gone = [(guid, v[0]) for guid, v in stored.items() if guid in reach.gone]
        if gone:
            descs = dict(Node.objects.filter(id__in=[i for _, i in gone]).values_list("id", "name"))
            for guid, node_id in gone:
                ch.removed["nodes"].append(guid)
                ch.gone_names[guid] = descs.get(node_id) or ""
                ch.events.append(
                    change_event(
                        "node.removed",
                        f"{descs.get(node_id) or guid} ({guid}) is no longer on the fabric",
                        object_type="node",
                        object_key=guid,
                        object_repr=descs.get(node_id) or guid,
                    )
                )
    ids = {guid: v[0] for guid, v in stored_nodes.items()}
    if new_ids:
        ids.update(zip((row[1] for row in new_rows), new_ids, strict=True))
    elif new_rows:
        ids = dict(fetch_rows(Node.objects.filter(fabric=fabric).values_list("node_guid", "id")))
    return ids
