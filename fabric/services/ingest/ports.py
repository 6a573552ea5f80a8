"""Port rows: diff the parse against the stored ports (a port no longer reported goes Down), write
the changes in bulk, and their events (``port.lid_changed``, ``port.state_changed``)."""

from __future__ import annotations

from core.bulk import insert_rows

from ...choices import PortState
from ...keys import port_key
from ...models import Fabric, Port
from ...parsers.records import SWITCH, Topology
from .changes import Changes, change_event, port_repr
from .columns import PORT_FIELDS, PORT_PHYS_STATE, PORT_STATE
from .common import BATCH, fetch_rows
from .plan import Plan
from .reach import Reach


def sync_ports(
    fabric: Fabric,
    topo: Topology,
    plan: Plan,
    node_ids: dict[str, int],
    scope: set[str] | None,
    reach: Reach,
    ch: Changes,
) -> dict[tuple[str, int], int]:
    """Diff and write the port rows of the nodes in ``scope`` (None: all); returns (GUID, port)
    → id of their ports."""
    guid_of = {v: k for k, v in node_ids.items()}
    stored: dict[tuple[str, int], tuple[int, tuple]] = {}
    if not ch.initial:
        if scope is None:
            qs = Port.objects.filter(node__fabric=fabric)
        else:
            qs = Port.objects.filter(node_id__in=[node_ids[g] for g in scope if g in node_ids])
        for row in fetch_rows(qs.values_list("id", "node_id", "port_num", *PORT_FIELDS)):
            stored[(guid_of[row[1]], row[2])] = (row[0], row[3:])
    switch_guids = {g for g, n in topo.nodes.items() if n.node_type == SWITCH}
    new_rows: list[tuple] = []
    new_keys: list[tuple[str, int]] = []
    updates: list[Port] = []
    update_fields: set[str] = set()
    planned = plan.ports
    for key in topo.ports:
        if scope is not None and key[0] not in scope:
            continue
        values = planned[key]
        old = stored.get(key)
        if old is None:
            new_rows.append((node_ids[key[0]], key[1], *values))
            new_keys.append(key)
            continue
        port_id, old_values = old
        if old_values == values:
            continue
        if key in reach.fresher:
            ch.unsynced.add(key[0])
            continue
        _port_update(
            key,
            port_id,
            node_ids,
            old_values,
            values,
            key[0] in switch_guids,
            updates,
            update_fields,
            ch,
            name=port_repr(topo, key),
        )
    # ports of nodes still present but no longer reported: their link is gone → Down (not a port
    # behind a failed MAD of a partial run, nor one leading to a node it did not reach)
    for key, (port_id, old_values) in stored.items():
        if key in topo.ports or key[0] not in topo.nodes:
            continue
        if old_values[PORT_STATE] == PortState.DOWN:
            continue
        if reach.keeps_port(key):
            ch.unsynced.add(key[0])
            continue
        values = list(old_values)
        values[PORT_STATE] = PortState.DOWN
        values[PORT_PHYS_STATE] = 0
        _port_update(
            key,
            port_id,
            node_ids,
            old_values,
            tuple(values),
            key[0] in switch_guids,
            updates,
            update_fields,
            ch,
            name=port_repr(topo, key),
        )
    if updates:
        Port.objects.bulk_update(updates, sorted(update_fields), batch_size=BATCH)
        ch.rows += len(updates)
    ids = {key: v[0] for key, v in stored.items()}
    if new_rows:
        new_ids = insert_rows(Port, ["node_id", "port_num", *PORT_FIELDS], new_rows, with_ids=True)
        ch.rows += len(new_rows)
        if new_ids is not None:
            ids.update(zip(new_keys, new_ids, strict=True))
        else:
            wanted = {g for g, _ in new_keys}
            for port_id, node_id, num in fetch_rows(
                Port.objects.filter(node_id__in=[node_ids[g] for g in wanted]).values_list(
                    "id", "node_id", "port_num"
                )
            ):
                ids[(guid_of[node_id], num)] = port_id
    return ids


def _port_update(
    key, port_id, node_ids, old_values, values, is_switch, updates, update_fields, ch, *, name: str
) -> None:
    diffs = {f: [o, n] for f, o, n in zip(PORT_FIELDS, old_values, values, strict=False) if o != n}
    obj = Port(
        id=port_id, node_id=node_ids[key[0]], port_num=key[1], **dict(zip(PORT_FIELDS, values, strict=False))
    )
    updates.append(obj)
    update_fields.update(diffs)
    port_key_str = port_key(*key)
    ch.changed["ports"].append({"key": port_key_str, "fields": diffs})
    if "lid" in diffs and not is_switch:
        ch.events.append(
            change_event(
                "port.lid_changed",
                f"port {name} LID {diffs['lid'][0]} → {diffs['lid'][1]}",
                object_type="port",
                object_key=port_key_str,
                object_repr=name,
                port_id=port_id,
                details={"old": diffs["lid"][0], "new": diffs["lid"][1]},
            )
        )
    if "state" in diffs:
        names = dict(PortState.choices)
        ch.events.append(
            change_event(
                "port.state_changed",
                f"port {name} {names.get(diffs['state'][0], '?')} → {names.get(diffs['state'][1], '?')}",
                object_type="port",
                object_key=port_key_str,
                object_repr=name,
                port_id=port_id,
                details={"old": diffs["state"][0], "new": diffs["state"][1]},
            )
        )
