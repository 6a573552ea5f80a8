"""Bounded waits on a condition (tests never sleep a fixed time)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.1) -> T:
    """Call ``condition`` until it returns a truthy value and return that value.

    ``timeout`` and ``interval`` are seconds; the condition is tried once more at the deadline.

    Raises:
        AssertionError: still falsy after ``timeout`` seconds (the message says what was awaited).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def locked_is_not_yet(condition: Callable[[], T]) -> Callable[[], T | None]:
    """``condition`` for :func:`wait_for` while another thread or process writes: a read that
    meets SQLite's table lock ("database table is locked", shared-cache in-memory test databases)
    is "not yet" (None), not an error. Any other ``OperationalError`` is raised."""
    from django.db import OperationalError

    def check():
        try:
            return condition()
        except OperationalError as exc:
            if "locked" not in str(exc):
                raise
            return None

    return check
