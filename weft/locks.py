"""Non-overlap locks for periodic tasks, on the shared cache (Redis in production)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

from django.core.cache import cache


@contextlib.contextmanager
def single_instance(key: str, ttl_s: float) -> Iterator[bool]:
    """Hold the lock ``key`` for at most ``ttl_s`` seconds.

    Yields True when this caller holds the lock, False when another holder has it (the caller
    should then skip its work). The lock expires after ``ttl_s`` even if the holder died.
    """
    token = uuid.uuid4().hex
    name = f"weft:lock:{key}"
    acquired = cache.add(name, token, timeout=max(1, int(ttl_s)))
    try:
        yield acquired
    finally:
        if acquired and cache.get(name) == token:
            cache.delete(name)
