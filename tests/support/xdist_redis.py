"""One Redis database per pytest-xdist worker (a pytest plugin: ``-p tests.support.xdist_redis`` in
pyproject.toml's ``addopts``, so it loads before pytest-django reads the settings).

pytest-django gives each xdist worker a test database of its own (``test_<name>_gw0``, ``_gw1``);
Redis has no such thing, and in ``bin/test``'s PostgreSQL + Redis phase both workers would share
``REDIS_URL``'s database: Celery's broker queues and results, the channel layer's groups, the
cache, :mod:`core.locks`' keys and leader election. Worker ``gwN`` gets database ``db + N`` of the
same server (``REDIS_URL=redis://127.0.0.1:6379/14`` under ``-n 2``: 14 and 15). The environment
is changed before the settings are read, so the settings, the tests that read ``REDIS_URL`` and
the processes they start (servers, Celery workers) all agree. Without xdist nothing changes.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

import pytest

#: Redis' default ``databases 16``: numbers 0-15
REDIS_DATABASES = 16


def worker_redis_url(url: str, worker: str) -> str:
    """``url`` (``redis://host:port/<db>``, db 0 when absent) with its database number raised by the
    index of ``worker`` (pytest-xdist's ``gw<N>``); ``url`` as given for any other worker name.
    Raises ``pytest.UsageError`` when the number passes Redis' default 15."""
    if not worker.startswith("gw") or not worker[2:].isdigit():
        return url
    parts = urlsplit(url)
    path = parts.path.strip("/")
    if path and not path.isdigit():
        raise pytest.UsageError(f"REDIS_URL {url!r}: the path is not a database number")
    db = int(path or 0) + int(worker[2:])
    if db >= REDIS_DATABASES:
        raise pytest.UsageError(
            f"REDIS_URL {url!r}: xdist worker {worker} would use Redis database {db} "
            f"(0-{REDIS_DATABASES - 1}); give a lower database number"
        )
    return urlunsplit(parts._replace(path=f"/{db}"))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args) -> None:
    """In an xdist worker, point ``REDIS_URL`` at the worker's own database before pytest-django
    (whose hook runs after this one) loads the settings."""
    worker, url = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("REDIS_URL", "")
    if worker and url:
        os.environ["REDIS_URL"] = worker_redis_url(url, worker)
