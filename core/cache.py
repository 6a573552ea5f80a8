"""A cache that may fail: reads and writes that fall back to computing when the cache backend
(Redis in production) is down, so a page or API answer never depends on the cache being up."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from django.core.cache import cache

log = logging.getLogger(__name__)
T = TypeVar("T")


def get_quietly(key: str, default=None):
    """``cache.get(key, default)``; ``default`` when the cache backend is down (a warning logged,
    never raised): for optional figures read on a request path (``/metrics``)."""
    try:
        return cache.get(key, default)
    except Exception as exc:  # redis.ConnectionError and friends: the backend is down
        log.warning("cache get %s failed (%s); answering without it", key, exc)
        return default


def get_or_compute(key: str, compute: Callable[[], T], timeout: float) -> T:
    """``cache.get(key)``, else ``compute()`` stored for ``timeout`` seconds. A cache error (Redis
    down, a timeout) is logged once per call as a warning and the value computed; never raised."""
    try:
        hit = cache.get(key)
    except Exception as exc:  # redis.ConnectionError and friends: the backend is down
        log.warning("cache get %s failed (%s); computing without the cache", key, exc)
        return compute()
    if hit is not None:
        return hit
    value = compute()
    try:
        cache.set(key, value, timeout)
    except Exception as exc:
        log.warning("cache set %s failed (%s)", key, exc)
    return value
