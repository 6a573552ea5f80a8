"""The REST API of a browser test's server (another process) with an admin token: ``api`` returns
the decoded body and raises ``urllib.error.HTTPError`` on a 4xx/5xx; ``admin_token`` makes one with
the server's own token endpoint."""

from __future__ import annotations

import json
import urllib.request

from tests.browser_support import token


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
    """A new API token of ``admin`` on ``server`` (:func:`tests.browser_support.token`: the
    server's ``POST /api/accounts/users/token/``)."""
    return token(server, "admin")
