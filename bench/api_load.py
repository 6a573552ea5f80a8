"""API under many concurrent clients on PostgreSQL: answers, latency and open database connections.

What runs (all real): a scratch PostgreSQL database (created here, migrated, dropped at the end),
daphne serving ``weft.asgi:application`` against it (the README's production server line, with
``WEFT_PRODUCTION=0`` so plain HTTP on 127.0.0.1 is served) and a pool of ``clients`` threads, each
with one keep-alive HTTP connection, each sending ``requests_each`` token-authenticated
``GET /api/fabric/fabrics/`` one after the other, all clients at once. A sampler thread counts the
server's sessions on the scratch database in ``pg_stat_activity`` every 20 ms.

Baseline (same run, same server): one client alone sending the same requests. Reported:

* ``p50_s``/``p99_s``/``max_s``: latency of one request under load; ``alone_p50_s`` the baseline's
  and ``p50_ratio`` = loaded / alone;
* ``status``: answers by status code, ``server_errors`` (5xx) and ``failed`` (no answer at all);
* ``pool_max``: the server's ``WEFT_DB_POOL_MAX``; ``max_connections_seen``: most sessions on the
  database at one time during the run; ``connections_after``: after the burst (idle, kept by the pool);
* ``load_start``/``load_end``: the 1-minute load average; ``quiet``: false when it was above 0.5
  at the start (the figures are then those of a shared machine).

Without a pool (issue 22: daphne runs each request on a thread of its own and CONN_MAX_AGE kept
every thread's connection), 100 clients opened one connection each and a third of the requests
failed with "too many clients already".

``measure(clients=200, requests_each=20, pool_max=10) -> dict``; ``python bench/api_load.py
[--clients N] [--requests K] [--pool-max M] [--port P] [--tiny]`` prints the dict as JSON on its
last line (``--tiny``: 20 clients × 5 requests, pool of 3: seconds, for CI). The database server
is ``DATABASE_URL``'s (default ``postgres://postgres@127.0.0.1:5432/weft``); the scratch database is
named after it (``<name>_api_load``). ``REDIS_URL`` (default db 0 on 127.0.0.1) is only configured.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.migrated import create_pg_database  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/weft"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
#: the endpoint every client reads (token authentication, a list query, pagination)
PATH = "/api/fabric/fabrics/"
SECRET_KEY = "api-load-bench-" + "k" * 40


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _with_dbname(url: str, name: str) -> str:
    head, _, _ = url.rpartition("/")
    return f"{head}/{name}"


@contextlib.contextmanager
def scratch_database(base_url: str, suffix: str = "api_load") -> Iterator[str]:
    """Create ``<base db name>_<suffix>`` on ``base_url``'s server, a copy of the migrated template
    (dropped first if a crashed run left it, and dropped again at the end, sessions included);
    yields its URL."""
    name = f"{base_url.rpartition('/')[2].split('?')[0]}_{suffix}"
    admin_url = _with_dbname(base_url, "postgres")

    def drop(conn):
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    with psycopg.connect(admin_url, autocommit=True) as conn:
        drop(conn)
    create_pg_database(base_url, name)  # a copy of the migrated template (tests.support.migrated)
    try:
        yield _with_dbname(base_url, name)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            drop(conn)


#: the server's PostgreSQL ``application_name``: its sessions are counted by it
APPLICATION_NAME = "weft_api_load"


class Sessions:
    """Counts the server's sessions (``application_name`` :data:`APPLICATION_NAME`) on one database
    in ``pg_stat_activity`` every ``interval`` seconds from a thread, keeping the largest count seen."""

    def __init__(self, database_url: str, interval: float = 0.02):
        self.database = database_url.rpartition("/")[2].split("?")[0]
        self.interval = interval
        self.conn = psycopg.connect(_with_dbname(database_url, "postgres"), autocommit=True)
        self.max_seen = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def count(self) -> int:
        """The server's sessions on the database now."""
        row = self.conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
            (self.database, APPLICATION_NAME),
        ).fetchone()
        return int(row[0])

    def _run(self) -> None:
        while not self._stop.is_set():
            self.max_seen = max(self.max_seen, self.count())
            self._stop.wait(self.interval)

    def __enter__(self) -> Sessions:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)

    def close(self) -> None:
        self.conn.close()


class Server:
    """daphne serving Weft on ``database_url`` (migrated, with an Admin and its API token)."""

    def __init__(self, database_url: str, redis_url: str, port: int, pool_max: int, pool_min: int, log: Path):
        self.port = port
        base = {k: v for k, v in os.environ.items() if not k.startswith(("WEFT_", "DJANGO_"))}
        self.env = {
            **base,
            "DATABASE_URL": f"{database_url}?application_name={APPLICATION_NAME}",
            "REDIS_URL": redis_url,
            "WEFT_PRODUCTION": "0",
            "SECRET_KEY": SECRET_KEY,
            "WEFT_DATA_DIR": str(log.parent),
            "WEFT_DB_POOL_MAX": str(pool_max),
            "WEFT_DB_POOL_MIN": str(pool_min),
            "WEFT_LOG_LEVEL": "WARNING",
            "EMAIL_URL": "console://",
            "PYTHONUNBUFFERED": "1",
        }
        self.log_path = log
        self.proc: subprocess.Popen | None = None
        self.token = ""

    def manage(self, *args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def prepare(self) -> Server:
        """Migrate the database, create the Admin ``admin`` and its token (:attr:`token`)."""
        self.manage("migrate", "--noinput")
        self.manage("set_role", "admin", "admin", "--create", "--password", "api-load-bench-password")
        self.token = self.manage("create_token", "admin", "--name", "api_load").split()[2]
        return self

    def start(self, timeout: float = 60) -> Server:
        """Start daphne (database prepared, :attr:`token` set); returns when it answers 200."""
        daphne = Path(sys.executable).with_name("daphne")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [str(daphne), "-b", "127.0.0.1", "-p", str(self.port), "weft.asgi:application"],
            cwd=ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daphne exited early:\n{self.log()}")
            with contextlib.suppress(OSError):
                if get(self.port, self.token)[0] == 200:
                    return self
            time.sleep(0.2)
        raise RuntimeError(f"daphne did not answer in {timeout}s:\n{self.log()}")

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text()[-5000:]
        return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        if getattr(self, "_log", None):
            self._log.close()


def get(port: int, token: str, conn: http.client.HTTPConnection | None = None) -> tuple[int, float]:
    """One ``GET PATH``; returns (status, seconds). Raises OSError/HTTPException on no answer."""
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        t0 = time.perf_counter()
        conn.request("GET", PATH, headers={"Authorization": f"Token {token}", "Host": "127.0.0.1"})
        resp = conn.getresponse()
        resp.read()
        return resp.status, time.perf_counter() - t0
    finally:
        if own:
            conn.close()


def burst(port: int, token: str, clients: int, requests_each: int) -> tuple[Counter, list[float], int]:
    """``clients`` threads released together, each sending ``requests_each`` requests on its own
    keep-alive connection (reconnecting after an error). Returns (statuses, latencies in seconds,
    requests with no answer)."""
    statuses: Counter = Counter()
    latencies: list[float] = []
    failed = [0]
    lock = threading.Lock()
    start = threading.Barrier(clients)

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        start.wait()
        for _ in range(requests_each):
            try:
                status, seconds = get(port, token, conn)
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                with lock:
                    failed[0] += 1
                continue
            with lock:
                statuses[status] += 1
                latencies.append(seconds)
        conn.close()

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses, latencies, failed[0]


def measure(
    clients: int = 200,
    requests_each: int = 20,
    pool_max: int = 10,
    pool_min: int = 2,
    port: int | None = None,
    database_url: str | None = None,
    redis_url: str | None = None,
    suffix: str = "api_load",
) -> dict:
    """Run the bench (module docstring) on the scratch database ``<name>_<suffix>``; returns its
    figures."""
    import tempfile

    try:
        import benchkit
    except ImportError:  # imported as bench.api_load (tests/test_db_pool.py), not run as a script
        from bench import benchkit

    watch = benchkit.LoadWatch()
    load_start = watch.start["1m"]
    base_url = database_url or os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    redis = redis_url or os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL
    with (
        tempfile.TemporaryDirectory(prefix="weft-api-load-") as tmp,
        scratch_database(base_url, suffix) as db_url,
    ):
        server = Server(db_url, redis, port or _free_port(), pool_max, pool_min, Path(tmp) / "daphne.log")
        sessions = None
        try:
            server.prepare().start()
            sessions = Sessions(db_url)
            result = run(server, sessions, clients, requests_each)
        finally:
            if sessions is not None:
                sessions.close()
            server.stop()
    return {
        "clients": clients,
        "requests": clients * requests_each,
        **result,
        "pool_max": pool_max,
        "load_start": round(load_start, 2),
        "load_end": round(os.getloadavg()[0], 2),
        # the peak is informational here: the bench's own 200 clients, daphne and PostgreSQL load
        # the machine, so "quiet" judges the start only
        "load_peak": round(max(watch.peak, os.getloadavg()[0]), 2),
        "quiet": load_start <= 0.5,
    }


def run(server: Server, sessions: Sessions, clients: int, requests_each: int) -> dict:
    """The baseline (one client alone) then the burst against a started ``server``; returns the
    figures of the module docstring from ``status`` to ``connections_after``."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    alone = [get(server.port, server.token, conn)[1] for _ in range(max(20, requests_each))]
    conn.close()
    with sessions:
        t0 = time.perf_counter()
        statuses, latencies, failed = burst(server.port, server.token, clients, requests_each)
        wall = time.perf_counter() - t0
    after = sessions.count()
    server_log = server.log()
    p50 = _percentile(latencies, 0.5)
    alone_p50 = statistics.median(alone)
    return {
        "status": {str(k): v for k, v in sorted(statuses.items())},
        "server_errors": sum(v for k, v in statuses.items() if k >= 500),
        "failed": failed,
        "wall_s": round(wall, 3),
        "requests_per_s": round(sum(statuses.values()) / wall, 1) if wall else None,
        "p50_s": round(p50, 4) if p50 is not None else None,
        "p99_s": round(_percentile(latencies, 0.99), 4) if latencies else None,
        "max_s": round(max(latencies), 4) if latencies else None,
        "alone_p50_s": round(alone_p50, 4),
        "p50_ratio": round(p50 / alone_p50, 2) if p50 is not None and alone_p50 else None,
        "max_connections_seen": sessions.max_seen,
        "connections_after": after,
        "too_many_clients_in_log": server_log.count("too many clients"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--requests", type=int, default=20, help="requests per client")
    parser.add_argument("--pool-max", type=int, default=10, help="the server's WEFT_DB_POOL_MAX")
    parser.add_argument("--port", type=int, default=None, help="daphne's port (default: a free one)")
    parser.add_argument("--tiny", action="store_true", help="20 clients x 5 requests, pool of 3 (CI)")
    parser.add_argument("--json", action="store_true", help="the figures as JSON (always the last line)")
    args = parser.parse_args(argv)
    if args.tiny:
        args.clients, args.requests, args.pool_max = 20, 5, 3
    result = measure(args.clients, args.requests, args.pool_max, min(2, args.pool_max), args.port)
    print(json.dumps(result))
    return 0 if result["server_errors"] == 0 and result["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
