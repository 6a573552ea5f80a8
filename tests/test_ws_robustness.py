"""Websockets against junk: a binary frame or text that is not JSON is ignored (the connection
stays up and still answers pings), a foreign Origin is refused before the consumer runs."""

from __future__ import annotations

import asyncio

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import override_settings

from accounts.roles import set_role
from fabric.services.ingest import import_topology_text
from tests.support.topologies import BASE
from tests.support.ws import HOST, ORIGIN, session_headers
from weft.asgi import application

pytestmark = pytest.mark.backend  # the channel layer (Redis in production)

MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


def _cookie(username: str) -> tuple[bytes, bytes]:
    user = get_user_model().objects.create_user(username, password="x")
    set_role(user, "viewer")
    *_, cookie = session_headers(user)
    return cookie


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("route", ["heatmap", "alarms"])
def test_junk_frames_are_ignored_and_pings_still_answered(route):
    fabric = import_topology_text("f", BASE, filename="base.topo").fabric
    cookie = _cookie("vic")
    path = f"/ws/{route}/{fabric.pk}/"

    async def run():
        comm = WebsocketCommunicator(application, path, headers=[HOST, ORIGIN, cookie])
        connected, _ = await comm.connect(timeout=5)
        assert connected
        if route == "alarms":
            assert (await comm.receive_json_from(timeout=5))["type"] == "hello"
        await comm.send_to(text_data="this is not json")
        await comm.send_to(bytes_data=b"\x00\x01\x02")
        await comm.send_to(text_data="[1, 2]")
        await comm.send_json_to({"type": "ping"})
        assert (await comm.receive_json_from(timeout=5))["type"] == "pong"
        await comm.disconnect()

    with override_settings(CHANNEL_LAYERS=MEMORY):
        asyncio.run(run())


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/ws/heatmap/1/", "/ws/alarms/"])
def test_foreign_origin_or_none_is_refused(path):
    cookie = _cookie("eve")

    async def run():
        for headers in ([(b"origin", b"http://evil.example"), cookie], [cookie]):
            comm = WebsocketCommunicator(application, path, headers=headers)
            connected, _ = await comm.connect(timeout=5)
            assert not connected

    with override_settings(CHANNEL_LAYERS=MEMORY):
        asyncio.run(run())


def _on_a_new_loop(coro):
    """Run ``coro`` to its end on a new event loop in a thread of its own (this thread may have a
    loop running: Playwright's sync API, left by a browser test in the same session)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result(timeout=30)


def test_a_push_to_a_client_gone_meanwhile_is_dropped_quietly(caplog):
    """A tab closed while a group message was on its way: daphne's protocol raises autobahn's
    ``Disconnected`` from ``send``; the consumer drops that push (no ERROR, no traceback, the
    consumer does not die with it), while any other failure of ``send`` still raises."""
    from autobahn.exception import Disconnected

    from core.realtime import ListenOnlyJsonConsumer

    consumer = ListenOnlyJsonConsumer()
    consumer.channel_name = "specific.test!gone"
    sent = []

    async def gone(message):
        sent.append(message)
        raise Disconnected("Attempt to send on a closed protocol")

    async def broken(message):
        raise ValueError("not a closed protocol")

    consumer.base_send = consumer.guarded(gone)
    with caplog.at_level("DEBUG", logger="core.realtime"):
        _on_a_new_loop(consumer.send_json({"type": "summary.changed"}))
    assert [m["type"] for m in sent] == ["websocket.send"]
    assert [r.levelname for r in caplog.records if r.name == "core.realtime"] == ["DEBUG"]
    consumer.base_send = consumer.guarded(broken)
    with pytest.raises(ValueError, match="not a closed protocol"):
        _on_a_new_loop(consumer.send_json({"type": "summary.changed"}))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "path",
    ["/ws/nope/", "/ws/alarms/abc/", "/ws/heatmap/abc/", "/ws/alarms", "/ws/alarms/99999999999999999999999/"],
)
def test_a_path_no_route_serves_is_closed_with_4404_not_an_error(path, caplog):
    """Channels' router raised "No route found" (HTTP 500 and an ERROR traceback from daphne)."""
    cookie = _cookie("nora")

    async def run():
        comm = WebsocketCommunicator(application, path, headers=[HOST, ORIGIN, cookie])
        connected, _ = await comm.connect(timeout=5)
        assert connected
        closed = await comm.receive_output(timeout=5)
        await comm.wait()
        return closed

    closed = asyncio.run(run())
    assert closed == {"type": "websocket.close", "code": 4404}
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


@pytest.mark.django_db(transaction=True)
def test_a_redis_outage_is_one_log_line_then_a_count_not_a_traceback_per_websocket(caplog):
    """Redis down (nothing listens on the layer's port): every websocket is closed with 1011 and
    the log gets one WARNING line for the outage, without a traceback; later attempts are only
    counted (``core.repeatlog``). Before: each attempt raised out of the consumer, which daphne
    logs as an ERROR with a traceback."""
    import logging
    import socket

    from core import realtime

    with socket.socket() as probe:  # a port nothing listens on: connection refused at once
        probe.bind(("127.0.0.1", 0))
        down = f"redis://127.0.0.1:{probe.getsockname()[1]}/0"
    layer = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [down]}}}
    fabric = import_topology_text("f", BASE, filename="base.topo").fabric
    cookie = _cookie("rita")
    realtime.layer_log.flush()
    caplog.clear()
    caplog.set_level(logging.WARNING)

    async def attempt(path: str):
        comm = WebsocketCommunicator(application, path, headers=[HOST, ORIGIN, cookie])
        await comm.connect(timeout=5)
        closed = await comm.receive_output(timeout=5)
        while closed["type"] != "websocket.close":
            closed = await comm.receive_output(timeout=5)
        await comm.wait(timeout=5)
        return closed.get("code")

    async def run():
        return [await attempt(path) for path in [f"/ws/heatmap/{fabric.pk}/", "/ws/alarms/"] * 3]

    with override_settings(CHANNEL_LAYERS=layer):
        codes = _on_a_new_loop(run())
    assert codes == [realtime.CLOSE_LAYER_DOWN] * 6
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert lines[0].getMessage().startswith("websocket closed: the channel layer cannot be reached: ")
    assert lines[0].exc_info is None
    assert realtime.layer_log.flush() == 1  # the five repeats, as one count line
    assert "(repeated 5 times" in caplog.records[-1].getMessage()
