"""PostgreSQL lock probes for race tests over real parallel connections: which backend a thread's
connection is, and whether a backend waits for a lock (``pg_locks``)."""

from __future__ import annotations

from django.db import connection


def backend_pid() -> int:
    """``pg_backend_pid()`` of this thread's connection."""
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        return cur.fetchone()[0]


def waits_for_a_lock(pid: int) -> bool:
    """Whether backend ``pid`` waits for a lock not granted yet."""
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_locks WHERE pid = %s AND NOT granted", [pid])
        return cur.fetchone()[0] > 0
