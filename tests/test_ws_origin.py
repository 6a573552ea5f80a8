"""Websocket handshakes on the real ASGI app: the Origin must be the site's own (scheme, host *and
port*, as the Host header gives them) or a ``CSRF_TRUSTED_ORIGINS`` entry; any other port on the
same host name is refused (issue 9: another application on the host could read the live streams
through a signed-in browser). ``ws/alarms/<id>/`` of a missing fabric closes with 4404."""

from __future__ import annotations

import asyncio

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client, override_settings

from accounts.roles import set_role
from core.ws_origin import CLOSE_ORIGIN_REFUSED, parse_origin
from fabric.models import Fabric
from weft.asgi import application

MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
REFUSED = (False, CLOSE_ORIGIN_REFUSED)


@pytest.fixture
def cookie(transactional_db) -> tuple[bytes, bytes]:
    user = get_user_model().objects.create_user("vic", password="x")
    set_role(user, "viewer")
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


def handshake(path: str, headers: list[tuple[bytes, bytes]], **settings) -> tuple[bool, object, dict | None]:
    """Connect; returns ``(connected, code_or_subprotocol, first_output_after_accept)``."""

    async def run():
        comm = WebsocketCommunicator(application, path, headers=headers)
        connected, extra = await comm.connect(timeout=5)
        first = await comm.receive_output(timeout=5) if connected else None
        if connected:
            await comm.disconnect()
        return connected, extra, first

    with override_settings(CHANNEL_LAYERS=MEMORY, **settings):
        return asyncio.run(run())


def h(host: str | None, origin: str | None, cookie=None, **extra: str) -> list[tuple[bytes, bytes]]:
    headers = []
    if host is not None:
        headers.append((b"host", host.encode()))
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    headers += [(k.replace("_", "-").encode(), v.encode()) for k, v in extra.items()]
    return headers + ([cookie] if cookie else [])


@pytest.mark.parametrize(
    "host, origin",
    [
        ("127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("127.0.0.1", "http://127.0.0.1"),
        ("127.0.0.1", "http://127.0.0.1:80"),  # the default port, written out
        ("LOCALHOST:8000", "http://localhost:8000"),  # host names compare case-blind
        ("[::1]:8000", "http://[::1]:8000"),
    ],
)
def test_own_origin_is_accepted(cookie, host, origin):
    connected, _, first = handshake("/ws/alarms/", h(host, origin, cookie))
    assert connected and first["type"] == "websocket.send" and '"hello"' in first["text"]


@pytest.mark.parametrize(
    "host, origin",
    [
        ("127.0.0.1:8000", "http://127.0.0.1:9999"),  # another application on the same host
        ("127.0.0.1:8000", "http://127.0.0.1"),  # port 80 is another origin too
        ("127.0.0.1", "http://127.0.0.1:8080"),
        ("127.0.0.1:8000", "https://127.0.0.1:8000"),  # scheme differs (the socket is ws://)
        ("127.0.0.1:8000", "http://localhost:8000"),  # another host name for the same machine
        ("127.0.0.1:8000", "http://evil.example"),
        ("127.0.0.1:8000", "null"),
        ("127.0.0.1:8000", "file://"),
        ("127.0.0.1:8000", "http://127.0.0.1:99999"),  # not a port
        ("evil.example:8000", "http://evil.example:8000"),  # Host not in ALLOWED_HOSTS
        (None, "http://127.0.0.1"),  # no Host
        ("127.0.0.1:8000", None),  # no Origin
    ],
)
def test_other_origins_are_refused_before_the_consumer(cookie, host, origin):
    assert handshake("/ws/alarms/", h(host, origin, cookie))[:2] == REFUSED
    assert handshake("/ws/heatmap/1/", h(host, origin, cookie))[:2] == REFUSED


def test_tls_origin_through_the_proxy_header(cookie):
    headers = h("weft.example.org", "https://weft.example.org", cookie, x_forwarded_proto="https")
    proxied = {
        "ALLOWED_HOSTS": ["weft.example.org"],
        "SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https"),
    }
    assert handshake("/ws/alarms/", headers, **proxied)[0]
    # without the header the socket is plain ws://, so an https Origin is another origin
    assert (
        handshake("/ws/alarms/", h("weft.example.org", "https://weft.example.org", cookie), **proxied)[:2]
        == REFUSED
    )
    # and with it, the plain http origin is refused
    plain = h("weft.example.org", "http://weft.example.org", cookie, x_forwarded_proto="https")
    assert handshake("/ws/alarms/", plain, **proxied)[:2] == REFUSED


@pytest.mark.parametrize(
    "trusted, origin, ok",
    [
        (["https://weft.example.org"], "https://weft.example.org", True),
        (["https://weft.example.org"], "https://weft.example.org:443", True),
        (["https://weft.example.org"], "https://weft.example.org:8443", False),
        (["https://weft.example.org"], "http://weft.example.org", False),
        (["https://*.example.org"], "https://ops.example.org", True),
        (["https://*.example.org"], "https://ops.example.org:8443", False),
        (["https://*.example.org"], "https://example.com", False),
        (["https://*.example.org:8443"], "https://a.b.example.org:8443", True),
    ],
)
def test_csrf_trusted_origins_are_allowed_exactly(cookie, trusted, origin, ok):
    """Behind a proxy that rewrites Host (127.0.0.1:8000), the public origin is a trusted one."""
    result = handshake("/ws/alarms/", h("127.0.0.1:8000", origin, cookie), CSRF_TRUSTED_ORIGINS=trusted)
    assert result[0] is ok and (ok or result[1] == CLOSE_ORIGIN_REFUSED)


def test_alarms_of_a_missing_fabric_close_4404_like_the_heatmap(cookie):
    headers = h("127.0.0.1", "http://127.0.0.1", cookie)
    for path in ("/ws/alarms/987654/", "/ws/heatmap/987654/"):
        connected, _, first = handshake(path, headers)
        assert connected and first == {"type": "websocket.close", "code": 4404}, path
    fabric = Fabric.objects.create(name="lab")
    connected, _, first = handshake(f"/ws/alarms/{fabric.pk}/", headers)
    assert connected and f'"weft.alarms.{fabric.pk}"' in first["text"]


def test_anonymous_with_a_good_origin_gets_4401(transactional_db):
    connected, _, first = handshake("/ws/alarms/1/", h("127.0.0.1", "http://127.0.0.1"))
    assert connected and first == {"type": "websocket.close", "code": 4401}


@pytest.mark.parametrize(
    "value, parsed",
    [
        ("http://Example.ORG", ("http", "example.org", 80)),
        ("https://example.org:8443", ("https", "example.org", 8443)),
        ("https://[::1]", ("https", "::1", 443)),
        ("ws://example.org", None),
        ("http://", None),
        ("http://example.org:port", None),
        ("", None),
    ],
)
def test_parse_origin(value, parsed):
    assert parse_origin(value) == parsed
