"""Celery worker hooks: a worker asked to stop stops its diags too; orphans of dead pool processes die.

Celery's SIGTERM is a *warm* shutdown: the worker stops taking tasks and waits, without a limit,
for the running ones. A discovery hanging on a dead fabric (``ibnetdiscover`` runs up to the
fabric's ``discovery_timeout_s``, 300 s by default) would keep it alive past any supervisor's grace
period (systemd 90 s, Kubernetes 30 s), which then SIGKILLs it mid-task. So:

* ``worker_shutting_down`` (the main process, on SIGTERM/SIGINT): after ``WEFT_SHUTDOWN_GRACE_S``
  (default 10 s; running sweeps, about a second each, end normally meanwhile) the worker stops every
  diags tool and MAD poller its tasks still run: in its own process (``solo``/``threads`` pools)
  with ``fabric.collectors.tools.abort_all``, in each prefork pool process by sending it
  :data:`ABORT_SIGNAL`, whose handler (installed at ``worker_process_init``) does the same. The
  tasks then record their failure (a failed Discovery or Sweep row saying the worker is stopping)
  and end, and the warm shutdown completes.
* A pool process ignores SIGTERM (``worker_process_init``). Stopping a worker by its process group (``kill -- -<pgid>``,
  systemd's default ``KillMode=control-group``, a supervisor's group stop) sends SIGTERM to the
  pool processes too: Celery resets their SIGTERM to the default, so each died at once, mid-task,
  and the main process's warm shutdown logged ``WorkerLostError: Worker exited prematurely:
  signal 15 (SIGTERM)`` with a traceback (issue 25). The main process drives the shutdown (the
  running task ends, or its tools are stopped after the grace above); a pool process whose main
  process died gets SIGKILL from the kernel (Celery sets its parent-death signal). Celery ignores SIGTERM in its pool processes
  itself when ``REMAP_SIGTERM`` is set, for the same reason. The units in ``deploy/systemd/``
  use ``KillMode=mixed`` (SIGTERM to the main process only, SIGKILL to what is left after
  ``TimeoutStopSec``), the right way to stop a worker.
* ``worker_process_init`` and ``worker_ready``: ``tools.reap_orphans`` kills tools whose owner
  process died (a pool process killed at its hard time limit cannot kill its children itself).

Connected from ``weft.celery`` (imported by every worker); nothing here runs in the web process.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path

from celery.signals import worker_process_init, worker_ready, worker_shutting_down

log = logging.getLogger(__name__)

#: Sent by the main process to its pool processes to stop their tools (Celery uses SIGUSR1 for
#: soft time limits; SIGUSR2 only for its remote debugger when ``CELERY_RDBSIG`` is set).
ABORT_SIGNAL = signal.SIGUSR2
REASON = "the worker is shutting down"

_shutdown_timer: threading.Timer | None = None


def grace_s() -> float:
    """``settings.WEFT_SHUTDOWN_GRACE_S`` (seconds, at least 0)."""
    from django.conf import settings

    return settings.WEFT_SHUTDOWN_GRACE_S


def child_pids(pid: int | None = None) -> list[int]:
    """Pids of the direct children of ``pid`` (default this process), from ``/proc/*/stat``."""
    pid = os.getpid() if pid is None else pid
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry.name))
    return out


def stop_tools(reason: str = REASON) -> int:
    """Stop the tools of this process and of its pool processes (see the module docstring).
    Returns how many processes were told (this one included)."""
    from fabric.collectors.tools import abort_all

    abort_all(reason)
    told = 1
    for pid in child_pids():
        try:
            os.kill(pid, ABORT_SIGNAL)
            told += 1
        except ProcessLookupError:
            pass
    return told


@worker_shutting_down.connect
def _on_shutting_down(sig=None, how=None, exitcode=None, **_kw) -> None:
    # Runs inside the main process's signal handler: only start a timer here.
    global _shutdown_timer
    if _shutdown_timer is not None:
        return
    grace = grace_s()
    _shutdown_timer = threading.Timer(grace, _stop_after_grace, args=(f"{REASON} ({sig})",))
    _shutdown_timer.daemon = True
    _shutdown_timer.start()


def _stop_after_grace(reason: str) -> None:
    told = stop_tools(reason)
    log.warning("worker shutdown: stopped the diags of %d process(es) after %g s grace", told, grace_s())


def _abort_handler(signum, frame) -> None:
    from fabric.collectors.tools import abort_all

    abort_all(REASON)


@worker_process_init.connect
def _on_process_init(**_kw) -> None:
    signal.signal(ABORT_SIGNAL, _abort_handler)
    # ignored, not handled: billiard replaces any other SIGTERM handler of a pool process after
    # this signal (billiard.common.reset_signals keeps only SIG_IGN), as with REMAP_SIGTERM
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _forget_inherited_db_pools()
    _reap("pool process start")


def _forget_inherited_db_pools() -> None:
    """A forked pool process must not use the parent's PostgreSQL connection pool (settings
    ``WEFT_DB_POOL_*``): its connections' sockets are the parent's and its worker threads did not
    survive the fork. Drop the copy without closing it (closing would end the parent's sessions);
    the child opens a pool of its own on its first query (``DatabaseWrapper.pool``, Django 5.1+)."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        pools = getattr(type(conn), "_connection_pools", None)
        if pools:
            pools.clear()


@worker_ready.connect
def _on_ready(**_kw) -> None:
    _reap("worker start")


def _reap(when: str) -> None:
    from fabric.collectors.tools import reap_orphans

    try:
        killed = reap_orphans()
    except OSError as exc:  # /proc unreadable: nothing to do
        log.warning("orphaned tools not checked at %s: %s", when, exc)
        return
    if killed:
        log.warning(
            "%s: killed %d diags/poller process group(s) left by a dead worker: %s", when, len(killed), killed
        )
