"""The heatmap websocket consumer on the real ASGI app (``weft.asgi.application``).

* Redis channel layer (``integration``: PostgreSQL + Redis from ``DATABASE_URL``/``REDIS_URL``):
  anonymous users get close code 4401, a viewer receives the delta of a sweep after it commits.
* In-memory layer (the embedded deployment): ``core.realtime.publish`` from a worker thread
  reaches a consumer running on the server's event loop.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from channels.layers import InMemoryChannelLayer, get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection, transaction
from django.test import override_settings

from accounts.roles import set_role
from telemetry.models import Sweep
from telemetry.signals import sweep_committed
from tests.support.telemetry import make_fabric, write_sweep
from tests.support.ws import HOST, ORIGIN, session_headers
from weft.asgi import application

pytestmark = pytest.mark.backend  # the channel layer and cache (Redis in production)


def make_viewer(name: str = "vic", active: bool = True):
    user = get_user_model().objects.create_user(name, password="pw-" + name, is_active=active)
    set_role(user, "viewer")
    return user


def commit_sweep(fabric, values, status: str = "ok", error: str = "") -> Sweep:
    """Write a sweep in one transaction and send ``sweep_committed`` on commit, as the sweep service does.

    Runs in an executor thread; closes that thread's connection so the test database can be dropped.
    """
    try:
        with transaction.atomic():
            sweep = write_sweep(fabric, values, status=status)
            if error:
                Sweep.objects.filter(pk=sweep.pk).update(error=error)
            transaction.on_commit(
                lambda: sweep_committed.send(sender=Sweep, fabric_id=fabric.pk, sweep_id=sweep.pk)
            )
        return sweep
    finally:
        if threading.current_thread() is not threading.main_thread():
            connection.close()


async def expect_close(comm: WebsocketCommunicator) -> int:
    connected, _ = await comm.connect(timeout=10)
    assert connected, "the handshake is accepted so that browsers see the close code"
    out = await comm.receive_output(timeout=10)
    assert out["type"] == "websocket.close"
    return out["code"]


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_redis_layer_anonymous_and_inactive_rejected():
    from channels_redis.core import RedisChannelLayer

    assert isinstance(get_channel_layer(), RedisChannelLayer)
    fabric = make_fabric()["fabric"]
    inactive = make_viewer("gone")
    headers = session_headers(inactive)
    type(inactive).objects.filter(pk=inactive.pk).update(is_active=False)

    async def run():
        anon = WebsocketCommunicator(application, f"/ws/heatmap/{fabric.pk}/", headers=[HOST, ORIGIN])
        assert await expect_close(anon) == 4401
        gone = WebsocketCommunicator(application, f"/ws/heatmap/{fabric.pk}/", headers=headers)
        assert await expect_close(gone) == 4401

    asyncio.run(run())


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_redis_layer_viewer_receives_delta_after_sweep_commit():
    cache.clear()
    built = make_fabric()
    fabric, ports = built["fabric"], built["ports"]
    hot = ports[("leaf2", 3)]
    headers = session_headers(make_viewer())

    async def run():
        missing = WebsocketCommunicator(application, "/ws/heatmap/987654/", headers=headers)
        assert await expect_close(missing) == 4404

        comm = WebsocketCommunicator(application, f"/ws/heatmap/{fabric.pk}/", headers=headers)
        connected, _ = await comm.connect(timeout=10)
        assert connected
        assert await comm.receive_nothing(timeout=0.3)  # nothing is sent before a sweep
        loop = asyncio.get_running_loop()
        first = await loop.run_in_executor(
            None, commit_sweep, fabric, {hot: {"utilisation": 0.25, "congestion": 0.5}}
        )
        msg = await comm.receive_json_from(timeout=10)
        assert msg["type"] == "heatmap.delta"
        payload = msg["payload"]
        assert payload["fabric"] == fabric.pk and payload["sweep"] == first.pk and payload["full"] is True
        cells = {c[0]: c for c in payload["cells"]}
        assert len(cells) == 16 and cells[hot.pk] == [hot.pk, hot.node_id, 3, 0.25, 0.5, 0, 0, 0]

        # The next sweep changes one cell: the delta carries only that cell.
        second = await loop.run_in_executor(None, commit_sweep, fabric, {hot: {"congestion": 0.9}})
        msg = await comm.receive_json_from(timeout=10)
        assert msg["payload"]["sweep"] == second.pk and "full" not in msg["payload"]
        assert msg["payload"]["cells"] == [[hot.pk, hot.node_id, 3, 0.25, 0.9, 0, 0, 0]]

        # Pings are answered; other fabrics' sweeps are not relayed.
        await comm.send_json_to({"type": "ping"})
        assert await comm.receive_json_from(timeout=5) == {"type": "pong"}
        await comm.disconnect()

    asyncio.run(run())


@pytest.mark.django_db(transaction=True)
def test_in_memory_layer_publish_from_worker_thread_reaches_consumer():
    cache.clear()
    with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}):
        assert isinstance(get_channel_layer(), InMemoryChannelLayer)
        built = make_fabric()
        fabric, ports = built["fabric"], built["ports"]
        other = make_fabric("other")["fabric"]
        port = ports[("spine2", 4)]
        headers = session_headers(make_viewer())
        threads: list[str] = []

        def worker() -> Sweep:
            # What the in-process worker does: a sweep commits in a pool thread, not on the loop.
            threads.append(threading.current_thread().name)
            commit_sweep(other, {})
            return commit_sweep(fabric, {port: {"utilisation": 0.75, "congestion": 0.125}})

        async def run():
            comm = WebsocketCommunicator(application, f"/ws/heatmap/{fabric.pk}/", headers=headers)
            connected, _ = await comm.connect(timeout=10)
            assert connected
            loop_thread = threading.current_thread().name
            sweep = await asyncio.get_running_loop().run_in_executor(None, worker)
            assert threads and threads[0] != loop_thread
            msg = await comm.receive_json_from(timeout=10)
            assert msg["type"] == "heatmap.delta"
            # Only this fabric's delta arrives (the other fabric's sweep went to its own group).
            assert msg["payload"]["fabric"] == fabric.pk and msg["payload"]["sweep"] == sweep.pk
            assert [port.pk, port.node_id, 4, 0.75, 0.125, 0, 0, 0] in msg["payload"]["cells"]
            assert await comm.receive_nothing(timeout=0.3)
            # A failed sweep: a stale notice with the reason, then the delta (the port now stale).
            failed = await asyncio.get_running_loop().run_in_executor(
                None, commit_sweep, fabric, {port: {"stale": True}}, "failed", "SM unreachable"
            )
            notice = await comm.receive_json_from(timeout=10)
            assert notice == {
                "type": "heatmap.stale",
                "payload": {
                    "fabric": fabric.pk,
                    "sweep": failed.pk,
                    "at": notice["payload"]["at"],
                    "reason": "SM unreachable",
                },
            }
            msg = await comm.receive_json_from(timeout=10)
            assert msg["payload"]["status"] == "failed"
            assert msg["payload"]["cells"] == [[port.pk, port.node_id, 4, 0.75, 0.125, 0, 1, 0]]
            await comm.disconnect()

        asyncio.run(run())


def test_in_memory_publish_after_the_server_loop_stopped_returns_at_once(caplog, monkeypatch):
    """After Ctrl-C the server's loop stops while the in-process worker may still finish a task:
    its publishes find nobody to send to (False) and log nothing; before, each waited for the
    timeout and logged a TimeoutError traceback after "Demo stopped"."""
    import logging

    from core import realtime

    loop = asyncio.new_event_loop()  # remembered by a consumer once, not running any more
    monkeypatch.setattr(realtime, "_server_loop", loop)
    try:
        with override_settings(
            CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
        ):
            assert isinstance(get_channel_layer(), InMemoryChannelLayer)
            with caplog.at_level(logging.WARNING, logger="core.realtime"):
                sent = realtime.publish("weft.heatmap.1", "heatmap.delta", {"fabric": 1}, timeout=0.2)
    finally:
        loop.close()
    assert sent is False
    assert [r.getMessage() for r in caplog.records if r.name == "core.realtime"] == []


@pytest.mark.integration
@pytest.mark.lab
@pytest.mark.django_db(transaction=True)
def test_redis_layer_delta_from_a_real_sweep_of_a_lab(lab_factory):
    """The whole path: ibsim counter -> poll_fabric (real MADs) -> commit -> producer -> Redis -> consumer."""
    from fabric.models import Fabric, Node, Port
    from fabric.services.discovery import discover
    from lab import netgen
    from telemetry.services.sweep import poll_fabric

    cache.clear()
    lab = lab_factory(netgen.fat_tree_2level(2, 2, 1))
    fabric = Fabric.objects.create(name="lab", tool_env=lab.tool_env)
    discover(fabric)
    spine = Node.objects.filter(fabric=fabric, description__contains="spine").order_by("description").first()
    port = Port.objects.get(node=spine, port_num=1)
    headers = session_headers(make_viewer())

    def sweep():
        try:
            return poll_fabric(fabric)
        finally:
            connection.close()

    async def run():
        comm = WebsocketCommunicator(application, f"/ws/heatmap/{fabric.pk}/", headers=headers)
        connected, _ = await comm.connect(timeout=10)
        assert connected
        loop = asyncio.get_running_loop()
        first = await loop.run_in_executor(None, sweep)
        msg = await comm.receive_json_from(timeout=15)
        assert msg["payload"]["sweep"] == first.pk and msg["payload"]["full"] is True
        # 1,000,000 PortXmitWait ticks between two sweeps: congestion > 0 on that cell only.
        await loop.run_in_executor(None, lab.perf_set, spine.node_guid, 1, "PortXmitWait", 1_000_000)
        second = await loop.run_in_executor(None, sweep)
        msg = await comm.receive_json_from(timeout=15)
        assert msg["payload"]["sweep"] == second.pk
        cells = {c[0]: c for c in msg["payload"]["cells"]}
        assert cells[port.pk][4] > 0 and cells[port.pk][6] == 0
        await comm.disconnect()

    asyncio.run(run())
