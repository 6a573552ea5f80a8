"""The sweep itself (:func:`poll_fabric`): read plan → collector (MADs or ``perfquery``) beside the
SM check → rates and rows as the records stream in (``writer``) → commit → publish."""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
from datetime import UTC, datetime

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from fabric.models import Fabric

from ...collectors.counters import Collected, CollectorError, run_madpoll, run_perfquery
from ...models import Sweep, SweepStatus
from .reset import reset_targets
from .smcheck import submit_sm_check
from .state import previous_state
from .targets import index_by_addr, read_plan, remember_capmasks, requests_for
from .writer import SweepWriter

log = logging.getLogger(__package__)  # the package's name, as before the split

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

    topo = read_plan(fabric)
    targets = topo.targets
    by_addr = topo.by_addr
    if not targets:  # not one port known (never discovered): 0 of 0 ports read is not "ok"
        return _skipped(fabric, started, mechanism if group is None else f"{mechanism} {group + 1}/{groups}")
    if group is not None:
        targets = [t for t in targets if t.group_key % groups == group]
        by_addr = index_by_addr(targets)
    mech_label = mechanism if group is None else f"{mechanism} {group + 1}/{groups}"
    env, ca_args = fabric_env(fabric), fabric_ca_args(fabric)
    prev_state = previous_state(fabric, mech_label, [t.port_id for t in targets], topo.key)
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

    def writer() -> SweepWriter:
        return SweepWriter(topo.key, targets, by_addr, prev_state, tick_ns, t_collect, sweep_fields)

    collected: Collected | None = None
    error = ""
    interrupted = False
    t_collect = time.time()
    out = writer()
    sm_check = submit_sm_check(fabric, env, ca_args, timeout) if fabric.master_sm_guid else None
    try:
        if mechanism == "mad":
            reqs = requests_for(fabric, targets, extended, topo.key)
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
            remember_capmasks(topo.key, {**out.capmasks, **collected.capmasks})
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
        reset_targets(fabric, targets, env, ca_args, timeout, user)
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
