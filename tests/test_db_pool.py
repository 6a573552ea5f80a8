"""PostgreSQL connections stay bounded under concurrent API clients (issue 22: without a pool,
daphne held one connection per concurrent request and kept it; 100 clients ran the server out of
connections). Real daphne on the test database, real PostgreSQL, the bench's client and counter
(``bench/api_load.py``) with a small pool."""

from __future__ import annotations

import http.client
import json
import os
import threading
import time

import pytest
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection, transaction

from accounts.roles import Role, set_role
from accounts.tokens import create_token
from bench import api_load

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.mark.skipif(not os.environ.get("DATABASE_URL"), reason="needs PostgreSQL (DATABASE_URL)")
def test_more_concurrent_requests_than_the_pool_all_answer_within_its_connections(transactional_db, tmp_path):
    pool_max, clients = 3, 12
    user = get_user_model().objects.create(username="load")
    set_role(user, Role.VIEWER)
    settings = connection.settings_dict
    db_url = f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"
    server = api_load.Server(
        db_url,
        os.environ["REDIS_URL"],
        api_load._free_port(),
        pool_max=pool_max,
        pool_min=1,
        log=tmp_path / "daphne.log",
    )
    server.token = create_token(user, "load").key
    sessions = api_load.Sessions(db_url)
    try:
        server.start()
        result = api_load.run(server, sessions, clients, requests_each=3)
    finally:
        sessions.close()
        server.stop()
    assert result["status"] == {"200": clients * 3}, result
    assert result["failed"] == 0, result
    # twelve clients at once shared three connections: none opened a fourth (without the pool: 12+)
    assert 1 <= result["max_connections_seen"] <= pool_max, result
    assert result["connections_after"] <= pool_max, result


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {what}")


def _get(port: int, path: str, headers: dict) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path, headers={"Host": "127.0.0.1", **headers})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


@pytest.mark.skipif(not os.environ.get("DATABASE_URL"), reason="needs PostgreSQL (DATABASE_URL)")
def test_a_request_that_waits_past_the_pool_timeout_answers_503_with_retry_after(transactional_db, tmp_path):
    """daphne with a pool of one connection and a 1 s pool timeout: a request holding that
    connection (blocked on a table lock this test takes) makes the next API request and the next
    page wait past the timeout: each answers 503 with ``Retry-After`` (JSON under /api/, the styled
    page elsewhere) and is one WARNING line in the server's log, no traceback (issue 22: it was a
    500 with a traceback). The held request then answers 200."""
    user = get_user_model().objects.create(username="busy")
    set_role(user, Role.VIEWER)
    session = SessionStore()
    session[SESSION_KEY], session[BACKEND_SESSION_KEY] = (
        str(user.pk),
        "django.contrib.auth.backends.ModelBackend",
    )
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    settings = connection.settings_dict
    db_url = f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT']}/{settings['NAME']}"
    log = tmp_path / "daphne.log"
    server = api_load.Server(
        db_url, os.environ["REDIS_URL"], api_load._free_port(), pool_max=1, pool_min=1, log=log
    )
    server.env["WEFT_DB_POOL_TIMEOUT_S"] = "1"
    server.token = create_token(user, "busy").key
    token = {"Authorization": f"Token {server.token}"}
    held: dict = {}
    try:
        server.start()
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute("LOCK TABLE accounts_apitoken IN ACCESS EXCLUSIVE MODE")
            first = threading.Thread(
                target=lambda: held.update(answer=_get(server.port, "/api/fabric/fabrics/", token))
            )
            first.start()

            def waiting_on_the_lock():  # the server's one connection is the held request's
                cur.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'",
                    [api_load.APPLICATION_NAME],
                )
                return cur.fetchone()[0] == 1

            _wait_for(waiting_on_the_lock, 20, "the first request waits on the lock")
            t0 = time.monotonic()
            status, headers, body = _get(server.port, "/api/fabric/fabrics/", token)
            api_wait = time.monotonic() - t0
            page = _get(server.port, "/events/", {"Cookie": f"sessionid={session.session_key}"})
            assert "answer" not in held  # still held while both waited
        first.join(30)
    finally:
        server.stop()
    assert status == 503, (status, body)
    assert headers["Retry-After"] == "1" and headers["Content-Type"] == "application/json"
    assert json.loads(body)["detail"].startswith("Weft is busy: no database connection was free in time")
    assert 1.0 <= api_wait < 10, api_wait  # it waited the pool's timeout, then answered
    assert page[0] == 503 and page[1]["Retry-After"] == "1", page[:2]
    assert b'data-status="503"' in page[2]
    assert held["answer"][0] == 200  # the held request went on once the lock was gone
    text = log.read_text()
    lines = [line for line in text.splitlines() if "503 for GET" in line]
    assert len(lines) == 2 and all("WARNING" in line for line in lines), text
    assert "/api/fabric/fabrics/" in lines[0] and "/events/" in lines[1], lines
    assert "Traceback" not in text and "Service Unavailable" not in text and "ERROR" not in text, text
