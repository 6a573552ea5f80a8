"""A migrated Weft database, made once per set of migrations and copied for every process that
needs a fresh one: the demo runs and servers that tests start, the benches' scratch databases and
the PostgreSQL test databases.

``manage.py migrate`` on an empty database costs 6-15 s of CPU (Django renders the model states
of the ~70 migrations one operation at a time); a copy costs milliseconds, and the ``migrate``
each process still runs on its copy finds nothing to apply (~0.2 s, its ``post_migrate``
receivers included). The copy is of what ``migrate`` wrote (schema, triggers, the rows the
migrations and ``post_migrate`` write), nothing else.

The template is keyed by :func:`migrations_key` (the content of every app's ``migrations/*.py``
and of the project modules they import, Django's version and ``requirements.txt``): a changed or
new migration, or an edit of the SQL a migration imports, makes a new template.

* SQLite: ``<temporary folder>/weft-migrated/<key>.sqlite3`` (:func:`sqlite_template`), copied
  with :func:`seed_sqlite`.
* PostgreSQL: the database ``weft_migrated_<key>`` on the server (:func:`pg_template`), migrated
  under a temporary name and renamed when done (a half-made template is never copied); templates
  of other keys are dropped then, and half-made ones a killed maker left (not one a session is
  connected to: a migrate still running, another checkout copying its template).
  ``CREATE DATABASE … TEMPLATE`` copies it (:func:`create_pg_database`, or Django's
  ``TEST["TEMPLATE"]`` for the test databases, root ``conftest.py``).

A file lock (``<temporary folder>/weft-migrated/<key>.lock``) lets one process make a template
while the others (xdist workers, a bench beside the tests) wait for it. Raises
``RuntimeError`` with ``migrate``'s output when it fails.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: where the templates and their locks live
CACHE = Path(tempfile.gettempdir()) / "weft-migrated"
#: prefix of the PostgreSQL template databases (``<prefix><key>``)
PG_PREFIX = "weft_migrated_"
#: prefix of a template being migrated (``<prefix><key>_<random>``), renamed to ``PG_PREFIX<key>`` when done
PG_WORK_PREFIX = "weft_migrating_"
#: environment variables of the caller that must not reach the ``migrate`` that makes a template
_CALLER_DB = ("DATABASE_URL", "REDIS_URL", "WEFT_SQLITE_PATH", "WEFT_DATA_DIR", "DJANGO_SETTINGS_MODULE")


def _project_imports(path: Path, root: Path) -> set[Path]:
    """The project's own modules (files under ``root``, not the virtualenv's) that ``path``
    imports, at any depth in the file (an ``import`` inside a ``RunPython`` function too)."""
    found: set[Path] = set()
    for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            base = root.joinpath(*name.split("."))
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file():
                    found.add(candidate)
    return found


def migrations_key(root: Path = ROOT) -> str:
    """12 hex digits naming the project's migrations: a SHA-256 of every ``<app>/migrations/*.py``
    and of every project module they import, directly or through another (``accounts.0003``'s
    trigger SQL lives in ``accounts/append_only_sql.py``: an edit there changes what ``migrate``
    writes, so it makes a new template too), each by path and content in path order, Django's
    version and ``requirements.txt`` (the pinned versions of the third-party apps, whose
    migrations run too)."""
    import django

    digest = hashlib.sha256(django.get_version().encode() + b"\0" + (root / "requirements.txt").read_bytes())
    files = set(root.glob("*/migrations/*.py"))
    todo = list(files)
    while todo:
        for module in _project_imports(todo.pop(), root) - files:
            files.add(module)
            todo.append(module)
    for path in sorted(files):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


@contextlib.contextmanager
def _locked(key: str) -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _migrate(env: dict[str, str], data_dir: str) -> None:
    """``manage.py migrate`` in a subprocess with the caller's environment but its database
    settings, plus ``env``; raises ``RuntimeError`` with its output when it fails."""
    base = {k: v for k, v in os.environ.items() if k not in _CALLER_DB}
    proc = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
        cwd=ROOT,
        env={**base, "WEFT_PRODUCTION": "0", "WEFT_DATA_DIR": data_dir, **env},
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"migrate for the template failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        )


def sqlite_template() -> Path:
    """The migrated SQLite template of the current migrations (made here when absent); do not
    write to it, copy it (:func:`seed_sqlite`)."""
    key = migrations_key()
    path = CACHE / f"{key}.sqlite3"
    if path.exists():
        return path
    with _locked(key):
        if not path.exists():
            work = Path(tempfile.mkdtemp(prefix="weft-migrating-", dir=CACHE))
            try:
                _migrate({"WEFT_SQLITE_PATH": str(work / "weft.sqlite3")}, str(work))
                import sqlite3

                con = sqlite3.connect(work / "weft.sqlite3")
                try:
                    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the whole database in the one file
                finally:
                    con.close()
                os.replace(work / "weft.sqlite3", path)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    return path


def seed_sqlite(dest: Path) -> Path:
    """Copy the migrated SQLite template to ``dest`` (a file path; its folder is made, a file there
    replaced); returns ``dest``. Point ``WEFT_DATA_DIR`` at ``dest``'s folder (``weft.sqlite3``) or
    ``WEFT_SQLITE_PATH`` at ``dest``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(sqlite_template(), dest)
    return dest


def _server(url: str) -> str:
    """``postgresql://user@host:port`` of a database URL (its database name, if any, dropped)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


def pg_template(url: str) -> str:
    """The name of the migrated template database of the current migrations on the PostgreSQL
    server of ``url`` (a server or database URL), made there when absent. No session may stay
    connected to it (PostgreSQL then refuses to copy it)."""
    import psycopg

    key = migrations_key()
    name = PG_PREFIX + key
    server = _server(url)

    def exists(conn) -> bool:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None

    def like(prefix: str) -> str:
        return prefix.replace("_", r"\_") + "%"

    def leftovers(conn) -> list[str]:
        """This key's half-made templates: a maker killed mid-``migrate`` (SIGKILL, SIGTERM: no
        ``except`` ran) left its work database behind."""
        rows = conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", [like(work_prefix)])
        return [row[0] for row in rows.fetchall()]

    def drop_unused(conn, names: list[str]) -> None:
        """Drop ``names`` but those a session is connected to (a ``migrate`` still running, another
        checkout copying its template): never pulled from under a user."""
        for old in names:
            try:
                conn.execute(f'DROP DATABASE IF EXISTS "{old}"')
            except psycopg.errors.ObjectInUse:
                pass

    work_prefix = f"{PG_WORK_PREFIX}{key}_"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        if exists(conn) and not leftovers(conn):
            return name
    with _locked(key):  # this host's makers of this key wait here: this key's work databases are dead
        with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
            drop_unused(conn, leftovers(conn))
            if exists(conn):
                return name
            work = f"{work_prefix}{uuid.uuid4().hex[:12]}"
            conn.execute(f'CREATE DATABASE "{work}"')
            data_dir = tempfile.mkdtemp(prefix="weft-migrating-")
            try:
                _migrate({"DATABASE_URL": f"{server}/{work}"}, data_dir)
                conn.execute(f'ALTER DATABASE "{work}" RENAME TO "{name}"')
            except BaseException:
                conn.execute(f'DROP DATABASE IF EXISTS "{work}" WITH (FORCE)')
                raise
            finally:
                shutil.rmtree(data_dir, ignore_errors=True)
            stale = conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE %s AND datname <> %s",
                [like(PG_PREFIX), name],
            ).fetchall()
            drop_unused(conn, [old for (old,) in stale])
    return name


def create_pg_database(url: str, name: str) -> None:
    """``CREATE DATABASE name TEMPLATE <the migrated template>`` on the server of ``url``. A copy
    that PostgreSQL refuses because another copy of the same template is starting is retried
    for up to 30 s."""
    import psycopg

    template = pg_template(url)
    deadline = time.monotonic() + 30
    with psycopg.connect(f"{_server(url)}/postgres", autocommit=True) as conn:
        while True:
            try:
                conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
                return
            except psycopg.errors.ObjectInUse:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
