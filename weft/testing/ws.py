"""Websocket test helpers (``channels.testing.WebsocketCommunicator`` on ``weft.asgi.application``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from django.db import connection
from django.test import Client

#: The Origin header a browser on the test server sends (``AllowedHostsOriginValidator`` checks it).
ORIGIN = (b"origin", b"http://127.0.0.1")


def session_headers(user) -> list[tuple[bytes, bytes]]:
    """``[ORIGIN, cookie]`` headers of a browser session signed in as ``user``."""
    client = Client()
    client.force_login(user)
    return [ORIGIN, (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]


def in_thread(fn: Callable[[], Any]) -> asyncio.Future:
    """Run ``fn`` as the in-process worker would: in a pool thread, closing its DB connection."""

    def run():
        try:
            return fn()
        finally:
            connection.close()

    return asyncio.get_running_loop().run_in_executor(None, run)
