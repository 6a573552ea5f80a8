"""The embedded deployment's in-process Celery worker and beat.

One process (the web server started by ``manage.py demo`` or ``runserver``) runs the beat
schedule from ``settings.CELERY_BEAT_SCHEDULE`` in a daemon thread and executes task calls in
small thread pools, one per Celery queue (``weft.queues``: fabric I/O apart from control work, as
the production workers are split), so a hung fabric's discovery and sweeps never hold up a
scheduling pass, a watchdog or an alarm. A task never overlaps itself here: a call that arrives while the same task
(same name and arguments) is still running is coalesced into one more run after it ends (as the
call would wait in a real worker's queue: a submit's "run a pass" during a running pass must not
wait for the next beat tick); a beat tick that finds its task still running is skipped.

Production runs real ``celery worker`` and ``celery beat`` processes instead; nothing here is
used there.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from celery import Task, current_app

log = logging.getLogger(__name__)

_lock = threading.Lock()
#: one pool per queue (``weft.queues.queue_for``); empty when the worker does not run
_executors: dict[str, ThreadPoolExecutor] = {}
_running: set[tuple] = set()
_again: set[tuple] = set()  # running calls asked for once more meanwhile
_beat_thread: threading.Thread | None = None
_stop = threading.Event()


def _key(task: Task, args: tuple, kwargs: dict) -> tuple:
    return (task.name, repr(args), repr(sorted(kwargs.items())))


def _queue(task: Task, args: tuple, kwargs: dict) -> str:
    """The pool of a call: ``control``, or ``fabric`` for the I/O of every site (one process
    reaches all the fabrics it serves)."""
    from weft.queues import CONTROL_QUEUE, FABRIC_QUEUE, queue_for

    queue = queue_for(task.name, args, kwargs)
    return queue if queue == CONTROL_QUEUE else FABRIC_QUEUE


def _run(task: Task, args: tuple, kwargs: dict, key: tuple) -> Any:
    from django.db import close_old_connections

    try:
        close_old_connections()
        return task.apply(args=args, kwargs=kwargs, throw=False).result
    except Exception:  # pragma: no cover - apply(throw=False) already catches
        log.exception("in-process task %s failed", task.name)
        return None
    finally:
        close_old_connections()
        with _lock:
            executor = _executors.get(_queue(task, args, kwargs))
            rerun = key in _again and executor is not None
            _again.discard(key)
            if rerun:
                try:
                    executor.submit(_run, task, args, kwargs, key)  # the key stays running
                except RuntimeError:  # the pool is shutting down
                    rerun = False
            if not rerun:
                _running.discard(key)


def submit(task: Task, args: tuple, kwargs: dict, *, coalesce: bool = True) -> Future | Any:
    """Queue ``task(*args, **kwargs)`` on the in-process pool of its queue.

    Returns a ``concurrent.futures.Future`` when the worker runs, ``None`` when the same call
    is already running (with ``coalesce``, it then runs once more when that run ends, however
    many calls arrived meanwhile; without, as for beat ticks, the call is dropped), or the
    task's result when no worker was started (one-shot commands run the task at once).
    """
    key = _key(task, tuple(args), dict(kwargs))
    queue = _queue(task, tuple(args), dict(kwargs))
    with _lock:
        if not _executors:
            executor = None
        elif key in _running:
            if coalesce:
                _again.add(key)
            log.debug(
                "in-process: %s already running, call %s", task.name, "queued once" if coalesce else "dropped"
            )
            return None
        else:
            _running.add(key)
            executor = _executors[queue]
    if executor is None:
        return task.apply(args=args, kwargs=kwargs).get()
    return executor.submit(_run, task, tuple(args), dict(kwargs), key)


def _beat(schedule: dict[str, dict]) -> None:
    app = current_app  # weft.celery's app (the current one): it imports this module

    def seconds(entry: dict) -> float:
        interval = entry["schedule"]
        return interval.total_seconds() if hasattr(interval, "total_seconds") else float(interval)

    # every entry is due at once, as Celery's beat does on its first start, except those marked
    # ``skip_first`` (the demo has just discovered the lab itself: a second discovery at once was
    # the "startup discovery runs twice")
    began = time.monotonic()
    next_due: dict[str, float] = {
        name: began + (seconds(entry) if entry.get("skip_first") else 0.0) for name, entry in schedule.items()
    }
    while not _stop.is_set():
        now = time.monotonic()
        for name, entry in schedule.items():
            if now < next_due[name]:
                continue
            next_due[name] = now + seconds(entry)
            task = app.tasks.get(entry["task"])
            if task is None:
                log.warning("beat entry %s names unknown task %s", name, entry["task"])
                continue
            submit(task, tuple(entry.get("args", ())), dict(entry.get("kwargs", {})), coalesce=False)
        _stop.wait(0.2)


def is_running() -> bool:
    """True when the in-process pool is started (``manage.py serve``); False in tests and one-shot
    commands, where :func:`submit` runs a task at once in the caller."""
    return bool(_executors)


def start(workers: int = 4, beat: bool = True, schedule: dict | None = None) -> None:
    """Start the pools, ``workers`` threads each (and, with ``beat``, the schedule thread).
    Idempotent."""
    global _beat_thread
    from django.conf import settings

    app = current_app  # weft.celery's app (the current one): it imports this module
    # Celery's autodiscovery is lazy (it runs when a worker boots): import every app's tasks
    # module now so the beat entries resolve.
    app.loader.import_default_modules()

    from weft.queues import CONTROL_QUEUE, FABRIC_QUEUE

    with _lock:
        if not _executors:
            for queue in (CONTROL_QUEUE, FABRIC_QUEUE):
                _executors[queue] = ThreadPoolExecutor(
                    max_workers=workers, thread_name_prefix=f"weft-{queue}"
                )
    if beat and _beat_thread is None:
        _stop.clear()
        sched = dict(settings.CELERY_BEAT_SCHEDULE if schedule is None else schedule)
        _beat_thread = threading.Thread(target=_beat, args=(sched,), name="weft-beat", daemon=True)
        _beat_thread.start()


def stop(wait: bool = True) -> None:
    """Stop the beat thread and the pools."""
    global _beat_thread
    _stop.set()
    if _beat_thread is not None:
        _beat_thread.join(timeout=5)
        _beat_thread = None
    with _lock:
        executors = list(_executors.values())
        _executors.clear()
        _again.clear()
    for executor in executors:
        executor.shutdown(wait=wait, cancel_futures=True)
