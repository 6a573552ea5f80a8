"""Counter sweep of a fabric: collect → rates → store (one transaction) → publish on commit.

``poll_fabric(fabric)`` reads every stored port (LIDs and port numbers from the last discovery, no
rediscovery), computes the interval's rates (``telemetry.semantics``), upserts one
``PortCounters`` row per port, appends the compact history (``telemetry.services.history``), writes a
``Sweep`` and, after commit, sends ``telemetry.signals.sweep_committed``.

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

import json
import logging
import operator
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

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
from ..collectors.counters import Collected, CollectorError, reset_counters, run_madpoll, run_perfquery
from ..models import PortCounters, Sweep, SweepStatus
from ..signals import sweep_committed
from . import history

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


# Per-process caches (a Celery worker sweeps the same fabric again and again). They are only
# trusted when the database agrees: the topology cache by the fabric's last discovery and port
# count, the counter state by the id of the fabric's latest sweep.
_lock = threading.Lock()
_topology_cache: dict[int, tuple[tuple, list[Target]]] = {}
_state_cache: dict[tuple[int, str], tuple[int, dict[int, tuple]]] = {}
_capmasks: dict[tuple[int, int], tuple[int, float]] = {}


def _targets(fabric: Fabric) -> list[Target]:
    key = (fabric.last_discovery_id, Port.objects.filter(node__fabric=fabric).count())
    with _lock:
        hit = _topology_cache.get(fabric.pk)
    if hit and hit[0] == key:
        return hit[1]
    rows = list(
        Port.objects.filter(node__fabric=fabric, port_num__gte=1).values_list(
            "id", "node_id", "port_num", "lid", "rate_gbps", "node__node_type", "node__lid"
        )
    )
    node_of = {r[0]: r[1] for r in rows}
    type_of = {r[1]: r[5] for r in rows}
    peer: dict[int, int] = {}
    link_rate: dict[int, float | None] = {}
    for a, b, rate in Link.objects.filter(fabric=fabric).values_list("port_a_id", "port_b_id", "rate_gbps"):
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
    with _lock:
        _topology_cache[fabric.pk] = (key, targets)
    return targets


def _previous_state(fabric: Fabric, mech: str, port_ids: list[int]) -> dict[int, tuple]:
    """``{port_id: (raw values tuple, extended, sampled_at epoch, stale)}`` of the last sweep."""
    latest = (
        Sweep.objects.filter(fabric=fabric).order_by("-started", "-id").values_list("id", flat=True).first()
    )
    with _lock:
        hit = _state_cache.get((fabric.pk, mech))
    if hit and latest is not None and hit[0] == latest:
        return hit[1]
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


def _requests(fabric: Fabric, targets: list[Target], extended: str) -> list[tuple]:
    now = time.monotonic()
    lids = sorted({t.lid for t in targets if t.lid})
    reqs: list[tuple] = []
    known: dict[int, int] = {}
    with _lock:
        for lid in lids:
            hit = _capmasks.get((fabric.pk, lid))
            if hit and hit[1] > now:
                known[lid] = hit[0]
    reqs.extend(("N", lid) for lid in lids if lid not in known)
    for t in targets:
        if not t.lid:
            continue
        cap = known.get(t.lid)
        ext = extended != "never" and (cap is None or bool(cap & EXT_BITS))
        reqs.append(("Q", t.lid, t.port_num, 1 if ext else 0))
    return reqs


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

    targets = _targets(fabric)
    if not targets:  # not one port known (never discovered): 0 of 0 ports read is not "ok"
        return _skipped(fabric, started, mechanism if group is None else f"{mechanism} {group + 1}/{groups}")
    if group is not None:
        targets = [t for t in targets if t.group_key % groups == group]
    mech_label = mechanism if group is None else f"{mechanism} {group + 1}/{groups}"
    env, ca_args = fabric_env(fabric), fabric_ca_args(fabric)

    collected: Collected | None = None
    error = ""
    interrupted = False
    t_collect = time.time()
    sm_check = _SM_POOL.submit(_sm_check, fabric, env, ca_args, timeout) if fabric.master_sm_guid else None
    try:
        if mechanism == "mad":
            reqs = _requests(fabric, targets, extended)
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
            )
            expires = time.monotonic() + _CAPMASK_TTL_S
            with _lock:
                for lid, cap in collected.capmasks.items():
                    _capmasks[(fabric.pk, lid)] = (cap, expires)
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
    moved_to, sm_note = None, ""
    if sm_check is not None and (not interrupted or sm_check.done()):
        moved_to, sm_note = sm_check.result()
    elif sm_check is not None:  # out of time: its sminfo ends (and is killed) by its own timeout
        sm_note = "SM not checked (sweep out of time)"
    # all ports of the sweep share one sample time: the middle of the collection
    sampled_at = datetime.fromtimestamp(t_collect + (collected.duration_s / 2 if collected else 0.0), UTC)
    t_sample = sampled_at.timestamp()  # microsecond precision, as stored: rates match the rows exactly

    t_collected = time.monotonic()
    prev_state = _previous_state(fabric, mech_label, [t.port_id for t in targets])
    rows: list[tuple] = []
    chunk_entries: list[tuple[int, history.Entry]] = []
    n_read = n_stale = n_sat = n_sat_ports = n_reset = 0
    new_state: dict[int, tuple] = {}
    reads = collected.reads if collected else {}
    for t in targets:
        prev = prev_state.get(t.port_id)
        read = reads.get((t.lid, t.port_num)) if t.lid else None
        reason = ""
        if not t.lid:
            reason = "no LID known for this port (down, or not yet configured by the SM)"
        elif collected is None:
            reason = f"sweep failed: {error}"
        elif read is None:
            reason = "not read by the collector"
        elif read.error:
            reason = f"LID {t.lid} port {t.port_num}: {read.error}"
        if reason:
            n_stale += 1
            raw = prev[0] if prev else (None,) * 16
            ext = prev[1] if prev else False
            ts = prev[2] if prev else None
            rows.append(
                (
                    t.port_id,
                    raw,
                    ext,
                    datetime.fromtimestamp(ts, UTC) if ts else None,
                    None,
                    [],
                    False,
                    True,
                    reason,
                )
            )
            new_state[t.port_id] = (raw, ext, ts, True)
            chunk_entries.append((t.port_id, (None, None, None, 0, history.FLAG_STALE)))
            continue
        n_read += 1
        raw = read.raw
        if prev is not None and prev[2] is not None and prev[0][0] is not None:
            d = semantics.derive_raw(
                prev[0], prev[1], prev[2], raw, read.extended, t_sample, t.rate_gbps, tick_ns
            )
        else:
            d = semantics.derive_raw(None, False, 0.0, raw, read.extended, t_sample, t.rate_gbps, tick_ns)
        if d.saturated:
            n_sat += len(d.saturated)
            n_sat_ports += 1
        if d.reset:
            n_reset += 1
        rows.append((t.port_id, raw, read.extended, sampled_at, d, d.saturated, d.reset, False, ""))
        new_state[t.port_id] = (raw, read.extended, t_sample, False)
        flags = (history.FLAG_SATURATED if d.saturated else 0) | (history.FLAG_RESET if d.reset else 0)
        errors = sum(d.error_deltas.values()) if d.error_deltas else 0
        chunk_entries.append(
            (t.port_id, (d.xmit_bytes_per_s, d.rcv_bytes_per_s, d.xmit_wait_per_s, errors, flags))
        )

    if collected is None:
        status = SweepStatus.FAILED
    elif n_stale or sm_note:
        status = SweepStatus.PARTIAL
    else:
        status = SweepStatus.OK
    prev_sweep = (
        Sweep.objects.filter(fabric=fabric, mechanism=mech_label)
        .order_by("-started", "-id")
        .values_list("started", flat=True)
        .first()
    )
    stats = collected.stats if collected else ""
    t_computed = time.monotonic()
    with transaction.atomic():
        # A discovery that committed since ``fabric`` was read may have removed ports: writing their
        # rows failed the whole sweep (foreign key). Under the fabric row lock that ingest takes
        # first (``select_for_update``, so the same lock order), keep only the rows of the ports that still exist.
        latest = Fabric.objects.select_for_update().filter(pk=fabric.pk).values_list("last_discovery_id")
        if [(fabric.last_discovery_id,)] != list(latest):
            live = set(Port.objects.filter(node__fabric=fabric).values_list("id", flat=True))
            rows = [r for r in rows if r[0] in live]
            chunk_entries = [e for e in chunk_entries if e[0] in live]
        sweep = Sweep.objects.create(
            fabric=fabric,
            started=started,
            duration_s=None,
            interval_s=(started - prev_sweep).total_seconds() if prev_sweep else None,
            ports=n_read,
            stale=n_stale,
            saturated=n_sat,
            saturated_ports=n_sat_ports,
            resets=n_reset,
            status=status,
            error="; ".join(x for x in (error, sm_note, stats if n_stale else "") if x)[:2000],
            mechanism=mech_label,
        )
        _upsert(sweep.pk, rows)
        t_upserted = time.monotonic()
        chunks = history.build_chunks(fabric.pk, int(t_sample), chunk_entries)
        from ..models import CounterChunk

        CounterChunk.objects.bulk_create(chunks, batch_size=500)

        t_history = time.monotonic()
        publish: dict[str, float] = {}

        def _after_commit(sweep_id=sweep.pk, state=new_state):
            with _lock:
                _state_cache[(fabric.pk, mech_label)] = (sweep_id, state)
            t0 = time.monotonic()
            sweep_committed.send(sender=Sweep, fabric_id=fabric.pk, sweep_id=sweep_id)
            publish["publish_s"] = time.monotonic() - t0

        transaction.on_commit(_after_commit)
        if moved_to is not None:  # the SM service records the move; its receiver queues the rediscovery
            observe_sms(fabric, moved_to, source=SWEEP)
    duration = time.monotonic() - t_start
    Sweep.objects.filter(pk=sweep.pk).update(duration_s=round(duration, 4))
    sweep.duration_s = round(duration, 4)
    # not stored: where the time went (bench/sweep.py prints it)
    sweep.timings = {
        "collect_s": round(t_collected - t_start, 4),
        "compute_s": round(t_computed - t_collected, 4),
        "store_publish_s": round(duration - (t_computed - t_start), 4),
        "upsert_s": round(t_upserted - t_computed, 4),
        "history_s": round(t_history - t_upserted, 4),
        "publish_s": round(publish.get("publish_s", 0.0), 4),
        "collector": stats,
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
    port_id, raw, ext, sampled_at, d, saturated, reset, stale, reason = row
    if d is None:
        derived = _NO_DERIVED
        deltas = None
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
        json.dumps(saturated),
        reset,
        stale,
        reason,
    )


def _copy_text(value) -> str:
    """One field in PostgreSQL COPY text format (``\\N`` for NULL, backslash escapes)."""
    if value is None:
        return "\\N"
    if value is True:
        return "t"
    if value is False:
        return "f"
    if isinstance(value, str):
        return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    if isinstance(value, datetime):
        return value.isoformat()
    return repr(value) if isinstance(value, float) else str(value)


def _copy_lines(tuples: list[tuple]) -> str:
    """COPY text of the upsert rows; the numeric columns (all but the 5 text/JSON/bool tail columns
    and ``extended``) are formatted inline (tens of thousands of rows per sweep)."""
    out = []
    n = "\\N"
    for t in tuples:
        head = t[:19]  # port_id, sweep_id, sampled_at, 16 raw counters
        mid = t[20:27]  # 7 derived floats
        out.append(
            "\t".join(
                [
                    str(head[0]),
                    str(head[1]),
                    head[2].isoformat() if head[2] is not None else n,
                    *[n if v is None else str(v) for v in head[3:]],
                    "t" if t[19] else "f",
                    *[n if v is None else repr(v) for v in mid],
                    *[_copy_text(v) for v in t[27:]],
                ]
            )
        )
    out.append("")
    return "\n".join(out)


_STAGE = "weft_portcounters_stage"


def _upsert(sweep_id: int, rows: list[tuple]) -> None:
    """Insert or update the ``PortCounters`` rows in one statement.

    PostgreSQL: the rows go in with one ``COPY`` (text format, parsed by the server in C) into a
    temporary staging table, then one ``INSERT .. SELECT .. ON CONFLICT (port_id) DO UPDATE``; other
    backends: ``executemany`` of ``INSERT .. ON CONFLICT DO UPDATE``.
    """
    if not rows:
        return
    table = PortCounters._meta.db_table
    cols = ", ".join(_COLUMNS)
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in _COLUMNS if c != "port_id")
    tuples = [_row_tuple(sweep_id, r) for r in rows]
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            types = [
                "jsonb" if c in ("error_deltas", "saturated") else t
                for c, t in zip(_COLUMNS, _TYPES, strict=True)
            ]
            cur.execute(
                f"CREATE TEMP TABLE IF NOT EXISTS {_STAGE} ("
                + ", ".join(f"{c} {t}" for c, t in zip(_COLUMNS, types, strict=True))
                + ") ON COMMIT DELETE ROWS"
            )
            text = _copy_lines(tuples)
            with cur.cursor.copy(f"COPY {_STAGE} ({cols}) FROM STDIN") as copy:
                copy.write(text.encode())
            # UPDATE .. FROM (a hash join) for the rows that exist, then INSERT the new ones: cheaper
            # than INSERT .. ON CONFLICT's speculative insertion on every row; the transaction and
            # the unique port_id keep it correct (a concurrent writer of the same port would block
            # on the row lock or fail the insert, never duplicate it).
            sets = ", ".join(f"{c} = s.{c}" for c in _COLUMNS if c != "port_id")
            cur.execute(f"UPDATE {table} AS t SET {sets} FROM {_STAGE} AS s WHERE t.port_id = s.port_id")
            if cur.rowcount != len(tuples):
                cur.execute(
                    f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {_STAGE} AS s "
                    f"WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE t.port_id = s.port_id) "
                    f"ON CONFLICT (port_id) DO UPDATE SET {updates}"
                )
            cur.execute(f"TRUNCATE {_STAGE}")
        else:
            adapt = connection.ops.adapt_datetimefield_value
            tuples = [(*t[:2], adapt(t[2]), *t[3:]) for t in tuples]
            marks = ", ".join(["%s"] * len(_COLUMNS))
            cur.executemany(
                f"INSERT INTO {table} ({cols}) VALUES ({marks}) ON CONFLICT (port_id) DO UPDATE SET {updates}",
                tuples,
            )
