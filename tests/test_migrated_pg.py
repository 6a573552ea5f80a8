"""The PostgreSQL migrated template (``tests.support.migrated.pg_template``) on a real server:
a maker killed mid-``migrate`` leaves a work database that the next call drops, and nothing a
session is connected to is dropped from under it. Runs under its own prefixes (not the suite's
``weft_migrated_`` templates)."""

from __future__ import annotations

import os

import pytest

from tests.support import migrated

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(300),
]


def _names(conn, prefix: str) -> set[str]:
    like = prefix.replace("_", r"\_") + "%"
    return {r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", [like])}


def test_half_made_templates_go_and_used_databases_stay(monkeypatch):
    import psycopg

    url = os.environ["DATABASE_URL"]
    server = migrated._server(url)
    prefix, work_prefix = f"brk_{os.getpid()}_migrated_", f"brk_{os.getpid()}_migrating_"
    monkeypatch.setattr(migrated, "PG_PREFIX", prefix)
    monkeypatch.setattr(migrated, "PG_WORK_PREFIX", work_prefix)
    key = migrated.migrations_key()
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        try:
            # a maker killed mid-migrate; another still migrating (connected); another key's template in use
            for name in (f"{work_prefix}{key}_dead", f"{work_prefix}{key}_live", f"{prefix}000000000000"):
                admin.execute(f'CREATE DATABASE "{name}"')
            with (
                psycopg.connect(f"{server}/{work_prefix}{key}_live"),
                psycopg.connect(f"{server}/{prefix}000000000000"),
            ):
                assert migrated.pg_template(url) == f"{prefix}{key}"
                assert _names(admin, work_prefix) == {f"{work_prefix}{key}_live"}
                assert _names(admin, prefix) == {f"{prefix}{key}", f"{prefix}000000000000"}
            # the template exists: a leftover is dropped all the same
            admin.execute(f'CREATE DATABASE "{work_prefix}{key}_dead2"')
            assert migrated.pg_template(url) == f"{prefix}{key}"
            assert _names(admin, work_prefix) == set()  # the "live" one too, its session gone
        finally:
            for name in _names(admin, work_prefix) | _names(admin, prefix):
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
