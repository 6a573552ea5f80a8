"""The REST API of a browser test's server (another process) with an admin token: ``api`` returns
the decoded body and raises ``urllib.error.HTTPError`` on a 4xx/5xx; ``admin_token`` makes one with
``manage.py drf_create_token admin``."""

from __future__ import annotations

import json
import re
import urllib.request


def api(server, token: str, method: str, path: str, body: dict | None = None) -> dict:
    """``method path`` on ``server`` with ``token``: the decoded JSON body (HTTPError on 4xx/5xx)."""
    req = urllib.request.Request(
        f"{server.url}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"{}")


def call(server, token: str, path: str, body: dict | None = None) -> dict:
    """GET ``path``, or POST ``body`` to it: :func:`api` with the method the body implies."""
    return api(server, token, "GET" if body is None else "POST", path, body)


def admin_token(server) -> str:
    """An API token of ``admin`` (``manage.py drf_create_token``) on ``server``."""
    out = server.manage("drf_create_token", "admin").stdout
    match = re.search(r"Generated token (\w+)", out)
    assert match, out
    return match.group(1)
