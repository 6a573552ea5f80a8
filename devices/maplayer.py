"""The Ethernet layer of a fabric's network map (``fabric.api.maplayout.register_layer``): the
SNMP devices and the systems their LLDP neighbours name, and the Ethernet links between them,
drawn beside the IB links.

Payload part ``ethernet`` of ``/api/fabric/fabrics/{id}/map/`` (parallel arrays, like the IB part)::

    {"nodes": {"name": [...], "kind": ["switch" | "host"], "device": [device id | null],
               "ib": [index of the IB node it is the management agent of, or -1], "x": [...], "y": [...],
               "disabled": [device whose polling is disabled], "stale": [disabled, or an LLDP system
               only such devices report]},
     "edges": {"a": [eth node index], "b": [...], "n": [cables], "down": [cables down],
               "speed_mbps": [slowest ifHighSpeed of the cables, or null],
               "stale": [seen only by devices whose polling is disabled: last-known, not live]},
     "counts": {"switches", "hosts", "links" (live cables), "down_links", "stale_links", "disabled"}}

A device whose polling is disabled stays on the map (it is still managed; the devices list shows
it as "Polling disabled"), greyed, with its last-known links greyed (``stale``) and not counted
as live links: nothing refreshes them, and its alarms were cleared when it was disabled.

Which devices: those of the fabric, and those managing an IB switch of it (``Device.node``),
drawn at that switch's place; the other devices and the LLDP-only systems (hosts, unmanaged
switches) are laid out by ``fabric.api.maplayout.compute_layout`` in a band below the IB drawing.
A cable seen from both ends counts once (per pair, the larger of the two sides' counts); a
cable whose ``device.link_down`` alarm is open is counted under ``down`` (its Neighbour row is
gone, as an IB link's is).

Live: an open map applies this part in place from the light payload (``?part=edges``), new and
gone nodes included. It refreshes on ``summary.changed`` with source ``devices``, which
:func:`announce` sends when a poll changed the layer (:func:`layer_states` before and after, as
``cache_part`` sees it) and when a device is added, changed or deleted
(``devices.services.config``); a cable going down comes with its ``device.link_down`` alarm.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.db.models import Count, Max, Q

from events.models import Alarm
from fabric.api.maplayout import LEAF, LayoutNode, compute_layout

from .models import Device, Neighbour


def _devices(fabric) -> list[Device]:
    return list(
        Device.objects.filter(Q(fabric=fabric) | Q(node__fabric=fabric))
        .order_by("name")
        .only("id", "name", "sys_name", "node_id", "fabric_id", "enabled")
    )


def build(fabric, payload: dict) -> dict:
    """The ``ethernet`` part of the map of ``fabric`` (see the module docstring); ``payload`` is
    the IB part already built (its node ids and positions)."""
    devices = _devices(fabric)
    ib_index = {node_id: k for k, node_id in enumerate(payload["nodes"]["id"])}
    names: list[str] = []
    kinds: list[str] = []
    dev_ids: list[int | None] = []
    disabled: list[bool] = []
    ib: list[int] = []
    by_name: dict[str, int] = {}

    def add(name: str, kind: str, device: Device | None) -> int:
        by_name[name.lower()] = len(names)
        names.append(name)
        kinds.append(kind)
        dev_ids.append(device.pk if device else None)
        disabled.append(device is not None and not device.enabled)
        ib.append(ib_index.get(device.node_id, -1) if device is not None and device.node_id else -1)
        return len(names) - 1

    for d in devices:
        k = add(d.name, "switch", d)
        if d.sys_name:
            by_name.setdefault(d.sys_name.lower(), k)
    pairs: dict[tuple[int, int], dict] = {}
    rows = (
        Neighbour.objects.filter(device__in=devices)
        .order_by("device_id", "local_port")
        .values_list("device__name", "sys_name", "chassis_id", "interface__speed_mbps", "remote__name")
    )
    for local, sys_name, chassis, speed, remote_name in rows:
        a = by_name[local.lower()]
        other = remote_name or sys_name or chassis
        b = by_name.get(other.lower())
        if b is None:
            b = add(other, "host", None)
        if a == b:
            continue
        pair = (a, b) if a < b else (b, a)
        entry = pairs.setdefault(pair, {"sides": {}, "speed": None})
        entry["sides"][a] = entry["sides"].get(a, 0) + 1
        if speed and (entry["speed"] is None or speed < entry["speed"]):
            entry["speed"] = speed
    down = _down(devices, by_name, lambda name: add(name, "host", None))
    for pair in down:
        pairs.setdefault(pair, {"sides": {}, "speed": None})

    # positions: at the IB switch a device manages, else in a band below the IB drawing
    free = [k for k in range(len(names)) if ib[k] < 0]
    local_index = {k: j for j, k in enumerate(free)}
    # switches as leaves (one row, by name), hosts below by the barycentre of their switches
    layout_nodes = [LayoutNode(1 if kinds[k] == "switch" else 0, LEAF, names[k]) for k in free]
    layout_edges = [
        (local_index[a], local_index[b]) for a, b in pairs if a in local_index and b in local_index
    ]
    fx, fy = compute_layout(layout_nodes, layout_edges)
    ix, iy = payload["nodes"]["x"], payload["nodes"]["y"]
    width = (max(ix) - min(ix)) if ix else 0.0
    own_width = (max(fx) - min(fx)) if fx else 0.0
    scale = width / own_width if width and own_width else 1.0
    gap = max(width / 8.0, 4.0)
    top = (min(iy) - gap) if iy else 0.0
    x0 = min(ix) if ix else 0.0
    xs, ys = [0.0] * len(names), [0.0] * len(names)
    for k in range(len(names)):
        if ib[k] >= 0:
            xs[k], ys[k] = ix[ib[k]], iy[ib[k]]
        else:
            j = local_index[k]
            xs[k] = round(x0 + (fx[j] - (min(fx) if fx else 0.0)) * scale, 3)
            ys[k] = round(top + fy[j], 3)
    edges = {"a": [], "b": [], "n": [], "down": [], "speed_mbps": [], "stale": []}
    live = [False] * len(names)  # a node with a link some polled device still reports
    for (a, b), entry in pairs.items():
        edges["a"].append(a)
        edges["b"].append(b)
        edges["n"].append(max(entry["sides"].values(), default=0))
        edges["down"].append(down.get((a, b), 0))
        edges["speed_mbps"].append(entry["speed"])
        # seen only by devices whose polling is disabled: their last-known LLDP rows
        stale = bool(entry["sides"]) and all(disabled[k] for k in entry["sides"]) and not down.get((a, b))
        edges["stale"].append(stale)
        if not stale:
            live[a] = live[b] = True
    node_stale = [disabled[k] or (dev_ids[k] is None and not live[k]) for k in range(len(names))]
    cables = [(n, st) for n, st in zip(edges["n"], edges["stale"], strict=True)]
    return {
        "nodes": {
            "name": names,
            "kind": kinds,
            "device": dev_ids,
            "ib": ib,
            "x": xs,
            "y": ys,
            "disabled": disabled,
            "stale": node_stale,
        },  # fmt: skip
        "edges": edges,
        "counts": {
            "switches": kinds.count("switch"),
            "hosts": kinds.count("host"),
            "links": sum(n for n, st in cables if not st),
            "down_links": sum(edges["down"]),
            "stale_links": sum(n for n, st in cables if st),
            "disabled": sum(disabled),
        },
    }


def _down(devices: list[Device], by_name: dict[str, int], add) -> dict[tuple[int, int], int]:
    """``{(eth node index, eth node index): cables}`` of the open ``device.link_down`` alarms of
    ``devices``; a remote system no longer seen anywhere is added (``add(name)``) so that its
    cable stays drawn, down. The ends come from the alarm's details (``device``, ``remote``;
    ``services.poll._link_spec``); an older alarm without them is matched by its key
    ``<device>/<local port>-<remote>/<remote port>`` against the names on the layer."""
    out: dict[tuple[int, int], int] = {}
    names = {d.name for d in devices}
    alarms = Alarm.objects.open().filter(code="device.link_down").values_list("object_key", "details")
    for key, details in alarms:
        dev_name, remote = (details or {}).get("device"), (details or {}).get("remote")
        if dev_name is None:
            dev_name = next((n for n in names if key.startswith(n + "/")), None)
            rest = key[len(dev_name) + 1 :] if dev_name else ""
            remote = next((n for n in by_name if f"-{n}/" in rest.lower()), None)
        if dev_name not in names or not remote:
            continue
        a = by_name[dev_name.lower()]
        b = by_name.get(remote.lower())
        if b is None:
            b = add(remote)
        if a == b:
            continue
        pair = (a, b) if a < b else (b, a)
        out[pair] = out.get(pair, 0) + 1
    return out


def cache_part(fabric) -> str:
    """Changes with the fabric's devices, their LLDP rows and the open Ethernet link-down alarms."""
    devices = Device.objects.filter(Q(fabric=fabric) | Q(node__fabric=fabric))
    d = devices.aggregate(n=Count("id"), last=Max("id"), on=Count("id", filter=Q(enabled=True)))
    nb = Neighbour.objects.filter(device__in=devices).aggregate(n=Count("id"), last=Max("id"))
    down = Alarm.objects.open().filter(code="device.link_down").aggregate(n=Count("id"), last=Max("id"))
    return f"{d['n']}.{d['last']}.{d['on']}.{nb['n']}.{nb['last']}.{down['n']}.{down['last']}"


def fabric_ids(devices: Iterable[Device]) -> set[int]:
    """Ids of the fabrics whose map draws ``devices``: each one's own fabric and the IB fabric of
    the switch it manages (``Device.node``), as :func:`_devices` selects them."""
    from fabric.models import Node

    out = {d.fabric_id for d in devices if d.fabric_id is not None}
    nodes = {d.node_id for d in devices if d.node_id is not None}
    if nodes:
        out |= set(Node.objects.filter(pk__in=nodes).values_list("fabric_id", flat=True))
    return out


def layer_states(ids: Iterable[int]) -> dict[int, str]:
    """``{fabric id: cache_part}`` now, to compare after a change (:func:`changed_since`)."""
    return {f: cache_part(f) for f in ids}


def changed_since(before: dict[int, str]) -> list[int]:
    """The fabrics of ``before`` (:func:`layer_states`) whose layer is no longer what it was."""
    return [f for f, state in before.items() if cache_part(f) != state]


def announce(ids: Iterable[int]) -> None:
    """After the current transaction commits, tell the open maps (and dashboards) of fabrics
    ``ids`` that the Ethernet layer changed: ``summary.changed`` with source ``devices`` on the
    fabric's alarm group (``events.realtime.publish_summary_changed``); best effort, never raises."""
    from events.realtime import publish_summary_changed

    for f in sorted(set(ids)):
        transaction.on_commit(lambda f=f: publish_summary_changed(f, "devices"))
