"""Process identity on Linux: a pid plus its start time names one process even after pid reuse;
whether a pid is a live process (not a zombie).

Used to tag what a Weft process owns (lock tokens in ``core.locks``, diags children in
``fabric.collectors.tools``) so that another process can tell whether the owner still lives.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def start_time(pid: int) -> str | None:
    """Field 22 of ``/proc/<pid>/stat`` (start time in clock ticks since boot), None when the
    process does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def state(pid: int) -> str | None:
    """The state letter of ``pid`` (field 3 of ``/proc/<pid>/stat``: ``R``, ``S``, ``Z`` zombie,
    ``X`` dead...), None when no such process exists."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def is_running(pid: int) -> bool:
    """Whether ``pid`` is a live process: it exists and is not a zombie (exited, waiting for its
    parent to reap it; ``kill`` on one "succeeds" and does nothing) nor dead (``X``)."""
    return state(pid) not in (None, "Z", "X")


def owner_tag(pid: int | None = None) -> str:
    """``<pid>:<start time>`` of ``pid`` (default this process)."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{start_time(pid) or 0}"


def is_alive(tag: str) -> bool:
    """Whether the process named by an :func:`owner_tag` still runs on this host. A malformed tag
    counts as alive (nothing is taken from an owner that cannot be identified)."""
    pid, _, started = tag.partition(":")
    if not pid.isdigit() or not started:
        return True
    return start_time(int(pid)) == started


def hostname() -> str:
    """This host's name (as in ``socket.gethostname``)."""
    return socket.gethostname()


#: set by a Celery worker's main process to its nodename (``weft.worker``), inherited by its pool
NODENAME_VAR = "WEFT_WORKER_NODENAME"


def worker_name() -> str:
    """Who runs the current work, for the rows it writes (``Sweep.worker``, ``Discovery.worker``):
    the Celery worker's nodename (``-n``, e.g. ``fabric@host1``) in a worker's processes, else
    ``<program>@<host>`` (a command, the web process). At most 100 characters."""
    import sys

    name = os.environ.get(NODENAME_VAR)
    if not name:
        program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
        name = f"{program}@{hostname()}"
    return name[:100]
