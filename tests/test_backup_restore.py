"""Backup and restore (issue 25 §4; README, "Backup and restore"): ``pg_dump -Fc`` of a live Weft
database taken while counter sweeps of a lab fabric and scheduling passes write to it, restored with
``pg_restore`` into a fresh database owned by a role of its own, gives a Weft that starts on the
copy (``manage.py check``, ``migrate --check``, ``backup_check``, daphne's API with a token issued
before the dump) and holds the same fabrics, partitions, pools, allocations and jobs, its audit
log included and still append-only (the triggers are restored with the tables).

The commands are the README's, run as real processes against the local PostgreSQL server of the
test database (its superuser makes the role and database, as ``postgres`` does on a database host).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest
from django.db import connection

from accounts.models import AuditEntry
from accounts.tokens import create_token
from fabric.models import Fabric, Partition
from fabric.services.discovery import discover
from fabric.services.partitions.edits import save_partition
from pools.models import Allocation, AllocationItem, Gpu, Pool
from scheduler.models import Job
from scheduler.services.queue import JobSpec, cancel, run_pass, submit
from telemetry.services.sweep import poll_fabric
from tests.support.jobs import gpu_cluster
from tests.support.waits import wait_for
from weft.management.commands.backup_check import report

pytestmark = [
    pytest.mark.integration,
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]
ROOT = Path(__file__).resolve().parents[1]
#: the counts a restore must keep exactly: nothing writes these while the dump runs
STABLE = ("fabrics", "nodes", "ports", "links", "partitions", "partition_members", "tenants", "pools",
          "gpus", "users", "api_tokens", "devices", "isolated_ports")  # fmt: skip
#: the counts the writers grow during the dump: the copy holds a state between before and after
GROWING = ("jobs", "allocations", "sweeps", "events", "audit_entries")


def _server() -> dict:
    db = connection.settings_dict
    return {
        "host": db["HOST"] or "127.0.0.1",
        "port": str(db["PORT"] or 5432),
        "user": db["USER"] or "postgres",
    }


def _run(argv: list[str], timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env={**os.environ, **env}
    )


def _psql(sql: str, db: str = "postgres") -> subprocess.CompletedProcess:
    s = _server()
    return _run(["psql", "-h", s["host"], "-p", s["port"], "-U", s["user"], "-d", db, "-v", "ON_ERROR_STOP=1",
                 "-Atc", sql])  # fmt: skip


def _rows(db: str, sql: str) -> list[tuple]:
    """Rows of ``sql`` on database ``db`` of the same server (psycopg, a connection of its own)."""
    import psycopg

    s = _server()
    with psycopg.connect(host=s["host"], port=s["port"], user=s["user"], dbname=db) as conn:
        return [tuple(r) for r in conn.execute(sql).fetchall()]


def _table(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _keys(db: str) -> dict[str, list[tuple]]:
    """The key fields compared between the live database and the restored copy."""
    f, p, pl, j = _table(Fabric), _table(Partition), _table(Pool), _table(Job)
    return {
        "fabrics": _rows(db, f"SELECT id, name, site FROM {f} ORDER BY id"),
        "partitions": _rows(db, f"SELECT id, fabric_id, pkey, name FROM {p} ORDER BY id"),
        "pools": _rows(db, f"SELECT id, name, tenant_id, fabric_id FROM {pl} ORDER BY id"),
        "jobs": _rows(db, f"SELECT id, name, pool_id, submitted_at FROM {j} ORDER BY id"),
        "audit": _rows(
            db,
            f"SELECT id, at, action, object_type, object_id, changes::text FROM "
            f"{_table(AuditEntry)} ORDER BY id",
        ),  # fmt: skip
    }


def _consistent(db: str) -> tuple[int, int, int]:
    """``(GPUs allocated, active allocation items, placed jobs without an active allocation)`` of
    database ``db``: a copy taken inside a scheduling pass's transaction would differ."""
    gpus = _rows(db, f"SELECT count(*) FROM {_table(Gpu)} WHERE state = 'allocated'")[0][0]
    items = _rows(db, f"SELECT count(*) FROM {_table(AllocationItem)} WHERE active")[0][0]
    orphans = _rows(
        db,
        f"SELECT count(*) FROM {_table(Job)} j LEFT JOIN {_table(Allocation)} a ON a.id = j.allocation_id "
        f"WHERE j.state = 'placed' AND (a.id IS NULL OR a.state <> 'active')",
    )[0][0]
    return gpus, items, orphans


def _writers(
    fabric: Fabric, pool: Pool, stop: threading.Event, done: dict, errors: list
) -> list[threading.Thread]:
    """Two threads writing as a live Weft does until ``stop``: counter sweeps of the lab fabric
    (``poll_fabric``, the beat's sweep) and scheduling passes (a 1-GPU job submitted, a pass, and
    from the ninth on the oldest placed job cancelled: allocations made and released)."""

    def sweeper():
        try:
            while not stop.is_set():
                poll_fabric(fabric)
                done["sweeps"] += 1
        except Exception as exc:  # the test fails on it
            errors.append(exc)
        finally:
            connection.close()

    def scheduler():
        try:
            k = 0
            while not stop.is_set():
                submit(JobSpec(name=f"backup-{k}", pool_id=pool.pk, count=1))
                run_pass()
                oldest = Job.objects.filter(state="placed").order_by("id").first()
                if k >= 8 and oldest is not None:
                    cancel(oldest.pk, reason="backup test")
                done["passes"] += 1
                k += 1
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    return [threading.Thread(target=t, name=t.__name__, daemon=True) for t in (sweeper, scheduler)]


def test_a_dump_of_a_live_weft_restores_into_a_weft_that_starts_with_the_same_data(
    lab_factory, users, tmp_path
):
    from lab.pytest_plugin import small_netfile

    if connection.vendor != "postgresql":
        pytest.skip("pg_dump and pg_restore: PostgreSQL")
    s = _server()
    live = connection.settings_dict["NAME"]
    restored, owner = f"{live}_restored"[:63], f"{live}_owner"[:63]

    # a live Weft: a discovered lab fabric with a partition, a GPU pool, an API token
    lab = lab_factory(small_netfile())
    fabric = Fabric.objects.create(name="backup-lab", tool_env=dict(lab.tool_env))
    assert discover(fabric).status == "ok"
    save_partition(Partition(fabric=fabric, pkey=0x0B0B, name="backup"), user=users["admin"])
    cluster = gpu_cluster(2, 2, 4, name="backup")  # 16 GPUs
    token = create_token(users["admin"], "backup test", reason="backup test", actor=users["admin"]).key

    stop, done, errors = threading.Event(), {"sweeps": 0, "passes": 0}, []
    threads = _writers(fabric, cluster.pool, stop, done, errors)
    daphne = None
    try:
        for t in threads:
            t.start()
        wait_for(lambda: done["sweeps"] >= 2 and done["passes"] >= 2 or errors, 120, "both writers at work")
        assert not errors, errors
        before, earlier = report()["counts"], _keys(live)
        at = dict(done)
        dump = tmp_path / "weft.dump"
        # the README's backup command, while both writers run
        out = _run(
            ["pg_dump", "-Fc", "-h", s["host"], "-p", s["port"], "-U", s["user"], "-f", str(dump), live]
        )
        assert out.returncode == 0, out.stderr
        during = {k: done[k] - at[k] for k in done}
        wait_for(lambda: min(done[k] - at[k] for k in done) >= 2 + max(during.values()) or errors, 120,
                 "both writers to go on after the dump")  # fmt: skip
    finally:
        stop.set()
        for t in threads:
            t.join(120)
    try:
        assert not errors, errors
        after = report()["counts"]
        assert after["sweeps"] > before["sweeps"] and after["jobs"] > before["jobs"]  # written meanwhile

        # the README's restore: a role and a database of its own, then pg_restore as that role
        assert _psql(f'CREATE ROLE "{owner}" LOGIN').returncode == 0
        made = _run(
            ["createdb", "-h", s["host"], "-p", s["port"], "-U", s["user"], "--owner", owner, restored]
        )
        assert made.returncode == 0, made.stderr
        back = _run(["pg_restore", "-h", s["host"], "-p", s["port"], "-U", s["user"], "--no-owner",
                     f"--role={owner}", "--exit-on-error", "-d", restored, str(dump)])  # fmt: skip
        assert back.returncode == 0, back.stderr
        owners = _rows(restored, "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'")
        assert owners == [(owner,)]

        # a Weft on the copy, as its owner role: checks, migrations, backup_check, the API
        env = {
            k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "WEFT_CELERY_EAGER")
        }
        env.update(DATABASE_URL=f"postgres://{owner}@{s['host']}:{s['port']}/{restored}", WEFT_PRODUCTION="0",
                   WEFT_DATA_DIR=str(tmp_path), PYTHONUNBUFFERED="1")  # fmt: skip
        manage = [sys.executable, "manage.py"]
        for argv in (["check"], ["migrate", "--check"]):
            ran = subprocess.run(
                manage + argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
            )
            assert ran.returncode == 0, (argv, ran.stdout, ran.stderr)
        ran = subprocess.run(manage + ["backup_check", "--json"], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=300)  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        copy = json.loads(ran.stdout)
        assert copy["problems"] == [] and copy["unapplied"] == []
        assert {"accounts_auditentry_append_only", "accounts_auditentry_no_truncate"} <= set(
            copy["audit_triggers"]
        )
        assert {k: copy["counts"][k] for k in STABLE} == {k: after[k] for k in STABLE}
        for k in GROWING:
            assert before[k] <= copy["counts"][k] <= after[k], (k, before[k], copy["counts"][k], after[k])

        # the same rows: stable ones equal, the growing ones a prefix of the live database's
        now, then = _keys(live), _keys(restored)
        for k in ("fabrics", "partitions", "pools"):
            assert then[k] == now[k] and then[k], k
        for k in ("jobs", "audit"):
            # rows that never change once written: all those committed before the dump, none unknown
            assert set(earlier[k]) <= set(then[k]) <= set(now[k]), k
        gpus, items, orphans = _consistent(restored)
        assert (gpus, orphans) == (items, 0) and items > 0  # no half-written pass in the copy

        # the audit log is still append-only on the copy
        a = _table(AuditEntry)
        for sql in (f"DELETE FROM {a} WHERE id = (SELECT max(id) FROM {a})",
                    f"UPDATE {a} SET action = 'x' WHERE id = (SELECT max(id) FROM {a})", f"TRUNCATE {a}"):  # fmt: skip
            refused = _psql(sql, restored)
            assert refused.returncode != 0 and "append-only" in refused.stderr, (sql, refused.stderr)

        # daphne on the copy answers the API with the token issued before the dump
        from tests.browser_support import free_port

        port = free_port()
        log = (tmp_path / "daphne.log").open("w")
        daphne = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "weft.asgi:application"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

        def get(path: str):
            req = urllib.request.Request(
                f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Token {token}"}
            )
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    return json.loads(resp.read())
            except OSError:
                return None

        fabrics = wait_for(
            lambda: get("/api/fabric/fabrics/") or daphne.poll() is not None, 60, "daphne's API"
        )
        assert isinstance(fabrics, dict), (tmp_path / "daphne.log").read_text()[-3000:]
        assert sorted(f["name"] for f in fabrics["results"]) == sorted(r[1] for r in now["fabrics"])
        assert get("/api/pools/pools/")["count"] == after["pools"]
        assert get("/api/scheduler/jobs/")["count"] == copy["counts"]["jobs"]
        parts = get(f"/api/fabric/partitions/?fabric={fabric.pk}")["results"]
        assert sorted(p["pkey"] for p in parts) == sorted(
            r[2] for r in now["partitions"] if r[1] == fabric.pk
        )
        assert ("backup", 0x0B0B) in [(p["name"], p["pkey"]) for p in parts]
    finally:
        if daphne is not None and daphne.poll() is None:
            os.killpg(daphne.pid, signal.SIGTERM)
            try:
                daphne.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(daphne.pid, signal.SIGKILL)
                daphne.wait(10)
        _psql(f'DROP DATABASE IF EXISTS "{restored}" WITH (FORCE)')
        _psql(f'DROP ROLE IF EXISTS "{owner}"')
