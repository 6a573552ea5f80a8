"""Counter history: compact chunks, rollups, retention, and the ``port_series`` query.

Encoding (``CounterChunk.data``, zlib level 1 of):

* 1 byte version (1), 32 bytes presence mask (bit ``i`` = port ``bucket << 8 | i`` present);
* per present port, in port-id order, 12 bytes: ``xmit_bytes_per_s``, ``rcv_bytes_per_s``,
  ``xmit_wait_per_s`` as *float24* (the top 3 bytes of an IEEE-754 float32, rounded: 15 bits of
  mantissa, relative error ≤ 1.5e-5, NaN = no rate), the sum of the interval's error deltas (uint16,
  saturating) and flags (bit 0 stale, 1 saturated, 2 reset).

One row holds one time step of up to 256 ports (``bucket = port_id >> 8``): a sweep of the Selene
compute fabric (25,704 linked ports) writes ~102 rows instead of 25,704, and a port's series is a
range scan of ``(bucket, resolution, t)``. Utilisation and congestion are not stored: they are
derived at query time from the rates, the port's link rate and the PortXmitWait tick
(``telemetry.semantics``), so a corrected link rate or tick applies to the past too.

Retention (settings, hours): raw ``WEFT_HISTORY_RAW_HOURS`` (6), per-minute
``WEFT_HISTORY_MINUTE_HOURS`` (168), per-hour ``WEFT_HISTORY_HOUR_HOURS`` (8760). Rollups average
the rates of the samples present (NaN ignored), sum errors and OR the flags.

Size, measured by ``bench/sweep.py`` on PostgreSQL 15 (growth of the table + indexes + TOAST per
sweep, Selene compute lab, 5,007 nodes): worst case with random incompressible rates on every port
292 kB/sweep = **7.0 MB/hour per 1,000 nodes at 30-s sampling** (UFM's guide quotes 100 MB); the lab's
real, mostly idle sweeps 38 kB/sweep = 0.9 MB/hour per 1,000 nodes. Per-minute rollup rows add half
of the raw volume at 30-s sampling (raw rows are dropped after 6 h), per-hour rows 1/120; steady
state worst case per 1,000 nodes: 6 h raw ≈ 42 MB + 7 days per-minute ≈ 0.6 GB + per-hour 0.5 GB/year.
"""

from __future__ import annotations

import functools
import math
import operator
import struct
import time
import zlib
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import transaction

from ..models import CounterChunk, Resolution
from ..semantics import congestion_indexes, link_bytes_per_s, utilisations

BUCKET_SHIFT = 8
BUCKET_SIZE = 1 << BUCKET_SHIFT
VERSION = 1
FLAG_STALE, FLAG_SATURATED, FLAG_RESET = 1, 2, 4
_ENTRY = 12
_NAN24 = b"\x7f\xc0\x00"

Entry = tuple[float | None, float | None, float | None, int, int]
"""(xmit bytes/s, rcv bytes/s, xmit wait ticks/s, errors, flags) of one port at one time."""


def _f24(x: float | None) -> bytes:
    if x is None or x != x:
        return _NAN24
    (i,) = struct.unpack(">I", struct.pack(">f", x))
    if (i & 0x7F800000) != 0x7F800000:  # finite: round to nearest on the dropped byte
        i = min(i + 0x80, (i & 0x80000000) | 0x7F7FFFFF)
    return struct.pack(">I", i)[:3]


def _unf24(b: bytes) -> float | None:
    (x,) = struct.unpack(">f", b + b"\x00")
    return None if x != x else x


def encode_chunk(entries: dict[int, Entry]) -> bytes:
    """Encode ``{offset in bucket (0..255): Entry}`` (see the module docstring).

    The float24 values of the whole chunk are packed with one ``struct`` call each way (the sweep
    encodes ~100 chunks of 256 ports while its MADs are in flight); the result is byte for byte
    that of :func:`_f24` per value."""
    offs = sorted(entries)
    if offs and not (0 <= offs[0] and offs[-1] < BUCKET_SIZE):
        bad = offs[0] if offs[0] < 0 else offs[-1]
        raise ValueError(f"port offset {bad} outside 0..{BUCKET_SIZE - 1}")
    mask = 0
    for off in offs:
        mask |= 1 << off
    n = len(offs)
    rows = [entries[off] for off in offs]
    vals = [_NAN if v is None or v != v else v for e in rows for v in e[:3]]
    ints = struct.unpack(f">{3 * n}I", struct.pack(f">{3 * n}f", *vals))
    # finite: round to nearest on the dropped byte (as _f24); inf and NaN keep their top bytes
    top = bytearray(
        struct.pack(
            f">{3 * n}I",
            *[
                i if (i & 0x7F800000) == 0x7F800000 else min(i + 0x80, (i & 0x80000000) | 0x7F7FFFFF)
                for i in ints
            ],
        )
    )
    del top[3::4]
    body = bytearray()
    pack = struct.pack
    for k, (_x, _r, _w, errors, flags) in enumerate(rows):
        body += top[9 * k : 9 * k + 9]
        body += pack(">HB", min(int(errors), 0xFFFF), flags & 0xFF)
    return zlib.compress(bytes([VERSION]) + mask.to_bytes(32, "little") + bytes(body), 1)


_NAN = float("nan")


def decode_chunk(blob: bytes) -> dict[int, Entry]:
    """Decode a chunk into ``{offset: Entry}``. Raises ValueError on an unknown version or bad length."""
    raw = zlib.decompress(bytes(blob))
    if not raw or raw[0] != VERSION:
        raise ValueError(f"history chunk version {raw[:1]!r} unknown")
    mask = int.from_bytes(raw[1:33], "little")
    out: dict[int, Entry] = {}
    pos = 33
    off = 0
    while mask:
        if mask & 1:
            e = raw[pos : pos + _ENTRY]
            if len(e) != _ENTRY:
                raise ValueError("history chunk truncated")
            errors, flags = struct.unpack(">HB", e[9:12])
            out[off] = (_unf24(e[0:3]), _unf24(e[3:6]), _unf24(e[6:9]), errors, flags)
            pos += _ENTRY
        mask >>= 1
        off += 1
    return out


def decode_one(blob: bytes, offset: int) -> Entry | None:
    """The entry of one port offset in a chunk, or None when the port is absent from it."""
    raw = zlib.decompress(bytes(blob))
    mask = int.from_bytes(raw[1:33], "little")
    if not (mask >> offset) & 1:
        return None
    index = (mask & ((1 << offset) - 1)).bit_count()
    e = raw[33 + index * _ENTRY : 33 + (index + 1) * _ENTRY]
    errors, flags = struct.unpack(">HB", e[9:12])
    return (_unf24(e[0:3]), _unf24(e[3:6]), _unf24(e[6:9]), errors, flags)


_ENTRY_PADDED = struct.Struct(">fffHB")  # an entry with each float24 padded back to a float32
#: (byte of a padded entry, byte of a stored one): a zero byte after each float24
_PAD = ((0, 0), (1, 1), (2, 2), (4, 3), (5, 4), (6, 5), (8, 6), (9, 7), (10, 8), (12, 9), (13, 10), (14, 11))


@functools.lru_cache(maxsize=4096)
def _index_of(mask: int) -> dict[int, int]:
    """``{offset: its entry's index in the chunk}`` of a presence mask (the chunks of a bucket
    mostly share theirs: cached)."""
    return {off: i for i, off in enumerate(off for off in range(BUCKET_SIZE) if (mask >> off) & 1)}


@functools.lru_cache(maxsize=512)
def _flat(n: int) -> struct.Struct:
    """The ``struct`` of ``n`` padded entries in a row (:data:`_ENTRY_PADDED` ``n`` times)."""
    return struct.Struct(">" + "fffHB" * n)


def _values_of(blob: bytes) -> tuple[int, dict[int, int], tuple]:
    """A chunk's presence mask, its index (:func:`_index_of`) and every entry's values in one flat
    tuple, entry ``i`` at ``5 i`` .. ``5 i + 4`` (xmit, rcv, wait, errors, flags; NaN where there
    was no rate): the float24s padded back to float32s for the whole chunk with twelve strided
    copies and unpacked with one ``struct`` call (per entry, slicing, joining and a tuple each
    cost ten times that). Raises ValueError on an unknown version or a short chunk."""
    raw = zlib.decompress(bytes(blob))
    if not raw or raw[0] != VERSION:
        raise ValueError(f"history chunk version {raw[:1]!r} unknown")
    mask = int.from_bytes(raw[1:33], "little")
    n = mask.bit_count()
    end = 33 + n * _ENTRY
    if len(raw) < end:
        raise ValueError("history chunk truncated")
    padded = bytearray(_ENTRY_PADDED.size * n)
    for dst, src in _PAD:
        padded[dst :: _ENTRY_PADDED.size] = raw[33 + src : end : _ENTRY]
    return mask, _index_of(mask), _flat(n).unpack(padded)


def decode_offsets(blob: bytes, offsets: Iterable[int]) -> dict[int, Entry]:
    """The entries of some port offsets of a chunk, ``{offset: Entry}`` (offsets absent from it
    left out): one decompression and one ``struct`` call for the chunk (:func:`_values_of`).
    The same values as :func:`decode_chunk`'s."""
    _mask, index, values = _values_of(blob)
    out: dict[int, Entry] = {}
    for off in offsets:
        i = index.get(off)
        if i is None:
            continue
        x, r, w, errors, flags = values[5 * i : 5 * i + 5]
        out[off] = (None if x != x else x, None if r != r else r, None if w != w else w, errors, flags)
    return out


def build_chunks(fabric_id: int, t: int, per_port: Iterable[tuple[int, Entry]], resolution: int = 0) -> list:
    """``CounterChunk`` objects (unsaved) for one time step from ``(port_id, Entry)`` pairs."""
    buckets: dict[int, dict[int, Entry]] = defaultdict(dict)
    for port_id, entry in per_port:
        buckets[port_id >> BUCKET_SHIFT][port_id & (BUCKET_SIZE - 1)] = entry
    return [
        CounterChunk(fabric_id=fabric_id, bucket=b, resolution=resolution, t=t, data=encode_chunk(entries))
        for b, entries in buckets.items()
    ]


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    return sum(vals) / len(vals) if vals else None


def _rollup_window(source: int, target: int, start: int, end: int) -> int:
    """Combine ``source``-resolution chunks with ``start <= t < end`` into ``target`` chunks at ``start``."""
    rows = CounterChunk.objects.filter(resolution=source, t__gte=start, t__lt=end).values_list(
        "fabric_id", "bucket", "data"
    )
    acc: dict[tuple[int, int], dict[int, list[Entry]]] = defaultdict(lambda: defaultdict(list))
    for fabric_id, bucket, data in rows:
        for off, entry in decode_chunk(data).items():
            acc[(fabric_id, bucket)][off].append(entry)
    objs = []
    for (fabric_id, bucket), ports in acc.items():
        entries: dict[int, Entry] = {}
        for off, samples in ports.items():
            flags = 0
            for s in samples:
                flags |= s[4]
            entries[off] = (
                _mean([s[0] for s in samples]),
                _mean([s[1] for s in samples]),
                _mean([s[2] for s in samples]),
                min(sum(s[3] for s in samples), 0xFFFF),
                flags,
            )
        objs.append(
            CounterChunk(
                fabric_id=fabric_id, bucket=bucket, resolution=target, t=start, data=encode_chunk(entries)
            )
        )
    CounterChunk.objects.bulk_create(objs, batch_size=500)
    return len(objs)


def retention_s() -> dict[int, int]:
    """Seconds each resolution is kept: ``{0: raw, 60: minute, 3600: hour}``."""
    return {
        Resolution.RAW: int(settings.WEFT_HISTORY_RAW_HOURS * 3600),
        Resolution.MINUTE: int(settings.WEFT_HISTORY_MINUTE_HOURS * 3600),
        Resolution.HOUR: int(settings.WEFT_HISTORY_HOUR_HOURS * 3600),
    }


def rollup_windows(model, rollup_window, now: float) -> dict[str, int]:
    """The rollup loop shared by every history store (this one, ``CounterChunk``, and the devices
    app's ``DeviceSample``): for raw → minute and minute → hour, call ``rollup_window(source,
    target, start, end)`` (epoch s; returns rows written) in its own transaction for each complete
    window after the latest existing rollup of ``model``, then delete rows of ``model`` older than
    their resolution's retention (:func:`retention_s`). ``model`` has ``resolution`` and ``t``
    (epoch s) fields. Idempotent. Returns ``{"minute", "hour", "deleted"}`` row counts."""
    written = {"minute": 0, "hour": 0}
    for source, target, name in (
        (Resolution.RAW, Resolution.MINUTE, "minute"),
        (Resolution.MINUTE, Resolution.HOUR, "hour"),
    ):
        step = int(target)
        complete_until = int(now // step) * step
        last = model.objects.filter(resolution=target).order_by("-t").values_list("t", flat=True).first()
        first_src = (
            model.objects.filter(resolution=source, t__lt=complete_until)
            .order_by("t")
            .values_list("t", flat=True)
            .first()
        )
        if first_src is None:
            continue
        start = max((last + step) if last is not None else 0, (first_src // step) * step)
        while start < complete_until:
            with transaction.atomic():
                written[name] += rollup_window(source, target, start, start + step)
            start += step
    deleted = 0
    for res, keep in retention_s().items():
        deleted += model.objects.filter(resolution=res, t__lt=int(now) - keep).delete()[0]
    return {**written, "deleted": deleted}


def rollup(now: float | None = None) -> dict[str, int]:
    """Build the missing per-minute and per-hour rollups of complete windows, then apply retention.

    Idempotent: a window is rolled up once (windows at or before the latest existing rollup are
    skipped). Returns ``{"minute": rows written, "hour": rows written, "deleted": chunk rows deleted,
    "sweeps_deleted": Sweep rows deleted}``.
    """
    now = time.time() if now is None else now
    done = rollup_windows(CounterChunk, _rollup_window, now)
    # Sweep rows (one per fabric every few seconds) are kept WEFT_SWEEP_RETENTION_HOURS (168);
    # the latest sweep of each fabric always stays (PortCounters rows point at it).
    from ..models import Sweep

    keep_s = settings.WEFT_SWEEP_RETENTION_HOURS * 3600
    cutoff = datetime.fromtimestamp(now - keep_s, UTC)
    latest = [
        s
        for s in (
            Sweep.objects.filter(fabric_id=f).order_by("-started", "-id").values_list("id", flat=True).first()
            for f in Sweep.objects.values_list("fabric_id", flat=True).distinct()
        )
        if s is not None
    ]
    swept = Sweep.objects.filter(started__lt=cutoff).exclude(pk__in=latest).delete()[0]
    return {**done, "sweeps_deleted": swept}


def pick_resolution(start: float, end: float, now: float) -> int:
    """The resolution ``auto`` reads for ``start``..``end`` (epoch s): raw when the range is within
    raw retention and at most 6 h, per-minute up to 7 days within theirs, else per-hour (also
    the devices app's history, ``devices.services.history``)."""
    keep = retention_s()
    span = end - start
    if start >= now - keep[Resolution.RAW] and span <= 6 * 3600:
        return Resolution.RAW
    if start >= now - keep[Resolution.MINUTE] and span <= 7 * 86400:
        return Resolution.MINUTE
    return Resolution.HOUR


def port_series(port_id: int, start: datetime, end: datetime, resolution: str = "auto") -> dict:
    """The history of one port between ``start`` and ``end`` (aware datetimes).

    ``resolution``: ``auto`` (raw when the range is within raw retention and ≤ 6 h, per-minute up to
    7 days, else per-hour), ``raw``, ``minute`` or ``hour``. Returns lists of equal length::

        {"t": [epoch s], "xmit_bytes_per_s": [...], "rcv_bytes_per_s": [...],
         "xmit_wait_per_s": [ticks/s], "utilisation": [0..1], "congestion": [0..1],
         "errors": [sum of error-counter deltas], "stale": [bool], "resolution": "raw"|"minute"|"hour",
         "step_s": 60 | 3600 | None (raw: as swept)}

    Values are None where there was no rate. Raises ValueError for an unknown resolution.
    """
    return ports_series([port_id], start, end, resolution)[port_id]


_SERIES_KEYS = (
    "t",
    "xmit_bytes_per_s",
    "rcv_bytes_per_s",
    "xmit_wait_per_s",
    "utilisation",
    "congestion",
    "errors",
    "stale",
)
#: resolutions by the name the readers take
RESOLUTIONS = {"raw": Resolution.RAW, "minute": Resolution.MINUTE, "hour": Resolution.HOUR}
_RES_NAME = {v: k for k, v in RESOLUTIONS.items()}


def stored_steps(buckets: Iterable[int], resolution: int, t0: float, t1: float, limit: int) -> int:
    """How many time steps of ``resolution`` are stored for any of ``buckets`` with ``t0 <= t <
    t1`` (epoch s), counted up to ``limit`` (the answer is ``min(steps, limit)``): one query on the
    ``(bucket, resolution, t)`` index, its rows capped by ``limit``."""
    ts = (
        CounterChunk.objects.filter(
            bucket__in=sorted(set(buckets)), resolution=resolution, t__gte=int(t0), t__lt=math.ceil(t1)
        )
        .order_by()
        .values_list("t", flat=True)
        .distinct()
    )
    return len(ts[:limit])


def fit_resolution(
    buckets: Iterable[int], t0: float, t1: float, max_steps: int, now: float | None = None
) -> tuple[int, bool]:
    """The resolution to read ``t0``..``t1`` (epoch s) of ``buckets`` in at most ``max_steps``
    time steps: ``(resolution, downsample)``. The finest of raw, per-minute and per-hour that is
    kept back to ``t0`` (:func:`retention_s` before ``now``, default the current time: raw rows
    of the last 6 h would not cover an older job's window) and has 1..``max_steps`` steps stored
    in the window (``downsample`` False); when none has (a window longer than ``max_steps``
    hours, rollups not built), the finest of those with any stored step, else of any with one,
    to be downsampled when it has more than ``max_steps`` (``downsample`` True); nothing stored:
    ``(RAW, False)``. Raises ValueError when ``max_steps`` < 1."""
    if max_steps < 1:
        raise ValueError(f"max_steps {max_steps}: at least 1")
    buckets = sorted(set(buckets))
    now = time.time() if now is None else now
    keep = retention_s()
    order = (Resolution.RAW, Resolution.MINUTE, Resolution.HOUR)
    counts: dict[int, int] = {}
    for res in order:
        if res != Resolution.HOUR and t0 < now - keep[res]:
            continue  # rolled off the window's start (per-hour: the coarsest, read whatever is left)
        counts[res] = stored_steps(buckets, res, t0, t1, max_steps + 1)
        if 0 < counts[res] <= max_steps:
            return res, False
    for res in sorted(counts) + [r for r in order if r not in counts]:
        n = counts[res] if res in counts else stored_steps(buckets, res, t0, t1, max_steps + 1)
        if n:
            return res, n > max_steps
    return Resolution.RAW, False


def bin_width(resolution: int, t0: float, t1: float, max_steps: int) -> tuple[int, int]:
    """``(origin, width)`` (epoch s, s) of the bins :func:`downsample` puts ``t0``..``t1`` in so
    that they number at most ``max_steps``: ``origin`` is ``t0`` rounded down to the resolution's
    step (per-hour bins start on the hour, as the rollups), ``width`` a whole number of steps (raw:
    of seconds). Raises ValueError when ``max_steps`` < 1."""
    if max_steps < 1:
        raise ValueError(f"max_steps {max_steps}: at least 1")
    step = int(resolution) or 1
    origin = int(t0) // step * step
    span = max(math.ceil(t1) - origin, 1)
    return origin, step * max(1, math.ceil(span / (step * max_steps)))


def downsample(series: dict, origin: int, width: int) -> dict:
    """One port's series (:func:`ports_series`' shape) in bins of ``width`` seconds from
    ``origin`` (:func:`bin_width`): a bin's ``t`` is its start; ``xmit_bytes_per_s``,
    ``rcv_bytes_per_s`` and ``xmit_wait_per_s`` the mean of its values (None ignored, as the
    rollups average them: None when it has none), ``utilisation`` and ``congestion`` the highest
    of its values (a short peak stays visible), ``errors`` summed, ``stale`` when any sample was;
    ``step_s`` = ``width``. Bins without a sample are left out. Pure."""
    out: dict = {k: [] for k in _SERIES_KEYS} | {"resolution": series["resolution"], "step_s": width}
    ts = series["t"]
    i, n = 0, len(ts)
    while i < n:
        k = (ts[i] - origin) // width
        j = i
        while j < n and (ts[j] - origin) // width == k:
            j += 1
        out["t"].append(origin + k * width)
        for name in ("xmit_bytes_per_s", "rcv_bytes_per_s", "xmit_wait_per_s"):
            vals = [v for v in series[name][i:j] if v is not None]
            out[name].append(sum(vals) / len(vals) if vals else None)
        for name in ("utilisation", "congestion"):
            vals = [v for v in series[name][i:j] if v is not None]
            out[name].append(max(vals) if vals else None)
        out["errors"].append(sum(series["errors"][i:j]))
        out["stale"].append(any(series["stale"][i:j]))
        i = j
    return out


def ports_series(
    port_ids: Iterable[int],
    start: datetime,
    end: datetime,
    resolution: str = "auto",
    *,
    max_steps: int | None = None,
) -> dict[int, dict]:
    """:func:`port_series` of several ports at once: ``{port id: series}`` (every id given has
    an entry, empty lists when it has no history). Each bucket's chunks in the range are read
    once, in one query for all buckets, each chunk decompressed once and only the wanted ports'
    values picked (a job's fabric view reads a hundred ports of a few buckets: one read per port
    decompressed every chunk of its bucket again; the chunk is unpacked by one ``struct`` call,
    :func:`_values_of`, and no tuple is made per port and step).

    ``max_steps`` bounds the time steps of every series: with ``resolution="auto"`` the stored
    resolution read is :func:`fit_resolution`'s (the finest with at most ``max_steps`` steps in
    the window) instead of :func:`pick_resolution`'s, and a read with more steps than that (an
    explicit resolution, or no resolution fits) is put in at most ``max_steps`` bins
    (:func:`downsample`). Every series carries ``step_s``: the seconds of one step (60, 3600, a
    bin's width), None for raw samples as swept. Raises ValueError for an unknown resolution,
    ``max_steps`` < 1 or a bad chunk."""
    from fabric.models import Port

    ids = sorted(set(port_ids))
    t0, t1 = start.timestamp(), end.timestamp()
    if resolution != "auto" and resolution not in RESOLUTIONS:
        raise ValueError(f"resolution {resolution!r}: use auto, raw, minute or hour")
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps {max_steps}: at least 1")
    wanted: dict[int, list[int]] = defaultdict(list)  # bucket -> port ids
    for pk in ids:
        wanted[pk >> BUCKET_SHIFT].append(pk)
    if resolution != "auto":
        res = RESOLUTIONS[resolution]
    elif max_steps is None:
        res = pick_resolution(t0, t1, time.time())
    else:
        res = fit_resolution(wanted, t0, t1, max_steps)[0] if ids else Resolution.RAW
    res_name = _RES_NAME[res]
    step_s = int(res) or None
    out: dict[int, dict] = {
        pk: {k: [] for k in _SERIES_KEYS} | {"resolution": res_name, "step_s": step_s} for pk in ids
    }
    if not ids:
        return out
    caps = {
        pk: link_bytes_per_s(rate)
        for pk, rate in Port.objects.filter(pk__in=ids).values_list("pk", "rate_gbps")
    }
    tick_ns = settings.WEFT_XMIT_WAIT_TICK_NS
    rows = (
        CounterChunk.objects.filter(
            bucket__in=sorted(wanted), resolution=res, t__gte=int(t0), t__lt=math.ceil(t1)
        )
        .order_by("bucket", "t")
        .values_list("bucket", "t", "data")
    )
    # chunks grouped by bucket and presence mask (a bucket's chunks mostly share theirs): per
    # group the wanted ports present, the time steps and the wanted values of each chunk, picked
    # with one itemgetter call (no tuple per entry: a million of them cost more in allocation and
    # garbage collection than the decoding); then per port its five columns, transposed at once
    groups: dict[tuple[int, int], tuple[list[int], list[int], list[tuple], Any]] = {}
    for bucket, t, data in rows.iterator(chunk_size=500):
        mask, index, values = _values_of(data)
        group = groups.get((bucket, mask))
        if group is None:
            present = [
                (pk, index[pk & (BUCKET_SIZE - 1)])
                for pk in wanted[bucket]
                if (pk & (BUCKET_SIZE - 1)) in index
            ]
            at = [5 * i + f for _pk, i in present for f in range(5)]
            group = groups[(bucket, mask)] = (
                [pk for pk, _i in present], [], [], operator.itemgetter(*at) if at else None,
            )  # fmt: skip
        if group[3] is not None:
            group[1].append(t)
            group[2].append(group[3](values))
    parts: dict[int, list[tuple[list[int], list[tuple]]]] = defaultdict(list)
    for pks, ts, picked, _pick in groups.values():
        if pks:
            columns = list(zip(*picked, strict=True))
            for j, pk in enumerate(pks):
                parts[pk].append((ts, columns[5 * j : 5 * j + 5]))
    for pk, runs in parts.items():
        if len(runs) == 1:
            ts, (xs, rs, ws, errors, flags) = runs[0]
        else:  # the port's chunks under several masks (a port of its bucket came or went): by time
            rows_t = sorted(
                (row for ts, cols in runs for row in zip(ts, *cols, strict=True)), key=lambda row: row[0]
            )
            ts, xs, rs, ws, errors, flags = zip(*rows_t, strict=True)
        x = [None if v != v else v for v in xs]  # NaN: no rate
        r = [None if v != v else v for v in rs]
        w = [None if v != v else v for v in ws]
        out[pk].update(
            t=list(ts),
            xmit_bytes_per_s=x,
            rcv_bytes_per_s=r,
            xmit_wait_per_s=w,
            utilisation=utilisations(x, r, caps.get(pk)),
            congestion=congestion_indexes(w, tick_ns),
            errors=list(errors),
            stale=[bool(f & FLAG_STALE) for f in flags],
        )
    if max_steps is not None and any(len(s["t"]) > max_steps for s in out.values()):
        origin, width = bin_width(res, t0, t1, max_steps)
        out = {pk: downsample(s, origin, width) for pk, s in out.items()}
    return out
