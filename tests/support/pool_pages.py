"""Browser-test helpers shared by the pool and job page tests: the map highlight colours and the server's REST API with a token of the user (``api`` returns the decoded body)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

#: colours of map.js (highlighted host, dimmed node) and pool.js (the "GPUs held" line)
HIGHLIGHT, DIM = "#ffa657", "#26303a"


def token(server) -> str:
    """An API token of ``admin`` (``manage.py drf_create_token``) on ``server``."""
    out = server.manage("drf_create_token", "admin").stdout
    match = re.search(r"Generated token (\w+)", out)
    assert match, out
    return match.group(1)


def api(server, tok: str, method: str, path: str, body: dict | None = None) -> dict:
    """``method path`` on ``server`` with token ``tok``: the decoded JSON body."""
    req = urllib.request.Request(
        f"{server.url}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Token {tok}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{method} {path}: HTTP {exc.code} {exc.read()[:500]!r}") from None
