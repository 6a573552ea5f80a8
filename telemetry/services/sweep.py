"""Counter sweep of a fabric: collect → rates → store (one transaction) → publish on commit.

``poll_fabric(fabric)`` reads every stored port (LIDs and port numbers from the last discovery, no
rediscovery), computes the interval's rates (``telemetry.semantics``), upserts one
``PortCounters`` row per port, appends the compact history (``telemetry.services.history``), writes a
``Sweep`` and, after commit, sends ``telemetry.signals.sweep_committed`` (through
``telemetry.services.publisher``: from a per-process thread in sweep order when
``WEFT_SWEEP_PUBLISH_ASYNC``, so the heatmap and the counter rules get every sweep without the sweep
waiting for them).

Overlap (PostgreSQL): the MAD poller streams its records in chunks; each chunk's rates are computed
at once (``semantics.derive_fast``, ``derive_raw`` for the uncommon ports) and COPYed + applied by a
store thread inside the sweep's transaction while the later MADs are in flight
(:class:`_Writer`); a chunk's ports are sampled at the middle of the time since the previous chunk
(their ``sampled_at``; the rates use exactly it). After the last MAD answer only the last chunk,
the unread ports, the history rows, the Sweep's figures and the commit remain.

Robustness: a port that does not answer (timeout, node gone, LID moved after an SM change, error
status) is marked ``stale`` with the reason and keeps its last raw values; the sweep goes on and is
``partial``. When the collector cannot run at all, the sweep is ``failed``, every port is marked
stale with the reason, and the error is kept on the Sweep (nothing raised to the beat). The
collector has one time budget (``timeout``, default ``WEFT_TOOL_TIMEOUT_S``) shared by its attempts
and its children are killed with their process group when it runs out, so a hung fabric costs one
budget per sweep, well inside the task's soft time limit, and still leaves its failed Sweep row.

Splitting across workers: ``poll_fabric(fabric, group=i, groups=n)`` reads only the ports whose
switch (for a CA port: the switch at the other end of its link) has ``node_id % n == i``; each group
writes its own Sweep (``mechanism`` ``"mad 2/4"``). ``poll_all_task`` fans out one task per group when
``WEFT_POLL_GROUPS`` > 1, so several Celery workers sweep one large fabric in parallel.

Counters are never reset by a sweep; ``reset=True`` (``poll_counters --reset``) clears them after the
read, audited as ``telemetry.reset_counters``.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import operator
import queue
import struct
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import connection, transaction

from fabric.choices import NodeType
from fabric.collectors.sm import read_master
from fabric.models import Fabric, Link, Port
from fabric.parsers.records import SMRecord
from fabric.services.sm import SWEEP, observe_sms

from .. import semantics
from ..collectors import madpoll
from ..collectors.counters import (
    Collected,
    CollectorError,
    decode_stream,
    reset_counters,
    run_madpoll,
    run_perfquery,
)
from ..models import CounterChunk, PortCounters, Sweep, SweepStatus
from . import history, publisher

log = logging.getLogger(__name__)

RAW = semantics.ALL_COUNTERS  # the 16 raw counters, in column order
EXT_BITS = madpoll.CAP_EXT_WIDTH | madpoll.CAP_EXT_WIDTH_NOIETF
_CAPMASK_TTL_S = 600.0


@dataclass
class Target:
    """A port to read: ids, address (``lid`` of the CA port or of the switch), link data rate."""

    port_id: int
    node_id: int
    port_num: int
    lid: int | None
    rate_gbps: float | None
    group_key: int
    #: the link data rate in bytes/s (``semantics.link_bytes_per_s``; None when unknown)
    cap: float | None = None

    def __post_init__(self) -> None:
        self.cap = semantics.link_bytes_per_s(self.rate_gbps)


@dataclass
class _Topology:
    """The cached read plan of a fabric: ``targets``, ``by_addr[(lid, port)]`` and the number of
    targets per history bucket; ``key`` is the fabric identity it was built for (:func:`_identity`)."""

    key: tuple
    targets: list[Target]
    by_addr: dict[tuple[int, int], Target]
    bucket_sizes: dict[int, int]


# Per-process caches (a Celery worker sweeps the same fabric again and again). They are only
# trusted when the database agrees: the topology by the fabric's identity (:func:`_identity`:
# id, creation time, latest discovery id and start, read from the database at every sweep, so a
# deleted fabric whose id is reused, a stale ``Fabric`` object or a rediscovery never hit another
# topology), the counter state and the CapMasks by the fabric's id and creation time (and the state
# by the id of the fabric's latest sweep).
_lock = threading.Lock()
_topology_cache: dict[int, _Topology] = {}
_state_cache: dict[tuple[int, str], tuple[tuple, int, dict[int, tuple]]] = {}
_capmasks: dict[tuple[tuple, int], tuple[int, float]] = {}


def _identity(fabric: Fabric) -> tuple:
    """``(id, created, last discovery id, its start)`` of ``fabric`` as the database has it now.

    Every topology change goes through a discovery (``fabric.services.ingest``: a full or partial
    discovery, an import, a notice's port-state refresh), which becomes ``Fabric.last_discovery``;
    the creation time and the discovery's start tell a deleted fabric or discovery whose id was
    reused (SQLite after a rolled-back transaction) from the one cached."""
    row = (
        Fabric.objects.filter(pk=fabric.pk)
        .values_list("created", "last_discovery_id", "last_discovery__started")
        .first()
    )
    return (fabric.pk, *row) if row else (fabric.pk, None, None, None)


def _topology(fabric: Fabric) -> _Topology:
    """The read plan of ``fabric`` (cached per process while :func:`_identity` is unchanged; a
    fabric with no discovery yet, whose ports are written by hand, is read again every sweep)."""
    key = _identity(fabric)
    with _lock:
        hit = _topology_cache.get(fabric.pk)
    if hit is not None and hit.key == key and key[2] is not None:
        return hit
    rows = list(
        Port.objects.filter(node__fabric_id=fabric.pk, port_num__gte=1).values_list(
            "id", "node_id", "port_num", "lid", "rate_gbps", "node__node_type", "node__lid"
        )
    )
    node_of = {r[0]: r[1] for r in rows}
    type_of = {r[1]: r[5] for r in rows}
    peer: dict[int, int] = {}
    link_rate: dict[int, float | None] = {}
    for a, b, rate in Link.objects.filter(fabric_id=fabric.pk).values_list(
        "port_a_id", "port_b_id", "rate_gbps"
    ):
        peer[a], peer[b] = b, a
        link_rate[a] = link_rate[b] = rate
    targets = []
    for pid, node_id, num, lid, rate, ntype, node_lid in rows:
        is_switch = ntype == NodeType.SWITCH
        group_key = node_id
        if not is_switch and pid in peer and type_of.get(node_of.get(peer[pid])) == NodeType.SWITCH:
            group_key = node_of[peer[pid]]
        targets.append(
            Target(
                port_id=pid,
                node_id=node_id,
                port_num=num,
                lid=(node_lid if is_switch else lid) or None,
                rate_gbps=rate or link_rate.get(pid),
                group_key=group_key,
            )
        )
    topo = _Topology(key, targets, _by_addr(targets), _bucket_sizes(targets))
    with _lock:
        if key[2] is not None:
            _topology_cache[fabric.pk] = topo
        else:
            _topology_cache.pop(fabric.pk, None)
    return topo


def _by_addr(targets: list[Target]) -> dict[tuple[int, int], Target]:
    return {(t.lid, t.port_num): t for t in targets if t.lid}


def _bucket_sizes(targets: list[Target]) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for t in targets:
        b = t.port_id >> history.BUCKET_SHIFT
        sizes[b] = sizes.get(b, 0) + 1
    return sizes


def _targets(fabric: Fabric) -> list[Target]:
    """The ports a sweep of ``fabric`` reads (see :class:`Target`)."""
    return _topology(fabric).targets


def _previous_state(
    fabric: Fabric, mech: str, port_ids: list[int], ident: tuple | None = None
) -> dict[int, tuple]:
    """``{port_id: (raw values tuple, extended, sampled_at epoch, stale)}`` of the last sweep."""
    ident = (ident or _identity(fabric))[:2]
    latest = (
        Sweep.objects.filter(fabric=fabric).order_by("-started", "-id").values_list("id", flat=True).first()
    )
    with _lock:
        hit = _state_cache.get((fabric.pk, mech))
    if hit and latest is not None and hit[0] == ident and hit[1] == latest:
        return hit[2]
    state: dict[int, tuple] = {}
    wanted = set(port_ids)
    rows = PortCounters.objects.filter(port__node__fabric=fabric).values_list(
        "port_id", *RAW, "extended", "sampled_at", "stale"
    )
    for row in rows.iterator(chunk_size=5000):
        if row[0] not in wanted:
            continue
        sampled = row[-2]
        state[row[0]] = (tuple(row[1:17]), row[17], sampled.timestamp() if sampled else None, row[19])
    return state


_SM_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="weft-sminfo")


def _sm_check(fabric: Fabric, env: dict, ca_args: list[str], budget_s: float) -> tuple[SMRecord | None, str]:
    """Read the master SM (``sminfo``, run beside the collector) and compare it with the one the
    fabric knows. Returns ``(master, note)``: ``master`` only when it moved (the caller hands it to
    ``fabric.services.sm.observe_sms``, whose receiver queues the rediscovery), ``note`` for the
    Sweep ("" when the SM is the same). A new master may have handed out new LIDs, so counters
    read by LID could belong to other ports until the topology is rediscovered."""
    sm, error = read_master(fabric, env=env, ca_args=ca_args, timeout=min(10.0, budget_s))
    if sm is None:
        return None, f"sminfo failed ({error}); SM not checked"
    if sm.guid == fabric.master_sm_guid:
        return None, ""
    return sm, (
        f"master SM moved from {fabric.master_sm_guid} to {sm.guid} (LID {sm.lid}): LIDs may have "
        "changed, counters read by LID are suspect until the next discovery (queued)"
    )


def _requests(
    fabric: Fabric, targets: list[Target], extended: str, ident: tuple | None = None
) -> list[tuple]:
    """The poller's requests: ClassPortInfo of every LID whose capabilities are not cached, then
    per port ``("Q", lid, port, mode)``: mode 2 where the node's CapMask2 has
    AddlPortCountersExtended (one PortCountersExtended MAD carries every counter), 1 where
    PortCountersExtended carries the 64-bit data only (ExtendedWidth/NoIETF, or not known yet:
    PortCounters + PortCountersExtended), 0 for 32-bit only (``extended="never"`` or no
    ExtendedWidth). IBTA 16.1.2 ClassPortInfo, 16.1.4.11 PortCountersExtended."""
    now = time.monotonic()
    owner = (ident or _identity(fabric))[:2]
    lids = sorted({t.lid for t in targets if t.lid})
    reqs: list[tuple] = []
    known: dict[int, int] = {}
    with _lock:
        for lid in lids:
            hit = _capmasks.get((owner, lid))
            if hit and hit[1] > now:
                known[lid] = hit[0]
    reqs.extend(("N", lid) for lid in lids if lid not in known)
    never = extended == "never"
    for t in targets:
        if not t.lid:
            continue
        cap = known.get(t.lid)
        if never:
            mode = 0
        elif cap is None:
            mode = 1
        elif cap & EXT_BITS and cap & madpoll.CAP_ADDL_EXT:
            mode = 2
        else:
            mode = 1 if cap & EXT_BITS else 0
        reqs.append(("Q", t.lid, t.port_num, mode))
    return reqs


_gc_lock = threading.Lock()
_gc_pausers = 0
_gc_was_enabled = False


@contextlib.contextmanager
def _gc_paused():
    """No cyclic garbage collection while a sweep runs (in this process; nested and concurrent
    sweeps share the pause, the last one out restores the collector as it was).

    A sweep of the Selene fabric makes ~200,000 short-lived tuples (records, rows, history
    entries) beside the previous sweep's 25,000 port states: the collector's generation-0 runs
    every 700 allocations and its full runs over everything the worker holds cost as much CPU as
    the rates themselves (measured: add_records 4.2 µs/port without, 7+ µs/port with). A sweep
    makes no reference cycles of its own; whatever else does is collected after it."""
    global _gc_pausers, _gc_was_enabled
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_was_enabled:
                gc.enable()


@_gc_paused()
def poll_fabric(
    fabric: Fabric,
    *,
    reset: bool = False,
    extended: str = "auto",
    group: int | None = None,
    groups: int = 1,
    timeout: float | None = None,
    mechanism: str | None = None,
    user=None,
) -> Sweep:
    """Run one counter sweep of ``fabric`` and return the committed :class:`Sweep`.

    ``extended``: ``auto`` (PortCountersExtended where the node's PerfMgt CapMask has
    ExtendedWidth/NoIETF, else the 32-bit PortCounters) or ``never`` (32-bit only).
    ``group``/``groups``: read one switch group only (see the module docstring).
    ``timeout``: the collector's budget in seconds, every attempt together (default
    ``WEFT_TOOL_TIMEOUT_S``); the ``sminfo`` check beside it gets at most 10 s of it.
    ``mechanism``: ``mad`` (default, ``WEFT_POLL_MECHANISM``) or ``perfquery``.
    ``reset``: clear the counters after reading them (audited; never the default).

    Never raises for fabric trouble (it is recorded on the Sweep, also when the Celery task's soft
    time limit interrupts the collector); raises ValueError for bad arguments.
    """
    from fabric.collectors.tools import fabric_ca_args, fabric_env

    if extended not in ("auto", "never"):
        raise ValueError(f"extended={extended!r}: use 'auto' or 'never'")
    if groups < 1 or (group is not None and not 0 <= group < groups):
        raise ValueError(f"group {group} of {groups}: need 0 <= group < groups")
    mechanism = mechanism or settings.WEFT_POLL_MECHANISM
    if mechanism not in ("mad", "perfquery"):
        raise ValueError(f"mechanism {mechanism!r}: use 'mad' or 'perfquery'")
    timeout = float(timeout or settings.WEFT_TOOL_TIMEOUT_S)
    tick_ns = settings.WEFT_XMIT_WAIT_TICK_NS
    t_start = time.monotonic()
    started = datetime.now(UTC)

    topo = _topology(fabric)
    targets = topo.targets
    by_addr = topo.by_addr
    if not targets:  # not one port known (never discovered): 0 of 0 ports read is not "ok"
        return _skipped(fabric, started, mechanism if group is None else f"{mechanism} {group + 1}/{groups}")
    if group is not None:
        targets = [t for t in targets if t.group_key % groups == group]
        by_addr = _by_addr(targets)
    mech_label = mechanism if group is None else f"{mechanism} {group + 1}/{groups}"
    env, ca_args = fabric_env(fabric), fabric_ca_args(fabric)
    prev_state = _previous_state(fabric, mech_label, [t.port_id for t in targets], topo.key)
    prev_sweep = (
        Sweep.objects.filter(fabric=fabric, mechanism=mech_label)
        .order_by("-started", "-id")
        .values_list("started", flat=True)
        .first()
    )
    sweep_fields = {
        "fabric": fabric,
        "started": started,
        "interval_s": (started - prev_sweep).total_seconds() if prev_sweep else None,
        "mechanism": mech_label,
    }

    def writer() -> _Writer:
        return _Writer(topo.key, targets, by_addr, prev_state, tick_ns, t_collect, sweep_fields)

    collected: Collected | None = None
    error = ""
    interrupted = False
    t_collect = time.time()
    out = writer()
    sm_check = _SM_POOL.submit(_sm_check, fabric, env, ca_args, timeout) if fabric.master_sm_guid else None
    try:
        if mechanism == "mad":
            reqs = _requests(fabric, targets, extended, topo.key)
            collected = run_madpoll(
                reqs,
                env=env,
                ca_args=ca_args,
                timeout=timeout,
                window=settings.WEFT_POLL_WINDOW,
                mad_timeout_s=settings.WEFT_MAD_TIMEOUT_S,
                retries=2,
                processes=settings.WEFT_POLL_PROCESSES,
                persistent=settings.WEFT_POLL_PERSISTENT,
                on_records=out.add_records,
            )
            expires = time.monotonic() + _CAPMASK_TTL_S
            with _lock:
                for lid, cap in {**out.capmasks, **collected.capmasks}.items():
                    _capmasks[(topo.key[:2], lid)] = (cap, expires)
        else:
            tg = [(t.lid, t.port_num, extended != "never") for t in targets if t.lid]
            collected = run_perfquery(
                tg,
                env=env,
                ca_args=ca_args,
                timeout=timeout,
                parallel=settings.WEFT_POLL_PARALLELISM,
            )
    except CollectorError as exc:
        error = str(exc)
        log.warning("counter sweep of %s failed: %s", fabric, exc)
    except SoftTimeLimitExceeded:
        interrupted = True
        # The task's soft limit (collector budget + store margin, telemetry.tasks) fired while the
        # collector ran: its child is already killed (kill_group); record the failed sweep anyway.
        error = f"the sweep task's time limit was reached while collecting (collector budget {timeout:g} s)"
        log.warning("counter sweep of %s failed: %s", fabric, error)
    except BaseException:
        out.abort()
        raise
    if collected is None and out.opened:
        # A failed sweep stores what a failed sweep always stored (every port stale with the
        # reason), not the chunks that came before the failure: roll them back, start again.
        out.abort()
        out = writer()
    t_collected = time.monotonic()
    # the poller's last MAD answer (its clock, epoch) when streamed; else when the collector returned
    last_answer = out.t_last if collected is not None and collected.streamed else time.time()
    moved_to, sm_note = None, ""
    if sm_check is not None and (not interrupted or sm_check.done()):
        moved_to, sm_note = sm_check.result()
    elif sm_check is not None:  # out of time: its sminfo ends (and is killed) by its own timeout
        sm_note = "SM not checked (sweep out of time)"
    try:
        sweep = out.finish(collected, error, sm_note, moved_to, fabric, mech_label)
    except BaseException:
        out.abort()
        raise
    t_end = time.monotonic()
    end_epoch = time.time()
    duration = t_end - t_start
    Sweep.objects.filter(pk=sweep.pk).update(duration_s=round(duration, 4))
    sweep.duration_s = round(duration, 4)
    # not stored: where the time went (bench/sweep.py prints it). ``collect_s``: start to the last
    # MAD answer (the poller's clock); ``after_collect_s``: from there to the sweep's end (the
    # chunks still queued behind it, the rest, commit; the heatmap and alarms are published after
    # it, off the sweep's path: ``telemetry.services.publisher``); ``collector_returned_s``: start to
    # the collector's return (the last chunk stored).
    after = max(0.0, end_epoch - last_answer)
    sweep.timings = {
        "collect_s": round(duration - after, 4),
        "after_collect_s": round(after, 4),
        "collector_returned_s": round(t_collected - t_start, 4),
        "compute_s": round(out.t_compute, 4),
        "store_s": round(out.t_store, 4),
        "store_after_collect_s": round(out.t_store_after, 4),
        "upsert_s": round(out.t_upsert, 4),
        "history_s": round(out.t_history, 4),
        "commit_s": round(out.t_commit, 4),
        "publish_s": round(out.t_publish, 4),
        "chunks": out.chunks,
        "fast_path_ports": out.n_fast,
        "collector": collected.stats if collected else "",
    }

    if reset and collected is not None:
        _reset(fabric, targets, env, ca_args, timeout, user)
    return sweep


#: ``Sweep.error`` of a sweep of a fabric that no discovery or import has described yet.
NOT_DISCOVERED = "no ports known: the fabric has not been discovered yet (nothing to read)"


def _skipped(fabric: Fabric, started: datetime, mech_label: str) -> Sweep:
    """The record of a sweep of a fabric without a known port (status ``skipped``, :data:`NOT_DISCOVERED`);
    no collector runs, no counters or history are written."""
    sweep = Sweep.objects.create(
        fabric=fabric, started=started, duration_s=0.0, interval_s=None, ports=0, stale=0,
        status=SweepStatus.SKIPPED, error=NOT_DISCOVERED, mechanism=mech_label,
    )  # fmt: skip
    sweep.timings = {}
    log.info("counter sweep of %s skipped: %s", fabric, NOT_DISCOVERED)
    return sweep


class _Writer:
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
        self.left = _bucket_sizes(targets) if self.stream_db else {}
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
        self.pipe: _DbPipe | None = None
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
            self.pipe = _DbPipe(connection.connection, self.sweep.pk)

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
            rows.append((pid, raw, ext, sampled_at, fast, _NONE, False, False, ""))
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
        self.rows.append((pid, raw, ext, at, None, _NONE, False, True, reason))
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
                _upsert(self.sweep.pk, rows)
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
            with _lock:
                _state_cache[(fabric_id, mech_label)] = (owner, sweep_id, state)
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


_NONE: list = []  # the saturated list of a port with none (shared, never mutated)


def reset_ports(ports: list[Port], *, user=None, timeout: float = 60.0) -> dict:
    """Clear the counters of ``ports`` on the fabric (PerfMgt Set, all counters), audited as
    ``telemetry.reset_counters`` per fabric. Returns ``{"ports": n, "failed": n}``.

    Other tools and users read these counters too: only for an explicit operator request (the
    Admin action, ``poll_counters --reset``). The next sweep flags those ports ``reset``.
    """
    from accounts.audit import record
    from fabric.collectors.tools import fabric_ca_args, fabric_env

    by_fabric: dict[int, list[Port]] = {}
    for p in ports:
        by_fabric.setdefault(p.node.fabric_id, []).append(p)
    total = failed = 0
    for fabric_id, group in by_fabric.items():
        fabric = Fabric.objects.get(pk=fabric_id)
        addr = []
        for p in group:
            lid = p.node.lid if p.node.node_type == NodeType.SWITCH else p.lid
            if lid:
                addr.append((lid, p.port_num))
        bad = reset_counters(addr, env=fabric_env(fabric), ca_args=fabric_ca_args(fabric), timeout=timeout)
        total += len(addr)
        failed += len(bad) + len(group) - len(addr)
        record(
            "telemetry.reset_counters",
            fabric,
            {"ports": len(addr), "failed": len(bad), "port_ids": [p.pk for p in group][:500]},
            user=user,
            object_repr=f"counters of {len(addr)} ports of {fabric.name}",
        )
    return {"ports": total, "failed": failed}


def _reset(fabric: Fabric, targets: list[Target], env, ca_args, timeout: float, user) -> None:
    from accounts.audit import record

    addr = [(t.lid, t.port_num) for t in targets if t.lid]
    failed = reset_counters(addr, env=env, ca_args=ca_args, timeout=timeout)
    record(
        "telemetry.reset_counters",
        fabric,
        {"ports": len(addr), "failed": len(failed)},
        user=user,
        object_repr=f"counters of {len(addr)} ports of {fabric.name}",
    )


_COLUMNS = (
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


def _row_tuple(sweep_id: int, row: tuple) -> tuple:
    """A sweep row ``(port_id, raw, ext, sampled_at, d, saturated, reset, stale, reason)`` as the
    values of :data:`_COLUMNS`; ``d`` is a ``Derived``, the 7-tuple of ``semantics.derive_fast``
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
    for c, t in zip(_COLUMNS, _TYPES, strict=True)
)
_I8, _F8, _LEN = struct.Struct(">iq"), struct.Struct(">id"), struct.Struct(">i")
_N_FIELDS = struct.Struct(">h").pack(len(_COLUMNS))
# a fast-path row (every counter read, the 7 derived values, no deltas, nothing saturated, not
# reset, not stale): one pack; the second without utilisation (link rate unknown)
_FAST_ROW = struct.Struct(">h" + "iq" * (3 + len(RAW)) + "ib" + "id" * 7 + "i3si3sibibi")
_FAST_ROW_NO_UTIL = struct.Struct(">h" + "iq" * (3 + len(RAW)) + "ib" + "id" * 5 + "iid" + "i3si3sibibi")
_EMPTY_OBJECT, _EMPTY_LIST = b"\x01{}", b"\x01[]"


def _binary_field(kind: str, value) -> bytes:
    """One field of a binary COPY row: ``kind`` a :data:`_STAGE_TYPES` name, ``value`` as
    :func:`_row_tuple` gives it (JSON already text)."""
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


def _copy_binary(sweep_id: int, rows: list[tuple]) -> bytes:
    """Binary COPY data of sweep rows (see :func:`_row_tuple`) for the staging table: one
    ``struct`` pack per fast-path row (tens of thousands per sweep), field by field for the rest.
    Raises ``struct.error`` for a value outside its column (a counter above 2**63-1: no bigint)."""
    out = [_SIGNATURE]
    append = out.append
    n = len(_COLUMNS)
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
        out.extend(map(_binary_field, _STAGE_TYPES, _row_tuple(sweep_id, row)))
    append(_TRAILER)
    return b"".join(out)


_STAGE = "weft_portcounters_stage_b"  # binary COPY types (bigint ids)


def _upsert(sweep_id: int, rows: list[tuple]) -> None:
    """Insert or update the ``PortCounters`` rows (see :func:`_row_tuple`) in one statement.

    PostgreSQL: see :func:`_upsert_pg`; other backends: ``executemany`` of ``INSERT .. ON CONFLICT
    DO UPDATE``.
    """
    if not rows:
        return
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            _upsert_pg(cur.cursor, sweep_id, rows)
            return
        table = PortCounters._meta.db_table
        cols = ", ".join(_COLUMNS)
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in _COLUMNS if c != "port_id")
        adapt = connection.ops.adapt_datetimefield_value
        tuples = [_row_tuple(sweep_id, r) for r in rows]
        tuples = [(*t[:2], adapt(t[2]), *t[3:]) for t in tuples]
        marks = ", ".join(["%s"] * len(_COLUMNS))
        cur.executemany(
            f"INSERT INTO {table} ({cols}) VALUES ({marks}) ON CONFLICT (port_id) DO UPDATE SET {updates}",
            tuples,
        )


def _upsert_pg(cur, sweep_id: int, rows: list[tuple]) -> None:
    """PostgreSQL upsert on a psycopg cursor: the rows go in with one binary ``COPY``
    (:func:`_copy_binary`) into a temporary staging table, then ``UPDATE .. FROM`` it and an
    ``INSERT`` of the ports without a row yet."""
    table = PortCounters._meta.db_table
    cols = ", ".join(_COLUMNS)
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in _COLUMNS if c != "port_id")
    cur.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {_STAGE} ("
        + ", ".join(f"{c} {t}" for c, t in zip(_COLUMNS, _STAGE_TYPES, strict=True))
        + ") ON COMMIT DELETE ROWS"
    )
    data = _copy_binary(sweep_id, rows)
    with cur.copy(f"COPY {_STAGE} ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(data)
    # UPDATE .. FROM (an index nested loop) for the rows that exist, then INSERT the new ones:
    # cheaper than INSERT .. ON CONFLICT's speculative insertion on every row; the transaction and
    # the unique port_id keep it correct (a concurrent writer of the same port would block on the
    # row lock or fail the insert, never duplicate it).
    sets = ", ".join(f"{c} = s.{c}" for c in _COLUMNS if c != "port_id")
    cur.execute(f"UPDATE {table} AS t SET {sets} FROM {_STAGE} AS s WHERE t.port_id = s.port_id")
    if cur.rowcount != len(rows):
        cur.execute(
            f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {_STAGE} AS s "
            f"WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE t.port_id = s.port_id) "
            f"ON CONFLICT (port_id) DO UPDATE SET {updates}"
        )
    cur.execute(f"TRUNCATE {_STAGE}")


class _DbPipe:
    """The PostgreSQL writes of a streaming sweep, off the thread that decodes and computes: one
    thread formats each chunk and runs :func:`_upsert_pg` on the sweep's own connection (the same
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
                    _upsert_pg(cur, self.sweep_id, rows)
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
