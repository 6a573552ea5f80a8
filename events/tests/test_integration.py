"""PostgreSQL: concurrent evaluations of one fabric serialise on the fabric row lock, so the same
condition raised from several workers at once gives one alarm with every raise counted."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from events.engine import process_pending_events
from events.models import Alarm, Event
from events.services import EventSpec, record_events

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_concurrent_raises_make_one_alarm(topo):
    assert connection.vendor == "postgresql"
    key = topo.link_key(("spine01", 1), ("leaf01", 1))
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []

    def worker():
        try:
            record_events(
                topo.fabric, [EventSpec(code="link.down", message="down", object_type="link", object_key=key)]
            )
            barrier.wait(10)
            process_pending_events(topo.fabric.pk)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    alarm = Alarm.objects.get()
    assert alarm.count == 6 and alarm.state == "active"
    assert Event.objects.filter(evaluated=False).count() == 0


def test_redis_layer_alarm_reaches_consumer(topo):
    import asyncio

    from channels.layers import get_channel_layer
    from channels.testing import WebsocketCommunicator
    from channels_redis.core import RedisChannelLayer
    from django.contrib.auth import get_user_model

    from accounts.roles import set_role
    from tests.support.ws import in_thread, session_headers
    from weft.asgi import application

    assert isinstance(get_channel_layer(), RedisChannelLayer)
    viewer = get_user_model().objects.create_user("vic", password="x")
    set_role(viewer, "viewer")
    headers = session_headers(viewer)
    key = topo.link_key(("spine01", 2), ("leaf02", 1))

    def raise_it():
        record_events(
            topo.fabric,
            [
                EventSpec(
                    code="link.down",
                    message="down",
                    object_type="link",
                    object_key=key,
                    object_repr="spine01 [2] <-> leaf02 [1]",
                )
            ],
        )
        process_pending_events(topo.fabric.pk)

    async def run():
        comm = WebsocketCommunicator(application, f"/ws/alarms/{topo.fabric.pk}/", headers=headers)
        assert (await comm.connect(timeout=5))[0]
        assert (await comm.receive_json_from(timeout=5))["type"] == "hello"
        await in_thread(raise_it)
        msg = await comm.receive_json_from(timeout=10)
        assert msg["type"] == "alarm.changed" and msg["payload"]["action"] == "new"
        assert (
            msg["payload"]["alarm"]["object_key"] == key and msg["payload"]["alarm"]["severity"] == "critical"
        )
        await comm.disconnect()

    asyncio.run(run())
