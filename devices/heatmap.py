"""Ethernet switches in the live heatmap (``telemetry.api.heatmap.register_rows``): one row per
SNMP device of the fabric, one cell per Ethernet interface, coloured by the rates the devices
poller already computed (``Interface.utilisation``/``congestion``, ``telemetry.semantics.
derive_wrapping``; nothing is recomputed here).

Rows: ``{"node": -device id, "guid": "", "name", "description": sysDescr's first line,
"lid": None, "tier": "ethernet", "tier_name": "Ethernet", "num_ports", "kind": "ethernet",
"url": the device page, "ports": {column: ifName}}``. Cells use the heatmap's format
(``telemetry.producer.Cell``): ``[-interface id, -device id, column, utilisation, congestion,
error_flag, stale, down]`` where the column is the interface's position (1..N, by ifIndex) among
the device's present Ethernet interfaces (ifType ethernetCsmacd and its older siblings), stale
when the interface has no rate this interval (first sample, reset, device unreachable) and down
when it is administratively up and operationally down (``devices.models.is_down``: not notPresent).

After a poll, :func:`publish` sends the fabric's Ethernet cells that changed as a
``heatmap.delta`` with ``"source": "devices"`` (the page applies it whatever the IB sweep id).
"""

from __future__ import annotations

import logging
import threading
import time

from django.core.cache import cache
from django.urls import reverse
from django.utils import timezone

from core import realtime
from telemetry.producer import (
    DELTA_TYPE,
    STATE_TTL_S,
    diff_cells,
    error_flag,
    heatmap_group,
    relay_payload,
    round_cell,
)

from .choices import PollStatus
from .models import Device, Interface, is_down

log = logging.getLogger(__name__)
_lock = threading.Lock()  # one publication at a time per process: the cached state stays in order

#: IANAifType values drawn: ethernetCsmacd(6), fastEther(62), fastEtherFX(69), gigabitEthernet(117)
ETHERNET_IF_TYPES = (6, 62, 69, 117)
TIER = "ethernet"


def _cells_and_rows(fabric_id: int) -> tuple[list[dict], list[list]]:
    devices = list(Device.objects.filter(fabric_id=fabric_id).order_by("name"))
    ifaces = (
        Interface.objects.filter(device__in=devices, present=True, if_type__in=ETHERNET_IF_TYPES)
        .order_by("device_id", "if_index")
        .values_list("id", "device_id", "name", "utilisation", "congestion", "error_deltas",
                     "in_bytes_per_s", "admin_status", "oper_status")
    )  # fmt: skip
    by_device: dict[int, list] = {}
    for row in ifaces:
        by_device.setdefault(row[1], []).append(row)
    rows, cells = [], []
    for d in devices:
        mine = by_device.get(d.pk, [])
        if not mine:
            continue
        polled_ok = d.status == PollStatus.OK
        ports = {}
        for col, (iid, _dev, name, util, cong, errs, rate, admin, oper) in enumerate(mine, start=1):
            ports[col] = name
            stale = int(not polled_ok or rate is None)
            down = int(is_down(admin, oper))
            cells.append(
                [-iid, -d.pk, col, round_cell(util), round_cell(cong), error_flag(errs), stale, down]
            )
        rows.append({
            "node": -d.pk, "guid": "", "name": d.name, "description": (d.sys_descr or "").splitlines()[0][:200]
            if d.sys_descr else "", "lid": None, "tier": TIER, "tier_name": "Ethernet", "num_ports": len(mine),
            "kind": "ethernet", "url": reverse("devices:device", args=[d.pk]), "ports": ports,
        })  # fmt: skip
    return rows, cells


def heatmap_rows(fabric) -> dict | None:
    """The Ethernet part of ``fabric``'s heatmap snapshot (see the module docstring)."""
    rows, cells = _cells_and_rows(fabric.pk)
    if not rows:
        return None
    return {
        "tier": {"tier": TIER, "name": "Ethernet (SNMP)", "rows": len(rows)},
        "rows": rows,
        "cells": cells,
    }


def state_key(fabric_id: int) -> str:
    """Cache key of the Ethernet cells last published for ``fabric_id`` (as the IB producer's)."""
    return f"weft:heatmap:ethernet-state:{fabric_id}"


def publish(fabric_id: int) -> dict | None:
    """Send the fabric's Ethernet cells that changed since the last publication (all of them,
    ``"full": True``, when there is none: ``telemetry.producer.diff_cells`` over the cache, as the
    IB producer) to its heatmap subscribers. Returns the payload, None when the fabric has no
    Ethernet row. Never raises (live updates are best effort; the snapshot is the truth)."""
    try:
        _rows, cells = _cells_and_rows(fabric_id)
        if not cells:
            return None
        with _lock:
            previous = cache.get(state_key(fabric_id))
            changed, state = diff_cells(previous, cells)
            cache.set(state_key(fabric_id), state, timeout=STATE_TTL_S)
        now = timezone.now().isoformat().replace("+00:00", "Z")
        payload = {"fabric": fabric_id, "sweep": 0, "at": now, "interval_s": 0.0, "status": "ok",
                   "cells": changed, "source": "devices", "published": time.time()}  # fmt: skip
        if previous is None:
            payload["full"] = True
        realtime.publish(heatmap_group(fabric_id), DELTA_TYPE, relay_payload(DELTA_TYPE, payload))
        return payload
    except Exception:
        log.exception("publishing the Ethernet heatmap cells of fabric %s failed", fabric_id)
        return None
