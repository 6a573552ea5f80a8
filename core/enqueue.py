"""Background work a service queues without importing the task that does it.

A service sits below its app's tasks (a task calls services), so it must not import them. Each app
registers, in its ``AppConfig.ready()``, a sender per kind of work (a function that queues its
Celery task: ``register("fabric.discover", send)``); a service calls :func:`send` with the work's
name, usually from ``transaction.on_commit`` so that nothing is queued for a change rolled back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_SENDERS: dict[str, Callable[..., Any]] = {}


def register(name: str, sender: Callable[..., Any]) -> None:
    """Make ``send(name, …)`` call ``sender(…)`` (the last registration wins; idempotent)."""
    _SENDERS[name] = sender


def send(name: str, *args: Any, **kwargs: Any) -> Any:
    """Queue the work registered as ``name`` now; returns what its sender returns.

    Raises:
        LookupError: nothing registered under ``name`` (its app is not installed or not ready).
        Whatever the sender raises (a broker that is down): callers log it, as before.
    """
    try:
        sender = _SENDERS[name]
    except KeyError:
        raise LookupError(f"no background work registered as {name!r}") from None
    return sender(*args, **kwargs)
