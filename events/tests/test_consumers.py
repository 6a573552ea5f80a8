"""The alarm websocket on the real ASGI app (in-memory layer, as the embedded deployment):
alarm changes committed in a worker thread reach the page's consumer; anonymous users get 4401."""

from __future__ import annotations

import asyncio
import threading

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import override_settings

from accounts.roles import set_role
from events.engine import process_pending_events
from events.models import Alarm
from events.services import EventSpec, acknowledge, record_events
from tests.support.ws import HOST, ORIGIN, in_thread, session_headers
from weft.asgi import application

pytestmark = pytest.mark.backend  # the channel layer (Redis in production)

MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.mark.django_db(transaction=True)
def test_anonymous_closed_4401():
    async def run():
        comm = WebsocketCommunicator(application, "/ws/alarms/", headers=[HOST, ORIGIN])
        connected, _ = await comm.connect(timeout=5)
        assert connected
        out = await comm.receive_output(timeout=5)
        assert out == {"type": "websocket.close", "code": 4401}

    with override_settings(CHANNEL_LAYERS=MEMORY):
        asyncio.run(run())


@pytest.mark.django_db(transaction=True)
def test_new_changed_cleared_reach_the_page(topo):
    viewer = get_user_model().objects.create_user("vic", password="x")
    set_role(viewer, "viewer")
    operator = get_user_model().objects.create_user("olga", password="x")
    set_role(operator, "operator")
    key = topo.link_key(("spine01", 1), ("leaf01", 1))
    fabric_id = topo.fabric.pk

    def raise_link_down():
        record_events(
            topo.fabric,
            [
                EventSpec(
                    code="link.down",
                    message="down",
                    object_type="link",
                    object_key=key,
                    object_repr="spine01 [1] <-> leaf01 [1]",
                )
            ],
        )
        process_pending_events(fabric_id)

    def ack():
        acknowledge(Alarm.objects.get().pk, operator)

    def link_up():
        record_events(
            topo.fabric, [EventSpec(code="link.up", message="up", object_type="link", object_key=key)]
        )
        process_pending_events(fabric_id)

    headers = session_headers(viewer)

    async def run():
        everything = WebsocketCommunicator(application, "/ws/alarms/", headers=headers)
        this_fabric = WebsocketCommunicator(application, f"/ws/alarms/{fabric_id}/", headers=headers)
        for comm in (everything, this_fabric):
            assert (await comm.connect(timeout=5))[0]
            assert (await comm.receive_json_from(timeout=5))["type"] == "hello"
        assert threading.current_thread() is threading.main_thread()
        seen = []
        for step, action in [(raise_link_down, "new"), (ack, "changed"), (link_up, "cleared")]:
            await in_thread(step)
            for comm in (everything, this_fabric):
                msg = await comm.receive_json_from(timeout=10)
                assert msg["type"] == "alarm.changed" and msg["payload"]["action"] == action
                seen.append(msg["payload"]["alarm"]["state"])
                assert msg["payload"]["alarm"]["type"] == "link.down"
                assert msg["payload"]["alarm"]["object"] == "spine01 [1] <-> leaf01 [1]"
        assert seen == ["active", "active", "acknowledged", "acknowledged", "cleared", "cleared"]
        for comm in (everything, this_fabric):
            await comm.disconnect()

    with override_settings(CHANNEL_LAYERS=MEMORY):
        asyncio.run(run())


@pytest.mark.django_db(transaction=True)
def test_a_tenant_member_gets_no_push_of_another_tenants_alarm(topo):
    """``ws/alarms/`` relays an alarm carrying tenant A's data (its raising event's ``tenant_id``:
    a ``partition.drift`` of A's pool) to A's member and the fabric-wide Viewer, never to B's
    member (issue 22); the fabric-wide alarm after it reaches all three."""
    from pools.models import Tenant, TenantMembership

    t_a, t_b = Tenant.objects.create(name="t-a"), Tenant.objects.create(name="t-b")
    users = {}
    for name, tenant in (("only-a", t_a), ("only-b", t_b), ("staff", None)):
        users[name] = get_user_model().objects.create_user(name, password="x")
        set_role(users[name], "viewer")
        if tenant is not None:
            TenantMembership.objects.create(tenant=tenant, user=users[name], role="viewer")
    fabric_id = topo.fabric.pk
    headers = {name: session_headers(user) for name, user in users.items()}

    def raise_alarms():
        drift = EventSpec(code="partition.drift", message="partition pool_a drifts", object_type="partition",
                          object_key=f"{topo.fabric.name}:0x0a01:pool_a", tenant_id=t_a.pk)  # fmt: skip
        record_events(topo.fabric, [drift])
        process_pending_events(fabric_id)
        wide = EventSpec(code="sm.master_lost", message="no master", object_type="fabric", object_key="f")
        record_events(topo.fabric, [wide])
        process_pending_events(fabric_id)

    async def run():
        comms = {}
        for name in users:
            comms[name] = WebsocketCommunicator(application, "/ws/alarms/", headers=headers[name])
            assert (await comms[name].connect(timeout=5))[0]
            assert (await comms[name].receive_json_from(timeout=5))["type"] == "hello"
        await in_thread(raise_alarms)
        got = {}
        for name, comm in comms.items():
            got[name] = []
            while True:
                msg = await comm.receive_json_from(timeout=5)
                if msg["type"] == "alarm.changed":
                    got[name].append(msg["payload"]["alarm"]["type"])
                    if msg["payload"]["alarm"]["type"] == "sm.master_lost":
                        break
            await comm.disconnect()
        return got

    with override_settings(CHANNEL_LAYERS=MEMORY):
        got = asyncio.run(run())
    assert got == {
        "only-a": ["partition.drift", "sm.master_lost"],
        "only-b": ["sm.master_lost"],
        "staff": ["partition.drift", "sm.master_lost"],
    }
