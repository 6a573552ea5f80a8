"""The ``PortCounters`` rows of a sweep: their column order, one statement to upsert a batch
(PostgreSQL: a binary ``COPY`` into a staging table, then ``UPDATE .. FROM`` and an ``INSERT``),
and the store thread of a streaming sweep.

A sweep row is ``(port_id, raw, ext, sampled_at, d, saturated, reset, stale, reason)``: ``raw`` the
16 raw counters (:data:`RAW` order), ``d`` a ``semantics.Derived``, the 7-tuple of
``semantics.derive_fast`` or None (stale)."""

from __future__ import annotations

import json
import operator
import queue
import struct
import threading
import time
from datetime import UTC, datetime, timedelta

from django.db import connection

from ... import semantics
from ...models import PortCounters

RAW = semantics.ALL_COUNTERS  # the 16 raw counters, in column order
NOTHING_SATURATED: list = []  # the saturated list of a port with none (shared, never mutated)


COLUMNS = (
    "port_id",
    "sweep_id",
    "sampled_at",
    *RAW,
    "extended",
    *semantics.DERIVED_FIELDS,
    "error_deltas",
    "saturated",
    "reset",
    "stale",
    "stale_reason",
)
_TYPES = (
    ("int", "int", "timestamptz")
    + ("bigint",) * len(RAW)
    + ("bool",)
    + ("float8",) * len(semantics.DERIVED_FIELDS)
    + ("text", "text", "bool", "bool", "text")
)

_derived_values = operator.attrgetter(*semantics.DERIVED_FIELDS)  # Derived -> tuple, in column order
_NO_DERIVED = (None,) * len(semantics.DERIVED_FIELDS)


def row_tuple(sweep_id: int, row: tuple) -> tuple:
    """A sweep row ``(port_id, raw, ext, sampled_at, d, saturated, reset, stale, reason)`` as the
    values of :data:`COLUMNS`; ``d`` is a ``Derived``, the 7-tuple of ``semantics.derive_fast``
    (no error deltas, nothing saturated) or None (stale)."""
    port_id, raw, ext, sampled_at, d, saturated, reset, stale, reason = row
    if d is None:
        derived = _NO_DERIVED
        deltas = None
    elif type(d) is tuple:
        derived = d
        deltas = "{}"
    else:
        derived = _derived_values(d)
        deltas = None if d.error_deltas is None else json.dumps(d.error_deltas)
    return (
        port_id,
        sweep_id,
        sampled_at,
        *raw,
        ext,
        *derived,
        deltas,
        json.dumps(saturated) if saturated else "[]",
        reset,
        stale,
        reason,
    )


# PostgreSQL binary COPY (``COPY .. FROM STDIN (FORMAT BINARY)``, "Binary Format" of the COPY
# reference page): a signature, then per row an int16 field count and per field an int32 length
# (-1: NULL) and the value in the type's binary send format (int8 and float8 big-endian, bool one
# byte, timestamptz int64 microseconds since 2000-01-01 UTC, jsonb a version byte 1 and the JSON
# text, text UTF-8); a trailer int16 -1. No text to print and the server parses no floats.
_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags 0, header extension length 0
_TRAILER = b"\xff\xff"
_NULL = b"\xff\xff\xff\xff"
_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_STAGE_TYPES = tuple(
    "bigint" if c in ("port_id", "sweep_id") else "jsonb" if c in ("error_deltas", "saturated") else t
    for c, t in zip(COLUMNS, _TYPES, strict=True)
)
_I8, _F8, _LEN = struct.Struct(">iq"), struct.Struct(">id"), struct.Struct(">i")
_N_FIELDS = struct.Struct(">h").pack(len(COLUMNS))
# a fast-path row (every counter read, the 7 derived values, no deltas, nothing saturated, not
# reset, not stale): one pack; the second without utilisation (link rate unknown)
_FAST_ROW = struct.Struct(">h" + "iq" * (3 + len(RAW)) + "ib" + "id" * 7 + "i3si3sibibi")
_FAST_ROW_NO_UTIL = struct.Struct(">h" + "iq" * (3 + len(RAW)) + "ib" + "id" * 5 + "iid" + "i3si3sibibi")
_EMPTY_OBJECT, _EMPTY_LIST = b"\x01{}", b"\x01[]"


def _binary_field(kind: str, value) -> bytes:
    """One field of a binary COPY row: ``kind`` a :data:`_STAGE_TYPES` name, ``value`` as
    :func:`row_tuple` gives it (JSON already text)."""
    if value is None:
        return _NULL
    if kind == "bigint":
        return _I8.pack(8, value)
    if kind == "float8":
        return _F8.pack(8, value)
    if kind == "bool":
        return b"\x00\x00\x00\x01\x01" if value else b"\x00\x00\x00\x01\x00"
    if kind == "timestamptz":
        return _I8.pack(8, (value - _PG_EPOCH) // _US)
    data = value.encode()
    if kind == "jsonb":
        data = b"\x01" + data
    return _LEN.pack(len(data)) + data


def copy_binary(sweep_id: int, rows: list[tuple]) -> bytes:
    """Binary COPY data of sweep rows (see :func:`row_tuple`) for the staging table: one
    ``struct`` pack per fast-path row (tens of thousands per sweep), field by field for the rest.
    Raises ``struct.error`` for a value outside its column (a counter above 2**63-1: no bigint)."""
    out = [_SIGNATURE]
    append = out.append
    n = len(COLUMNS)
    stamps: dict = {}
    fast, fast_no_util = _FAST_ROW.pack, _FAST_ROW_NO_UTIL.pack
    for row in rows:
        port_id, raw, ext, sampled_at, d, saturated, reset, stale, reason = row
        if type(d) is tuple:
            us = stamps.get(sampled_at)
            if us is None:
                us = stamps[sampled_at] = (sampled_at - _PG_EPOCH) // _US
            c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15 = raw
            x, r, xp, rp, w, u, cg = d
            if u is None:
                append(
                    fast_no_util(
                        n, 8, port_id, 8, sweep_id, 8, us,
                        8, c0, 8, c1, 8, c2, 8, c3, 8, c4, 8, c5, 8, c6, 8, c7,
                        8, c8, 8, c9, 8, c10, 8, c11, 8, c12, 8, c13, 8, c14, 8, c15,
                        1, ext, 8, x, 8, r, 8, xp, 8, rp, 8, w, -1, 8, cg,
                        3, _EMPTY_OBJECT, 3, _EMPTY_LIST, 1, 0, 1, 0, 0,
                    )
                )  # fmt: skip
            else:
                append(
                    fast(
                        n, 8, port_id, 8, sweep_id, 8, us,
                        8, c0, 8, c1, 8, c2, 8, c3, 8, c4, 8, c5, 8, c6, 8, c7,
                        8, c8, 8, c9, 8, c10, 8, c11, 8, c12, 8, c13, 8, c14, 8, c15,
                        1, ext, 8, x, 8, r, 8, xp, 8, rp, 8, w, 8, u, 8, cg,
                        3, _EMPTY_OBJECT, 3, _EMPTY_LIST, 1, 0, 1, 0, 0,
                    )
                )  # fmt: skip
            continue
        append(_N_FIELDS)
        out.extend(map(_binary_field, _STAGE_TYPES, row_tuple(sweep_id, row)))
    append(_TRAILER)
    return b"".join(out)


_STAGE = "weft_portcounters_stage_b"  # binary COPY types (bigint ids)


def upsert(sweep_id: int, rows: list[tuple]) -> None:
    """Insert or update the ``PortCounters`` rows (see :func:`row_tuple`) in one statement.

    PostgreSQL: see :func:`upsert_pg`; other backends: ``executemany`` of ``INSERT .. ON CONFLICT
    DO UPDATE``.
    """
    if not rows:
        return
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            upsert_pg(cur.cursor, sweep_id, rows)
            return
        table = PortCounters._meta.db_table
        cols = ", ".join(COLUMNS)
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in COLUMNS if c != "port_id")
        adapt = connection.ops.adapt_datetimefield_value
        tuples = [row_tuple(sweep_id, r) for r in rows]
        tuples = [(*t[:2], adapt(t[2]), *t[3:]) for t in tuples]
        marks = ", ".join(["%s"] * len(COLUMNS))
        cur.executemany(
            f"INSERT INTO {table} ({cols}) VALUES ({marks}) ON CONFLICT (port_id) DO UPDATE SET {updates}",
            tuples,
        )


def upsert_pg(cur, sweep_id: int, rows: list[tuple]) -> None:
    """PostgreSQL upsert on a psycopg cursor: the rows go in with one binary ``COPY``
    (:func:`copy_binary`) into a temporary staging table, then ``UPDATE .. FROM`` it and an
    ``INSERT`` of the ports without a row yet."""
    table = PortCounters._meta.db_table
    cols = ", ".join(COLUMNS)
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in COLUMNS if c != "port_id")
    cur.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {_STAGE} ("
        + ", ".join(f"{c} {t}" for c, t in zip(COLUMNS, _STAGE_TYPES, strict=True))
        + ") ON COMMIT DELETE ROWS"
    )
    data = copy_binary(sweep_id, rows)
    with cur.copy(f"COPY {_STAGE} ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(data)
    # UPDATE .. FROM (an index nested loop) for the rows that exist, then INSERT the new ones:
    # cheaper than INSERT .. ON CONFLICT's speculative insertion on every row; the transaction and
    # the unique port_id keep it correct (a concurrent writer of the same port would block on the
    # row lock or fail the insert, never duplicate it).
    sets = ", ".join(f"{c} = s.{c}" for c in COLUMNS if c != "port_id")
    cur.execute(f"UPDATE {table} AS t SET {sets} FROM {_STAGE} AS s WHERE t.port_id = s.port_id")
    if cur.rowcount != len(rows):
        cur.execute(
            f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {_STAGE} AS s "
            f"WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE t.port_id = s.port_id) "
            f"ON CONFLICT (port_id) DO UPDATE SET {updates}"
        )
    cur.execute(f"TRUNCATE {_STAGE}")


class DbPipe:
    """The PostgreSQL writes of a streaming sweep, off the thread that decodes and computes: one
    thread formats each chunk and runs :func:`upsert_pg` on the sweep's own connection (the same
    transaction; psycopg connections are thread-safe and the sweep's thread does not touch the
    database until :meth:`close`), so the server's UPDATE of one chunk overlaps the next chunk's
    rates. The first error stops it and is raised by :meth:`put`/:meth:`close`."""

    def __init__(self, raw_connection, sweep_id: int) -> None:
        self.conn = raw_connection
        self.sweep_id = sweep_id
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.error: BaseException | None = None
        self.busy_s = 0.0
        self.thread = threading.Thread(target=self._run, name="weft-sweep-store", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            rows = self.queue.get()
            if rows is None:
                return
            if self.error is not None:
                continue
            t = time.monotonic()
            try:
                with self.conn.cursor() as cur:
                    upsert_pg(cur, self.sweep_id, rows)
            except BaseException as exc:  # handed to the sweep's thread
                self.error = exc
            self.busy_s += time.monotonic() - t

    def put(self, rows: list[tuple]) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put(rows)

    def close(self, timeout: float | None = None) -> None:
        """Wait for the queued chunks; raise the first error."""
        self.queue.put(None)
        self.thread.join(timeout)
        if self.error is not None:
            raise self.error
