"""Project-wide test configuration and the fixtures every app's tests share.

Shared fixtures live here and only here: ``users`` (one user per role), ``client_for`` (an API
client signed in as a role or user), ``anonymous``/``viewer``/``operator``/``admin`` (clients),
``committed_signals``, ``realdata``. Data and helpers shared by test modules are in
``tests.support``; a test module never imports from another test module.
"""

import os
from pathlib import Path

import pytest

from tests.support.users import create_role_users


def _no_db_pool_in_the_test_process() -> None:
    """The test process connects without a pool (one connection per thread, as before the pool):
    its concurrency tests hold up to ~30 connections at once across barriers and row locks, and
    their contention figures were tuned on that. The pool is tested in the server it is for,
    daphne (tests/test_db_pool.py, bench/api_load.py). pytest-django has loaded the settings
    before this file, so the environment (``WEFT_DB_POOL_MAX=0``) is too late: the connection
    settings are changed in place, before any connection exists."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database.get("OPTIONS", {}).pop("pool", None) is not None:
        database["CONN_MAX_AGE"] = 60


_no_db_pool_in_the_test_process()

pytest_plugins = ["tests.browser_support", "tests.process_support"]

REALDATA = Path(os.environ.get("WEFT_REALDATA", Path(__file__).resolve().parents[1] / "shared" / "realdata"))


@pytest.fixture(scope="session")
def realdata() -> Path:
    """The folder of public real-fabric outputs (``$WEFT_REALDATA``); skips when absent."""
    if not REALDATA.is_dir():
        pytest.skip(f"WEFT_REALDATA folder {REALDATA} is absent: real-fabric data tests skipped")
    return REALDATA


#: markers of tests that run real processes (labs, servers, Chromium, snmpsim, long waits): under
#: pytest-xdist (``-n 2 --dist loadgroup``, bin/test) the ones of a test module go to one worker
#: together (an ``xdist_group`` per module), so its module-scoped lab, slapd or OpenID provider
#: starts once; two modules' processes run side by side on the two workers (each lab has its own
#: ibsim socket; the tests on ibsim's default socket take a lock file), and the in-process tests
#: fill in one at a time.
PROCESS_MARKERS = ("lab", "browser", "slow", "snmpsim")
#: fixtures that start such processes (a test using one goes to its module's group, marked or not)
PROCESS_FIXTURES = (
    "lab_factory", "small_lab", "default_socket_lab_factory", "weft_server", "weft_server_factory",
    "browser_page", "_chromium", "slapd_directory", "slapd_factory", "oidc_provider",
)  # fmt: skip


def process_group(item) -> str | None:
    """The ``xdist_group`` of a test that runs real processes (``processes:<its module's path>``),
    ``None`` for an in-process test."""
    fixtures = getattr(item, "fixturenames", ())
    if any(m in item.keywords for m in PROCESS_MARKERS) or any(f in fixtures for f in PROCESS_FIXTURES):
        return "processes:" + item.nodeid.split("::", 1)[0]
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Skip ``integration`` tests unless PostgreSQL and Redis are configured; under xdist with
    ``--dist loadgroup``, put the tests that run processes in their module's group
    (:func:`process_group`). pytest-xdist tells a worker ``config.option.loadgroup`` (its
    ``dist`` option is ``"no"`` there: the controller distributes), and its own hook turns the
    groups into node ids: this one runs first (``tryfirst``), or the groups would come too late."""
    if getattr(config.option, "loadgroup", False) or getattr(config.option, "dist", "no") == "loadgroup":
        for item in items:
            group = process_group(item)
            if group:
                item.add_marker(pytest.mark.xdist_group(group))
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith(("postgres://", "postgresql://")) and os.environ.get("REDIS_URL"):
        return
    skip = pytest.mark.skip(reason="integration: set DATABASE_URL (PostgreSQL) and REDIS_URL to run")
    for item in items:
        if "integration" in item.keywords:
            item.add_marker(skip)


def _flush_past_the_append_only_audit_triggers() -> None:
    """Let the flush between transactional tests empty the audit log: its triggers refuse DELETE
    (SQLite) and TRUNCATE (PostgreSQL) to everyone (``accounts.append_only_sql``); the test
    flush sets them aside inside its own transaction."""
    from django.db.backends.postgresql.base import DatabaseOperations as PgOps
    from django.db.backends.sqlite3.base import DatabaseOperations as SqliteOps

    from accounts.append_only_sql import flush_statements

    for ops in (PgOps, SqliteOps):
        original = ops.sql_flush

        def sql_flush(self, style, tables, *args, _original=original, **kwargs):
            return flush_statements(self.connection.vendor, _original(self, style, tables, *args, **kwargs))

        ops.sql_flush = sql_flush


_flush_past_the_append_only_audit_triggers()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix) -> None:
    """pytest-django's test database settings (a name per xdist worker); on PostgreSQL also
    Django's ``TEST["TEMPLATE"]``: each worker's test database is a copy of the migrated template
    (``tests.support.migrated``, made once per set of migrations), so its ``migrate`` has nothing
    to apply."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"] == "django.db.backends.postgresql" and os.environ.get("DATABASE_URL"):
        from tests.support.migrated import pg_template

        database.setdefault("TEST", {})["TEMPLATE"] = pg_template(os.environ["DATABASE_URL"])


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Hash the test users' passwords with MD5: PBKDF2 takes ~0.3 s a password, and no test here
    is about the hasher (password rules are validators, which still run). Servers that browser
    tests start keep their own settings."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _sweep_publish_inline(settings):
    """Publish committed sweeps inline (``WEFT_SWEEP_PUBLISH_ASYNC`` off, as in the embedded
    deployment): with PostgreSQL + Redis the default is a per-process publisher thread, which
    would run the heatmap and counter-rule receivers after a test's database access ended (or
    on its own connection, outside a test's transaction). The thread itself is tested in
    ``telemetry/tests/test_publisher.py``; servers that tests start keep their own settings."""
    settings.WEFT_SWEEP_PUBLISH_ASYNC = False


@pytest.fixture
def users(db) -> dict:
    """``{"viewer": vic, "operator": olga, "admin": ada}``: one active user per role
    (``tests.support.users``)."""
    return create_role_users()


@pytest.fixture
def client_for(users):
    """``client_for(who, raise_request_exception=True) -> APIClient`` signed in (a session, as
    the browser) as ``users[who]`` for a role name, or as the given user. An ``APIClient`` is also
    a Django test client: pages and the API alike."""
    from rest_framework.test import APIClient

    def make(who, *, raise_request_exception: bool = True) -> APIClient:
        user = users[who] if isinstance(who, str) else who
        client = APIClient(raise_request_exception=raise_request_exception)
        client.force_login(user)
        return client

    return make


@pytest.fixture
def anonymous(db):
    """An API client with no credentials."""
    from rest_framework.test import APIClient

    return APIClient()


@pytest.fixture
def viewer(client_for):
    return client_for("viewer")


@pytest.fixture
def operator(client_for):
    return client_for("operator")


@pytest.fixture
def admin(client_for):
    return client_for("admin")


@pytest.fixture
def committed_signals():
    """``discovery_committed`` sends of the test as ``[(fabric_id, discovery_id)]``, other apps'
    receivers detached (see ``tests.support.signals.record_committed``)."""
    from tests.support.signals import record_committed

    yield from record_committed()
