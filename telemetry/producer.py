"""The heatmap producer: after a sweep commits, publish what changed in the switch × port matrix.

The heatmap of a fabric is one cell per switch port (port 1..N of every switch; port 0 is the
switch's management port and carries no link traffic). A cell is the list
``[port_id, node_id, port_num, utilisation, congestion, error_flag, stale]``:

* ``utilisation`` — 0..1, max of the transmit and receive data rate over the link data rate
  (``PortCounters.utilisation``), rounded to :data:`PRECISION` decimals; ``None`` when no rate
  could be computed this interval (first sample, saturated or reset counter, not read);
* ``congestion`` — 0..1 congestion index from the PortXmitWait ticks per second
  (``PortCounters.congestion``, defined in ``telemetry.semantics``), rounded the same way;
* ``error_flag`` — 1 when any error counter (SymbolErrorCounter, PortRcvErrors, ...) rose during
  the last interval (``PortCounters.error_deltas`` has a positive value), else 0;
* ``stale`` — 1 when the last sweep could not read the port (``PortCounters.stale``) or the port
  was never read, else 0.

Each sweep publishes a :class:`HeatmapDelta` (encoded once, see :class:`RelayPayload`) to the group ``core.realtime.group_name("heatmap",
fabric_id)`` with message type ``heatmap.delta``: only the cells whose rounded values changed
since the previous publication for that fabric, or all cells (``"full": True``) when there is no
previous state (first sweep after start, or the shared cache lost it). The previous state lives
in the Django cache (Redis in production, so several Celery workers share it; process memory in
the embedded deployment, where the producer runs in the web process). A sweep whose status is
``failed`` also publishes a ``heatmap.stale`` notice (:class:`StaleNotice`).

Entry point: :func:`on_sweep_committed`, connected to ``telemetry.signals.sweep_committed`` in
``TelemetryConfig.ready()``; it never raises (live updates are best effort, the database is the
truth and the page reloads the snapshot on reconnect).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NotRequired, TypedDict

from django.conf import settings
from django.core.cache import cache

from core import realtime
from fabric.choices import NodeType, PortState
from fabric.models import Port

log = logging.getLogger(__name__)

#: Decimals kept for utilisation and congestion in a cell (0.1 % steps: finer than any colour
#: scale can show, coarse enough that counter noise does not resend the whole matrix).
PRECISION = 3
#: Seconds the previous state of a fabric's matrix is kept in the cache.
STATE_TTL_S = 24 * 3600
DELTA_TYPE = "heatmap.delta"
STALE_TYPE = "heatmap.stale"
TOPOLOGY_TYPE = "heatmap.topology"

#: ``[port_id, node_id, port_num, utilisation|None, congestion|None, error_flag, stale, down]``;
#: ``down`` is 1 for a port that carried a link (a sweep read it) and whose PortState is Down now
#: (a pulled cable, told by an SM notice, the port-state fallback or a discovery): its last rates
#: are history, not traffic, and the page draws it as a lost link.
Cell = list[Any]


class HeatmapDelta(TypedDict):
    """Payload of a ``heatmap.delta`` message (and the cell part of the snapshot API).

    ``at`` ISO 8601 start of the sweep (UTC), ``interval_s`` seconds since the previous sweep
    (the configured poll interval for the first one), ``published`` epoch seconds when the
    producer handed the message to the channel layer (used by ``bench/ws_latency.py``).
    """

    fabric: int
    sweep: int
    at: str
    interval_s: float
    status: str
    cells: list[Cell]
    full: NotRequired[bool]
    published: NotRequired[float]


class StaleNotice(TypedDict):
    """Payload of a ``heatmap.stale`` message: the sweep ``sweep`` of ``fabric`` failed."""

    fabric: int
    sweep: int
    at: str
    reason: str


def heatmap_group(fabric_id: int) -> str:
    """The Channels group of the heatmap subscribers of one fabric."""
    return realtime.group_name("heatmap", fabric_id)


def round_cell(value: float | None) -> float | None:
    """A rate of a heatmap cell rounded to :data:`PRECISION` digits (None stays None)."""
    if value is None:
        return None
    return round(float(value), PRECISION)


def error_flag(error_deltas: dict[str, Any] | None) -> int:
    """1 when any error counter of a cell grew (``error_deltas``, counter → increase), else 0."""
    if not error_deltas:
        return 0
    return int(any((v or 0) > 0 for v in error_deltas.values()))


def switch_port_cells(fabric_id: int) -> list[Cell]:
    """Return the current cells of every switch port (1..N) of a fabric, ordered by node and port.

    One LEFT JOIN query over ``fabric.Port`` and ``telemetry.PortCounters``; a port without a
    counters row (never read) is ``[.., None, None, 0, 1, 0]``; a read port whose ``state`` is
    Down (IBTA 14.2.5.6 PortInfo:PortState 1) has ``down`` 1 (see ``Cell``).
    """
    rows = (
        Port.objects.filter(node__fabric_id=fabric_id, node__node_type=NodeType.SWITCH, port_num__gte=1)
        .order_by("node_id", "port_num")
        .values_list(
            "id",
            "node_id",
            "port_num",
            "counters__id",
            "counters__utilisation",
            "counters__congestion",
            "counters__error_deltas",
            "counters__stale",
            "state",
        )
    )
    cells: list[Cell] = []
    for port_id, node_id, port_num, counters_id, util, cong, errs, stale, port_state in rows.iterator(
        chunk_size=5000
    ):
        if counters_id is None:
            cells.append([port_id, node_id, port_num, None, None, 0, 1, 0])
            continue
        down = int(port_state == PortState.DOWN)
        cells.append(
            [
                port_id,
                node_id,
                port_num,
                round_cell(util),
                round_cell(cong),
                error_flag(errs),
                int(bool(stale)),
                down,
            ]
        )
    return cells


def diff_cells(
    previous: dict[int, tuple] | None, cells: Iterable[Cell]
) -> tuple[list[Cell], dict[int, tuple]]:
    """Return ``(changed cells, new state)``; all cells when ``previous`` is None.

    ``previous``/new state map ``port_id`` to the cell's tuple without the port id. A cell is
    changed when any of its values differs (values are already rounded).
    """
    state: dict[int, tuple] = {}
    changed: list[Cell] = []
    for cell in cells:
        key = tuple(cell[1:])
        state[cell[0]] = key
        if previous is None or previous.get(cell[0]) != key:
            changed.append(cell)
    return changed, state


def _state_key(fabric_id: int) -> str:
    return f"weft:heatmap:state:{fabric_id}"


# One producer at a time per process: sweeps of one fabric by several worker threads would
# otherwise read and write the previous state out of order.
_producer_lock = threading.Lock()


def build_delta(fabric_id: int, sweep_id: int) -> tuple[HeatmapDelta | None, StaleNotice | None]:
    """Compute the delta of ``sweep_id`` against the previous publication and store the new state.

    Returns ``(None, None)`` when the sweep does not exist (deleted) or does not belong to
    ``fabric_id``. The delta has no cells when nothing changed (it is still published: clients
    use it as a heartbeat that the poller runs).
    """
    from telemetry.models import Sweep, SweepStatus

    sweep = Sweep.objects.filter(pk=sweep_id, fabric_id=fabric_id).first()
    if sweep is None:
        return None, None
    at = _iso(sweep.started)
    with _producer_lock:
        cells = switch_port_cells(fabric_id)
        previous = cache.get(_state_key(fabric_id))
        changed, state = diff_cells(previous, cells)
        cache.set(_state_key(fabric_id), state, timeout=STATE_TTL_S)
    delta: HeatmapDelta = {
        "fabric": fabric_id,
        "sweep": sweep.pk,
        "at": at,
        "interval_s": float(sweep.interval_s or settings.WEFT_POLL_INTERVAL_S),
        "status": sweep.status,
        "cells": changed,
    }
    if previous is None:
        delta["full"] = True
    notice: StaleNotice | None = None
    if sweep.status == SweepStatus.FAILED:
        notice = {"fabric": fabric_id, "sweep": sweep.pk, "at": at, "reason": sweep.error or "sweep failed"}
    return delta, notice


def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def publish_sweep(fabric_id: int, sweep_id: int) -> HeatmapDelta | None:
    """Build and publish the heatmap delta (and stale notice) of one committed sweep.

    Returns the delta that was published (None when the sweep is gone). Never raises for a
    channel-layer problem (see ``core.realtime.publish``).
    """
    delta, notice = build_delta(fabric_id, sweep_id)
    if delta is None:
        return None
    group = heatmap_group(fabric_id)
    if notice is not None:
        realtime.publish(group, STALE_TYPE, dict(notice))
    delta["published"] = time.time()
    realtime.publish(group, DELTA_TYPE, relay_payload(DELTA_TYPE, delta))
    return delta


class RelayPayload(TypedDict):
    """What travels through the channel layer for a large message: the client frame, encoded once.

    ``text`` is the JSON websocket frame ``{"type": ..., "payload": <HeatmapDelta>}``. The
    in-memory layer deep-copies every message per subscriber and each consumer would encode it
    again: for Selene (31,647 cells, ~1 MB of JSON) that is ~0.25 s per client, against one
    ``json.dumps`` here. ``fabric``/``sweep`` stay readable for logs and tests.
    """

    fabric: int
    sweep: int
    text: str


def relay_payload(message_type: str, payload: HeatmapDelta) -> RelayPayload:
    """Encode ``payload`` once as the websocket frame the consumer relays verbatim."""
    text = json.dumps({"type": message_type, "payload": payload}, separators=(",", ":"))
    return {"fabric": payload["fabric"], "sweep": payload["sweep"], "text": text}


def on_sweep_committed(sender: Any, fabric_id: int, sweep_id: int, **kwargs: Any) -> None:
    """Receiver of ``telemetry.signals.sweep_committed``: publish the heatmap delta.

    Logs and swallows every error so a broken live view never fails a sweep.
    """
    try:
        publish_sweep(int(fabric_id), int(sweep_id))
    except Exception:
        log.exception("heatmap delta for fabric %s sweep %s failed", fabric_id, sweep_id)


def on_discovery_committed(sender: Any, fabric_id: int, discovery_id: int, **kwargs: Any) -> None:
    """Receiver of ``fabric.signals.discovery_committed``: tell heatmap clients to reload rows.

    Switches or ports may have come or gone, so the clients' row and column layout (from the
    snapshot API) may be out of date; they refetch it on a ``heatmap.topology`` message
    (payload ``{"fabric": id, "discovery": id}``). Never raises.
    """
    try:
        realtime.publish(
            heatmap_group(int(fabric_id)),
            TOPOLOGY_TYPE,
            {"fabric": int(fabric_id), "discovery": int(discovery_id)},
        )
    except Exception:
        log.exception("heatmap topology notice for fabric %s failed", fabric_id)


def forget_state(fabric_ids: Sequence[int]) -> None:
    """Drop the previous state of fabrics so their next delta is full (tests, topology changes)."""
    cache.delete_many([_state_key(f) for f in fabric_ids])
