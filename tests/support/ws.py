"""Websocket test helpers (``channels.testing.WebsocketCommunicator`` on ``weft.asgi.application``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from django.db import connection
from django.test import Client

#: The Origin and Host headers a browser on the test server sends: the Origin must be the Host's own
#: scheme, host and port (``core.ws_origin``).
ORIGIN = (b"origin", b"http://127.0.0.1")
HOST = (b"host", b"127.0.0.1")


def session_headers(user) -> list[tuple[bytes, bytes]]:
    """``[HOST, ORIGIN, cookie]`` headers of a browser session signed in as ``user``."""
    client = Client()
    client.force_login(user)
    return [HOST, ORIGIN, (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]


def in_thread(fn: Callable[[], Any]) -> asyncio.Future:
    """Run ``fn`` as the in-process worker would: in a pool thread, closing its DB connection."""

    def run():
        try:
            return fn()
        finally:
            connection.close()

    return asyncio.get_running_loop().run_in_executor(None, run)
