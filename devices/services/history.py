"""History of the devices: interface rates and sensor readings per poll, rollups and retention.

One :class:`devices.models.DeviceSample` row per device and time step; ``data`` is zlib (level 1)
of JSON ``{"v": 1, "i": {ifIndex: [in bytes/s, out bytes/s, utilisation 0..1, congestion 0..1,
errors]}, "s": {entPhysicalIndex: value in the sensor's unit}}`` — ``null`` where the poll had no
rate (first sample, reset) or no reading; ``errors`` is the sum of the interval's discard and
error deltas (``Interface.error_deltas``). The values are those the poller stored on the rows
(``devices.services.poll``), rounded to 6 significant digits (:data:`DIGITS`): nothing is
recomputed. Size: a 98-interface switch with 40 sensors is 2.5 kB per sample at worst (random,
incompressible rates; measured with :func:`encode`, 0.5 ms each), i.e. 150 kB/hour at the default
60-s poll. The per-minute rollup rows of a 60-s poll are as many as the raw rows (kept
``WEFT_HISTORY_MINUTE_HOURS``, 7 days: ~25 MB per such switch), per-hour ones 1/60.

Retention and resolutions are those of the IB counter history (``telemetry.services.history``:
raw ``WEFT_HISTORY_RAW_HOURS``, per-minute ``WEFT_HISTORY_MINUTE_HOURS``, per-hour
``WEFT_HISTORY_HOUR_HOURS``; ``auto`` reads through ``pick_resolution``). Rollups average the
values present (null ignored) and sum the errors.
"""

from __future__ import annotations

import json
import math
import time
import zlib
from collections import defaultdict
from datetime import datetime

from telemetry.models import Resolution
from telemetry.services.history import pick_resolution, rollup_windows

from ..models import Device, DeviceSample, Interface, Sensor

VERSION = 1
#: significant digits kept of a rate, share or reading (relative error ≤ 5e-6, finer than the IB
#: history's float24 at 1.5e-5; about half the size of full doubles in JSON)
DIGITS = 6
RESOLUTION_NAMES = {"raw": Resolution.RAW, "minute": Resolution.MINUTE, "hour": Resolution.HOUR}


def encode(interfaces: dict[int, list], sensors: dict[int, float | None]) -> bytes:
    """Pack ``{ifIndex: [in, out, util, cong, errors]}`` and ``{index: value}`` (module docstring)."""
    doc = {
        "v": VERSION,
        "i": {str(k): v for k, v in interfaces.items()},
        "s": {str(k): v for k, v in sensors.items()},
    }
    return zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 1)


def decode(blob: bytes) -> tuple[dict[int, list], dict[int, float | None]]:
    """Unpack a sample: ``(interfaces, sensors)``. Raises ValueError on an unknown version."""
    doc = json.loads(zlib.decompress(bytes(blob)))
    if doc.get("v") != VERSION:
        raise ValueError(f"device history sample version {doc.get('v')!r} unknown")
    return {int(k): v for k, v in doc["i"].items()}, {int(k): v for k, v in doc["s"].items()}


def _finite(v):
    """``v`` rounded to :data:`DIGITS` significant digits (None for None, NaN, infinity)."""
    return float(f"{v:.{DIGITS}g}") if v is not None and math.isfinite(v) else None


def record(device: Device, t: float) -> DeviceSample:
    """Write the raw sample of ``device`` at ``t`` (epoch s) from its interface and sensor rows as
    the poll just stored them (call inside the poll's transaction)."""
    ifaces = {}
    for idx, i_in, i_out, util, cong, errs in Interface.objects.filter(
        device=device, present=True
    ).values_list(
        "if_index", "in_bytes_per_s", "out_bytes_per_s", "utilisation", "congestion", "error_deltas"
    ):
        total = sum(int(v or 0) for v in errs.values()) if errs else (0 if errs is not None else None)
        ifaces[idx] = [_finite(i_in), _finite(i_out), _finite(util), _finite(cong), total]
    sensors = {
        idx: (_finite(value) if status != "unavailable" else None)
        for idx, value, status in Sensor.objects.filter(device=device).values_list("index", "value", "status")
    }
    return DeviceSample.objects.create(
        device=device, resolution=Resolution.RAW, t=int(t), data=encode(ifaces, sensors)
    )


def _mean(values: list) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _rollup_window(source: int, target: int, start: int, end: int) -> int:
    acc_i: dict[int, dict[int, list[list]]] = defaultdict(lambda: defaultdict(list))
    acc_s: dict[int, dict[int, list]] = defaultdict(lambda: defaultdict(list))
    for device_id, data in DeviceSample.objects.filter(
        resolution=source, t__gte=start, t__lt=end
    ).values_list("device_id", "data"):
        ifaces, sensors = decode(data)
        for k, v in ifaces.items():
            acc_i[device_id][k].append(v)
        for k, v in sensors.items():
            acc_s[device_id][k].append(v)
    rows = []
    for device_id in set(acc_i) | set(acc_s):
        ifaces = {}
        for k, samples in acc_i[device_id].items():
            errs = [s[4] for s in samples if s[4] is not None]
            ifaces[k] = [_finite(_mean([s[j] for s in samples])) for j in range(4)] + [
                sum(errs) if errs else None
            ]
        sensors = {k: _finite(_mean(v)) for k, v in acc_s[device_id].items()}
        rows.append(
            DeviceSample(device_id=device_id, resolution=target, t=start, data=encode(ifaces, sensors))
        )
    DeviceSample.objects.bulk_create(rows, batch_size=500)
    return len(rows)


def rollup(now: float | None = None) -> dict[str, int]:
    """Build the missing per-minute and per-hour rollups of complete windows, then apply retention
    (the loop of ``telemetry.services.history.rollup_windows``; idempotent). Returns ``{"minute",
    "hour", "deleted"}`` rows."""
    return rollup_windows(DeviceSample, _rollup_window, time.time() if now is None else now)


def device_history(
    device: Device, start: datetime, end: datetime, *, resolution: str = "auto", if_index: int | None = None
) -> dict:
    """The history of ``device`` between ``start`` and ``end`` (aware datetimes)::

        {"t": [epoch s], "resolution": "raw"|"minute"|"hour",
         "interface": {"if_index", "name", "in_bytes_per_s": [...], "out_bytes_per_s": [...],
                       "utilisation": [0..1], "congestion": [0..1], "errors": [...]} | None,
         "sensors": [{"index", "name", "kind", "unit", "values": [...]}]}

    ``interface`` is the one of ``if_index`` (None when not given or unknown); values are None
    where there was no rate or reading. Raises ValueError for an unknown ``resolution``.
    """
    t0, t1 = start.timestamp(), end.timestamp()
    if resolution == "auto":
        res = pick_resolution(t0, t1, time.time())
    elif resolution in RESOLUTION_NAMES:
        res = RESOLUTION_NAMES[resolution]
    else:
        raise ValueError(f"resolution {resolution!r}: use auto, raw, minute or hour")
    rows = (
        DeviceSample.objects.filter(device=device, resolution=res, t__gte=int(t0), t__lt=math.ceil(t1))
        .order_by("t")
        .values_list("t", "data")
    )
    sensors = list(Sensor.objects.filter(device=device).order_by("kind", "index"))
    iface = (
        Interface.objects.filter(device=device, if_index=if_index).first() if if_index is not None else None
    )
    ts: list[int] = []
    cols = {k: [] for k in ("in_bytes_per_s", "out_bytes_per_s", "utilisation", "congestion", "errors")}
    svals: dict[int, list] = {s.index: [] for s in sensors}
    for t, data in rows:
        ifaces, readings = decode(data)
        ts.append(t)
        entry = ifaces.get(if_index) if iface is not None else None
        for j, k in enumerate(cols):
            cols[k].append(entry[j] if entry else None)
        for idx, vals in svals.items():
            vals.append(readings.get(idx))
    out_iface = None
    if iface is not None:
        out_iface = {"if_index": iface.if_index, "name": iface.name, **cols}
    return {
        "t": ts,
        "resolution": {Resolution.RAW: "raw", Resolution.MINUTE: "minute", Resolution.HOUR: "hour"}[res],
        "interface": out_iface,
        "sensors": [
            {"index": s.index, "name": s.name, "kind": s.kind, "unit": s.unit, "values": svals[s.index]}
            for s in sensors
        ],
    }
