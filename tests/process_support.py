"""Helpers for tests with real processes (loaded from the root ``conftest.py``): bounded waits, the
children a Weft process started (``fabric.collectors.tools.spawn`` tags them), a Celery-like soft
time limit.

* ``wait_for(condition, timeout)``: poll until ``condition()`` is true (returned) or time is up.
* ``alive(pid)``, ``children_tagged(tag)``, ``no_children_left(tag)``.
* fixture ``soft_limit_in``: ``soft_limit_in(seconds)`` raises Celery's ``SoftTimeLimitExceeded``
  in the test's thread after ``seconds``, from a signal handler, as billiard does for a task.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

OWNER_VAR = "WEFT_TOOL_OWNER"  # fabric.collectors.tools.OWNER_VAR (no Django import here)


def wait_for(condition, timeout: float, interval: float = 0.05):
    """Poll ``condition()`` until it returns a true value (returned) or ``timeout`` seconds pass
    (the last value is returned)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def children_tagged(tag: str, also: str = "") -> list[int]:
    """Pids of the running processes whose environment carries ``WEFT_TOOL_OWNER=tag`` (``tag``
    may be just ``"<pid>:"`` to match any start time) and, when given, the item ``also``
    (e.g. ``IBSIM_SOCKNAME=<a lab's socket>``: the children pointed at one lab)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        tagged = any(item.startswith(f"{OWNER_VAR}={tag}".encode()) for item in environ)
        if tagged and (not also or also.encode() in environ) and alive(int(entry.name)):
            out.append(int(entry.name))
    return out


def no_children_left(tag: str, also: str = "", timeout: float = 5.0) -> bool:
    """Wait (bounded) until no process matching :func:`children_tagged` runs (a killed grandchild
    needs a moment to be reaped by init)."""
    return wait_for(lambda: children_tagged(tag, also) == [], timeout)


@pytest.fixture
def soft_limit_in():
    """``soft_limit_in(seconds)``: Celery's ``SoftTimeLimitExceeded`` in this thread after ``seconds``."""
    from celery.exceptions import SoftTimeLimitExceeded

    def handler(signum, frame):
        raise SoftTimeLimitExceeded()

    previous = signal.signal(signal.SIGALRM, handler)
    yield lambda seconds: signal.setitimer(signal.ITIMER_REAL, seconds)
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)
