"""One sweep's store: rates per port as the poller's records arrive (``telemetry.semantics``),
rows written in chunks inside the sweep's transaction, the history, the Sweep's figures, the commit
and the publication after it."""

from __future__ import annotations

import contextlib
import sys
import time
from datetime import UTC, datetime

from django.db import connection, transaction

from fabric.models import Fabric, Port
from fabric.services.sm import SWEEP, observe_sms

from ... import semantics
from ...collectors.counters import decode_stream
from ...models import CounterChunk, Sweep, SweepStatus
from .. import history, publisher
from .state import remember_state
from .store import NOTHING_SATURATED, DbPipe, upsert
from .targets import Target, bucket_sizes


class SweepWriter:
    """One sweep's store: rates per port as the records arrive, rows written in chunks.

    On PostgreSQL the sweep's transaction opens with the first chunk of records (under the fabric
    row lock, as before: the same lock order as ``fabric.services.ingest``), and every chunk is
    COPYed and applied (``UPDATE .. FROM`` the staging table) while the poller's later MADs are in
    flight; history buckets are encoded as soon as all their ports are in. What is left after the
    last MAD answer: the last chunk, the unread ports, the history rows, the Sweep row and the
    commit. Elsewhere (SQLite) the rates are computed as the chunks arrive and everything is
    written at the end in one transaction (a SQLite writer would lock the whole database for the
    collection). Same rows, same rules (``telemetry.semantics``) either way.
    """

    def __init__(self, key, targets, by_addr, prev_state, tick_ns, t_collect, sweep_fields) -> None:
        self.key = key
        self.targets = targets
        self.by_addr = by_addr
        self.prev_state = prev_state
        self.tick_ns = tick_ns
        self.t_collect = self.t_last = t_collect
        self.sweep_fields = sweep_fields
        self.stream_db = connection.vendor == "postgresql"
        self.rows: list[tuple] = []
        self.new_state: dict[int, tuple] = {}
        self.entries: dict[int, dict[int, history.Entry]] = {}
        self.left = bucket_sizes(targets) if self.stream_db else {}
        self.encoded: dict[int, bytes] = {}
        self.capmasks: dict[int, int] = {}
        self.n_read = self.n_stale = self.n_sat = self.n_sat_ports = self.n_reset = self.n_fast = 0
        self.chunks = 0
        self.t_compute = self.t_store = self.t_store_after = self.t_upsert = self.t_history = 0.0
        self.t_commit = self.t_publish = 0.0
        self.stack: contextlib.ExitStack | None = None
        self.sweep: Sweep | None = None
        self.live: set[int] | None = None
        self.written = 0
        self.pipe: DbPipe | None = None
        self.gone: set[int] = set()

    @property
    def opened(self) -> bool:
        return self.stack is not None

    def _open(self) -> None:
        """Open the sweep's transaction: fabric row lock, discovery check, the Sweep row."""
        self.stack = contextlib.ExitStack()
        self.stack.enter_context(transaction.atomic())
        fabric = self.sweep_fields["fabric"]
        if self.stream_db:
            with connection.cursor() as cur:
                # A sweep is a sample the next one rewrites: on a crash the last sweep committed in
                # the previous ~0.6 s may be lost (never half of one); no WAL flush wait per sweep.
                cur.execute("SET LOCAL synchronous_commit TO OFF")
                # Check the foreign keys (Django declares them DEFERRABLE INITIALLY DEFERRED) per
                # statement: the port of each newly inserted row (a port's first sweep), checked
                # while MADs are in flight instead of queued to COMMIT after the last answer.
                # (``sweep_id`` has no database constraint: see ``PortCounters.sweep``.)
                cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
        # A discovery that committed since the targets were read may have removed ports: writing
        # their rows failed the whole sweep (foreign key). Under the fabric row lock that ingest
        # takes first (``select_for_update``, so the same lock order), keep only the rows of the
        # ports that still exist.
        latest = Fabric.objects.select_for_update().filter(pk=fabric.pk).values_list("last_discovery_id")
        if [(self.key[2],)] != list(latest):
            self.live = set(Port.objects.filter(node__fabric=fabric).values_list("id", flat=True))
        self.sweep = Sweep.objects.create(
            duration_s=None, ports=0, stale=0, saturated=0, saturated_ports=0, resets=0,
            status=SweepStatus.PARTIAL, error="", **self.sweep_fields,
        )  # fmt: skip
        if self.stream_db:
            self.pipe = DbPipe(connection.connection, self.sweep.pk)

    def abort(self) -> None:
        """Roll back what this writer wrote (a failed or interrupted sweep starts again)."""
        if self.pipe is not None:
            pipe, self.pipe = self.pipe, None
            with contextlib.suppress(BaseException):
                pipe.close(60)
        if self.stack is not None:
            stack, self.stack = self.stack, None
            try:
                raise _Aborted
            except _Aborted:
                stack.__exit__(*sys.exc_info())

    def add_records(self, blob: bytes, epoch: float) -> None:
        """A chunk of poller records (``madpoll.RECORD``), its last answer at ``epoch``: rates now,
        rows stored now on PostgreSQL. The chunk's ports are sampled at the middle of the time
        since the previous chunk (rates use exactly the stored ``sampled_at``)."""
        t0 = time.monotonic()
        reads, caps = decode_stream(blob)
        self.capmasks.update(caps)
        t_mid = (self.t_last + epoch) / 2
        self.t_last = epoch
        sampled_at = datetime.fromtimestamp(t_mid, UTC)
        t_sample = sampled_at.timestamp()  # microsecond precision, as stored
        if self.stream_db and not self.opened:
            self._open()
        by_addr, done, gone = self.by_addr, self.new_state, self.gone
        # the common interval of every port of the chunk at once (semantics.derive_fast_many);
        # the rest (no previous sample, errors moved, saturation, reset...) port by port
        todo: list[tuple] = []
        items: list[tuple] = []
        take = self._take
        for lid, port, ext, raw, err in reads:
            t = by_addr.get((lid, port))
            if t is None or t.port_id in done or t.port_id in gone:
                continue
            if err:
                self._stale(t, f"LID {t.lid} port {t.port_num}: {err}")
            else:
                take(t, raw, ext, sampled_at, t_sample, todo, items)
        self._derive_batch(todo, items, sampled_at, t_sample)
        t1 = time.monotonic()
        self.t_compute += t1 - t0
        self.chunks += 1
        if self.stream_db:
            self._flush()
            self.t_store += time.monotonic() - t1

    def _take(
        self, t: Target, raw: tuple, ext: bool, sampled_at: datetime, t_sample: float, todo: list, items: list
    ) -> None:
        """One port read (counted): skipped when a discovery removed the port; by the general rules
        at once when it has no usable previous sample; else queued in ``todo``/``items`` for
        :meth:`_derive_batch` (its new state recorded now, so a repeat of the port is skipped)."""
        self.n_read += 1
        pid = t.port_id
        if self.live is not None and pid not in self.live:
            self.gone.add(pid)  # removed by a discovery since the targets were read: no row
            return
        prev = self.prev_state.get(pid)
        if prev is None or prev[2] is None or prev[0][0] is None:
            self._derive(t, raw, ext, sampled_at, t_sample, None)
            return
        self.new_state[pid] = (raw, ext, t_sample, False)
        todo.append((t, raw, ext, prev))
        items.append((prev[0], prev[1], prev[2], raw, ext, t.cap))

    def _derive_batch(self, todo: list, items: list, sampled_at: datetime, t_sample: float) -> None:
        """The rows and history entries of the ports :meth:`_take` queued: the common interval of
        all of them at once (``semantics.derive_fast_many``), the others by the general rules."""
        if not todo:
            return
        rows, entry = self.rows, self._entry
        for (t, raw, ext, prev), fast in zip(
            todo, semantics.derive_fast_many(items, t_sample, self.tick_ns), strict=True
        ):
            if fast is None:
                self._derive(t, raw, ext, sampled_at, t_sample, prev)
                continue
            self.n_fast += 1
            pid = t.port_id
            rows.append((pid, raw, ext, sampled_at, fast, NOTHING_SATURATED, False, False, ""))
            entry(pid, (fast[0], fast[1], fast[4], 0, 0))

    def _derive(
        self, t: Target, raw: tuple, ext: bool, sampled_at: datetime, t_sample: float, prev: tuple | None
    ) -> None:
        """The row, state and history entry of one port by the general rules
        (``semantics.derive_raw``); ``prev`` its previous state (None: no usable previous sample)."""
        pid = t.port_id
        self.new_state[pid] = (raw, ext, t_sample, False)
        if prev is not None:
            d = semantics.derive_raw(prev[0], prev[1], prev[2], raw, ext, t_sample, t.rate_gbps, self.tick_ns)
        else:
            d = semantics.derive_raw(None, False, 0.0, raw, ext, t_sample, t.rate_gbps, self.tick_ns)
        if d.saturated:
            self.n_sat += len(d.saturated)
            self.n_sat_ports += 1
        if d.reset:
            self.n_reset += 1
        self.rows.append((pid, raw, ext, sampled_at, d, d.saturated, d.reset, False, ""))
        flags = (history.FLAG_SATURATED if d.saturated else 0) | (history.FLAG_RESET if d.reset else 0)
        errors = sum(d.error_deltas.values()) if d.error_deltas else 0
        self._entry(pid, (d.xmit_bytes_per_s, d.rcv_bytes_per_s, d.xmit_wait_per_s, errors, flags))

    def _stale(self, t: Target, reason: str) -> None:
        self.n_stale += 1
        pid = t.port_id
        if self.live is not None and pid not in self.live:
            self.gone.add(pid)
            return
        prev = self.prev_state.get(pid)
        raw = prev[0] if prev else (None,) * 16
        ext = prev[1] if prev else False
        ts = prev[2] if prev else None
        at = datetime.fromtimestamp(ts, UTC) if ts else None
        self.rows.append((pid, raw, ext, at, None, NOTHING_SATURATED, False, True, reason))
        self.new_state[pid] = (raw, ext, ts, True)
        self._entry(pid, (None, None, None, 0, history.FLAG_STALE))

    def _entry(self, pid: int, entry: history.Entry) -> None:
        b = pid >> history.BUCKET_SHIFT
        bucket = self.entries.get(b)
        if bucket is None:
            bucket = self.entries[b] = {}
        bucket[pid & (history.BUCKET_SIZE - 1)] = entry
        if self.stream_db:
            left = self.left[b] = self.left[b] - 1
            if not left:  # every port of the bucket is in: encode it now, while MADs are in flight
                self.encoded[b] = history.encode_chunk(self.entries.pop(b))

    def _flush(self) -> None:
        if self.rows:
            rows, self.rows = self.rows, []
            if self.pipe is not None:
                self.pipe.put(rows)
            else:
                upsert(self.sweep.pk, rows)
            self.written += len(rows)

    def _close_pipe(self) -> None:
        if self.pipe is not None:
            pipe, self.pipe = self.pipe, None
            pipe.close()
            self.t_store += pipe.busy_s

    def finish(self, collected, error: str, sm_note: str, moved_to, fabric: Fabric, mech_label: str) -> Sweep:
        """Store the rest (ports not streamed: unread, no LID, the whole sweep when the collector
        was replaced or failed), history, the Sweep's figures; commit; publish after commit."""
        t0 = time.monotonic()
        if not self.opened:
            self._open()
        if collected is not None and not collected.streamed:
            # one sample time for a sweep that was not streamed: the middle of the collection
            t_mid = self.t_collect + collected.duration_s / 2
            sampled_at = datetime.fromtimestamp(t_mid, UTC)
            t_sample = sampled_at.timestamp()
        reads = collected.reads if collected is not None else {}
        done, gone = self.new_state, self.gone
        todo: list[tuple] = []
        items: list[tuple] = []
        for t in self.targets:
            if t.port_id in done or t.port_id in gone:
                continue
            if not t.lid:
                self._stale(t, "no LID known for this port (down, or not yet configured by the SM)")
                continue
            if collected is None:
                self._stale(t, f"sweep failed: {error}")
                continue
            read = reads.get((t.lid, t.port_num))
            if read is None:
                self._stale(t, "not read by the collector")
            elif read.error:
                self._stale(t, f"LID {t.lid} port {t.port_num}: {read.error}")
            else:
                self._take(t, read.raw, read.extended, sampled_at, t_sample, todo, items)
        if todo:  # reads of a sweep that was not streamed (sampled_at set above)
            self._derive_batch(todo, items, sampled_at, t_sample)
        t1 = time.monotonic()
        self.t_compute += t1 - t0
        sweep = self.sweep
        if self.live is not None and not self.stream_db:
            self.rows = [r for r in self.rows if r[0] in self.live]
        self._flush()
        self._close_pipe()
        t2 = time.monotonic()
        self.t_upsert = t2 - t1
        # all ports of the sweep share one history time step: the middle of the collection
        if collected is not None and collected.streamed:
            t_hist = int((self.t_collect + self.t_last) / 2)
        else:
            t_hist = int(self.t_collect + (collected.duration_s / 2 if collected is not None else 0.0))
        chunks = [
            CounterChunk(fabric_id=fabric.pk, bucket=b, resolution=0, t=t_hist, data=data)
            for b, data in self.encoded.items()
        ]
        for b, entries in self.entries.items():
            if self.live is not None:
                entries = {o: e for o, e in entries.items() if (b << history.BUCKET_SHIFT | o) in self.live}
            if entries:
                chunks.append(
                    CounterChunk(
                        fabric_id=fabric.pk,
                        bucket=b,
                        resolution=0,
                        t=t_hist,
                        data=history.encode_chunk(entries),
                    )
                )
        CounterChunk.objects.bulk_create(chunks, batch_size=500)
        t3 = time.monotonic()
        self.t_history = t3 - t2
        if collected is None:
            status = SweepStatus.FAILED
        elif self.n_stale or sm_note:
            status = SweepStatus.PARTIAL
        else:
            status = SweepStatus.OK
        stats = collected.stats if collected else ""
        sweep.ports, sweep.stale, sweep.resets = self.n_read, self.n_stale, self.n_reset
        sweep.saturated, sweep.saturated_ports = self.n_sat, self.n_sat_ports
        sweep.status = status
        sweep.error = "; ".join(x for x in (error, sm_note, stats if self.n_stale else "") if x)[:2000]
        sweep.save(
            update_fields=["ports", "stale", "resets", "saturated", "saturated_ports", "status", "error"]
        )
        state, owner = self.new_state, self.key[:2]

        def _after_commit(sweep_id=sweep.pk, fabric_id=fabric.pk):
            remember_state(fabric_id, mech_label, owner, sweep_id, state)
            t = time.monotonic()
            publisher.publish(fabric_id, sweep_id)
            self.t_publish = time.monotonic() - t

        transaction.on_commit(_after_commit)
        if moved_to is not None:  # the SM service records the move; its receiver queues the rediscovery
            observe_sms(fabric, moved_to, source=SWEEP)
        stack, self.stack = self.stack, None
        t4 = time.monotonic()
        stack.close()  # commit (then the on_commit hooks)
        self.t_commit = time.monotonic() - t4 - self.t_publish
        self.t_store_after = time.monotonic() - t1
        return sweep


class _Aborted(Exception):
    """Raised into a writer's transaction to roll it back."""
