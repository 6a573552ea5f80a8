"""Publishing committed sweeps off the sweep's path, in order, every one.

``publish(fabric_id, sweep_id)`` (the sweep's ``transaction.on_commit`` hook) sends
``telemetry.signals.sweep_committed`` (receivers: the heatmap producer, the counter rules of
``events``). With ``WEFT_SWEEP_PUBLISH_ASYNC`` (default with PostgreSQL + Redis) it only queues the
sweep: one thread per process sends the signals in the order the sweeps committed, so the sweep
(and the Celery task running it) returns without waiting for the heatmap delta (~0.16 s on Selene:
a query over every switch port, a diff, a Redis write). Nothing is coalesced or dropped: every
committed sweep is published; :func:`flush` waits for the queue (tests, ``bench/sweep.py``, and at
interpreter exit). Without the setting the signal is sent inline, as before.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import time

from django.conf import settings
from django.db import close_old_connections, connections

log = logging.getLogger(__name__)

_queue: queue.Queue = queue.Queue()
_thread: threading.Thread | None = None
_thread_pid = 0
_start_lock = threading.Lock()


def publish(fabric_id: int, sweep_id: int) -> None:
    """Send ``sweep_committed`` for a committed sweep: queued for the publisher thread, or inline
    when ``WEFT_SWEEP_PUBLISH_ASYNC`` is off. Never raises for a receiver's failure when queued
    (logged); inline, the receivers' own behaviour applies (they log and swallow)."""
    if not settings.WEFT_SWEEP_PUBLISH_ASYNC:
        _send(fabric_id, sweep_id)
        return
    _ensure_thread()
    _queue.put((fabric_id, sweep_id))


def _send(fabric_id: int, sweep_id: int) -> None:
    from ..models import Sweep
    from ..signals import sweep_committed

    sweep_committed.send(sender=Sweep, fabric_id=fabric_id, sweep_id=sweep_id)


def _ensure_thread() -> None:
    global _thread, _thread_pid
    with _start_lock:
        # a forked Celery child inherits no thread: start its own
        if _thread is None or not _thread.is_alive() or _thread_pid != os.getpid():
            _thread = threading.Thread(target=_run, name="weft-sweep-publisher", daemon=True)
            _thread_pid = os.getpid()
            _thread.start()


def _run() -> None:
    while True:
        item = _queue.get()
        try:
            close_old_connections()
            _send(*item)
        except Exception:
            log.exception("publishing sweep %s of fabric %s failed", item[1], item[0])
        finally:
            if _queue.empty():  # idle: hold no database connection between sweeps
                connections.close_all()
            _queue.task_done()


def pending() -> int:
    """Sweeps queued or being published."""
    return _queue.unfinished_tasks


def flush(timeout: float = 30.0) -> bool:
    """Wait until every queued sweep is published; False when ``timeout`` (seconds) ran out."""
    deadline = time.monotonic() + timeout
    with _queue.all_tasks_done:
        while _queue.unfinished_tasks:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            _queue.all_tasks_done.wait(left)
    return True


atexit.register(flush, 10.0)
