"""PostgreSQL connections stay bounded under concurrent API clients (issue 22: without a pool,
daphne held one connection per concurrent request and kept it; 100 clients ran the server out of
connections). Real daphne on the test database, real PostgreSQL, the bench's client and counter
(``bench/api_load.py``) with a small pool."""

from __future__ import annotations

import os

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

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
