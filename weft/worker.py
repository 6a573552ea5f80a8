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

* ``worker_ready``: a worker that consumes site queues (``core.sites``: ``fabric``,
  ``fabric.<site>``) starts its **site heartbeat**: a ``core.leases.LeaseKeeper`` holding the role
  ``worker:<site>:<nodename>`` per site, renewed every ``WEFT_LEASE_TTL_S / 3`` from a thread of
  the main process (a busy pool still renews); ``worker_shutting_down`` releases it, so a stopped
  worker's site is seen without a live worker at once, a killed one's within ``WEFT_LEASE_TTL_S``
  (the API's 503 and ``system.site_down``, issue 25 §2).

Connected from ``weft.celery`` (imported by every worker); nothing here runs in the web process.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path

from celery.signals import celeryd_init, worker_process_init, worker_ready, worker_shutting_down

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


_heartbeat = None  # the site heartbeat's LeaseKeeper (main process)


def consumed_sites(queues) -> list[str]:
    """The sites (``core.sites.site_of_queue``) of the queue names ``queues``, sorted."""
    from core.sites import site_of_queue

    return sorted({s for s in (site_of_queue(q) for q in queues) if s})


def start_site_heartbeat(nodename: str, queues) -> list[str]:
    """Start renewing ``worker:<site>:<nodename>`` for each site among ``queues`` (see the
    module docstring). Returns the roles (none: nothing started)."""
    global _heartbeat
    from core.leases import LeaseKeeper
    from core.sites import worker_role

    roles = [worker_role(site, nodename) for site in consumed_sites(queues)]
    if not roles or _heartbeat is not None:
        return roles
    _heartbeat = LeaseKeeper(roles, name="weft-site-heartbeat")
    _heartbeat.want(roles, now=True)  # live before the first task is taken
    _heartbeat.start()
    log.info("site heartbeat: %s", ", ".join(roles))
    return roles


def stop_site_heartbeat() -> None:
    """Release the site heartbeat's roles (a clean stop: the sites see this worker gone at once)."""
    global _heartbeat
    keeper, _heartbeat = _heartbeat, None
    if keeper is not None:
        keeper.stop(timeout=5)


@worker_shutting_down.connect
def _on_shutting_down(sig=None, how=None, exitcode=None, **_kw) -> None:
    # Runs inside the main process's signal handler: only start timers here.
    global _shutdown_timer
    if _shutdown_timer is not None:
        return
    threading.Thread(target=stop_site_heartbeat, name="weft-site-heartbeat-stop", daemon=True).start()
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


@celeryd_init.connect
def _on_celeryd_init(sender=None, **_kw) -> None:
    # the nodename (``-n``) for the rows this worker's tasks write (``core.procs.worker_name``)
    from core.procs import NODENAME_VAR

    if sender:
        os.environ[NODENAME_VAR] = str(sender)


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
def _on_ready(sender=None, **_kw) -> None:
    _reap("worker start")
    try:
        queues = [q.name for q in sender.task_consumer.queues]
        nodename = sender.hostname
    except AttributeError:  # not a consumer (a test's signal): no heartbeat
        return
    try:
        start_site_heartbeat(nodename, queues)
    except Exception as exc:  # the database is down: the sites show no live worker until a restart
        log.error("site heartbeat not started: %s: %s", type(exc).__name__, exc)


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
