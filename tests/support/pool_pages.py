"""Browser-test helpers shared by the pool and job page tests: the map highlight colours and the server's REST API with a token of the user (``api`` returns the decoded body)."""

from __future__ import annotations

import urllib.error

from tests.support import server_api
from tests.support.server_api import admin_token as token  # noqa: F401  (the pool and job page tests')

#: colours of the map (static/fabric/map/base.js: highlighted host, dimmed node) and pool.js (the "GPUs held" line)
HIGHLIGHT, DIM = "#ffa657", "#26303a"


def api(server, tok: str, method: str, path: str, body: dict | None = None) -> dict:
    """:func:`tests.support.server_api.api`, a 4xx/5xx told as an AssertionError with its body."""
    try:
        return server_api.api(server, tok, method, path, body)
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{method} {path}: HTTP {exc.code} {exc.read()[:500]!r}") from None
