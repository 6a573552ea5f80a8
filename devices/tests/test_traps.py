"""The trap receiver (real pysnmp on loopback): a linkDown trap from a managed device raises the
interface-down alarm and a linkUp clears it; an unknown community, or a known one from another
address, is dropped and counted, never an event."""

from __future__ import annotations

import asyncio

import pytest

from devices import mibs
from devices.models import Device, Interface
from devices.services.traps import TrapReceiver
from events.models import Alarm, Event
from lab.snmpsim import free_udp_port
from tests.support.traps import send, send_v3

pytestmark = pytest.mark.django_db


def _exchange(receiver: TrapReceiver, *sends, expect: int, timeout: float = 10.0) -> None:
    """Send the traps and run the receiver's loop until ``expect`` more notifications were handled
    (accepted or dropped) or ``timeout`` passed."""

    devices = list(Device.objects.all())

    async def go():
        receiver.configure(devices)
        before = sum(receiver.stats().values())
        for s in sends:
            await s
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while sum(receiver.stats().values()) < before + expect and loop.time() < end:
            await asyncio.sleep(0.02)
        receiver.close()

    asyncio.run(go())


@pytest.fixture
def switch(db):
    from fabric.models import Fabric

    dev = Device(fabric=Fabric.objects.create(name="roce"), name="leaf1", address="127.0.0.1", port=161)
    dev.set_secret("community", "trap-community")
    dev.save()
    Interface.objects.create(device=dev, if_index=7, name="swp7", admin_status="up", oper_status="up")
    return dev


def test_link_down_trap_raises_and_link_up_clears_the_alarm(switch):
    port = free_udp_port()
    receiver = TrapReceiver(("127.0.0.1", port))
    _exchange(receiver, send(port, "trap-community", mibs.TRAP_LINK_DOWN, 7, 1, 2), expect=1)
    assert receiver.stats()["accepted"] == 1
    [result] = receiver.drain()
    assert result == {"device": "leaf1", "trap": mibs.TRAP_LINK_DOWN, "events": ["device.interface_down"]}
    alarm = Alarm.objects.open().get(code="device.interface_down", object_key="leaf1/swp7")
    assert alarm.severity == "critical" and alarm.fabric_id == switch.fabric_id
    assert Interface.objects.get(device=switch, if_index=7).oper_status == "down"
    _exchange(receiver, send(port, "trap-community", mibs.TRAP_LINK_UP, 7, 1, 1), expect=1)
    assert [r["events"] for r in receiver.drain()] == [["device.interface_up"]]
    alarm.refresh_from_db()
    assert alarm.state == "cleared"


def test_unknown_community_and_unknown_source_are_dropped_and_counted(switch):
    port = free_udp_port()
    receiver = TrapReceiver(("127.0.0.1", port))
    _exchange(receiver, send(port, "guessed", mibs.TRAP_LINK_DOWN, 7, 1, 2), expect=1)
    stats = receiver.stats()
    assert stats["dropped_unknown_community"] == 1 and stats["accepted"] == 0
    # the right community from an address that is not the device's
    switch.address = "127.0.0.2"
    switch.save()
    _exchange(receiver, send(port, "trap-community", mibs.TRAP_LINK_DOWN, 7, 1, 2), expect=1)
    assert receiver.stats()["dropped_unknown_source"] == 1
    assert receiver.drain() == []
    assert not Event.objects.filter(code__startswith="device.").exists()
    assert not Alarm.objects.exists()


def test_snmpv3_trap_with_the_device_keys_raises_and_wrong_keys_are_dropped(eth_fabric_v3):
    dev = eth_fabric_v3
    port = free_udp_port()
    receiver = TrapReceiver(("127.0.0.1", port))
    _exchange(receiver, send_v3(port, dev.engine_id, "ops", "wrong-auth-key", "priv-pass-1", 7), expect=1)
    stats = receiver.stats()
    assert stats["dropped_bad_v3"] >= 1 and stats["accepted"] == 0
    _exchange(receiver, send_v3(port, dev.engine_id, "ops", "auth-pass-1", "priv-pass-1", 7), expect=1)
    assert receiver.stats()["accepted"] == 1
    assert [r["events"] for r in receiver.drain()] == [["device.interface_down"]]
    assert Alarm.objects.open().filter(code="device.interface_down", object_key="core1/Ethernet7").exists()


@pytest.fixture
def eth_fabric_v3(db):
    from fabric.models import Fabric

    dev = Device(fabric=Fabric.objects.create(name="roce3"), name="core1", address="127.0.0.1", version="3",
                 user="ops", auth_protocol="sha", priv_protocol="aes128", engine_id="80001f8880aabbccdd0011")  # fmt: skip
    dev.set_secret("auth_key", "auth-pass-1")
    dev.set_secret("priv_key", "priv-pass-1")
    dev.save()
    Interface.objects.create(device=dev, if_index=7, name="Ethernet7", admin_status="up", oper_status="up")
    return dev
