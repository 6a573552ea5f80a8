"""The SNMP trap receiver inside ``manage.py serve`` (embedded deployment): on its own thread, a
linkDown trap raises the interface-down alarm; off when the port is 0; a port in use stops the
command with one clear line before anything else starts."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from django.core.cache import cache
from django.core.management import CommandError, call_command

from devices import mibs
from devices.models import Device, Interface
from devices.services.traps import STATS_KEY, BackgroundReceiver, TrapListenError
from events.models import Alarm
from lab.snmpsim import free_udp_port
from tests.support.traps import send
from weft.management.commands.serve import start_traps


@pytest.fixture
def switch(transactional_db):
    from fabric.models import Fabric

    dev = Device(fabric=Fabric.objects.create(name="roce"), name="leaf1", address="127.0.0.1", port=161)
    dev.set_secret("community", "trap-community")
    dev.save()
    Interface.objects.create(device=dev, if_index=7, name="swp7", admin_status="up", oper_status="up")
    return dev


def test_background_receiver_turns_a_link_down_trap_into_an_alarm(switch):
    cache.delete(STATS_KEY)
    port = free_udp_port()
    traps = start_traps(port)
    try:
        assert traps.running and traps.receiver.listen[1] == port
        asyncio.run(send(port, "trap-community", mibs.TRAP_LINK_DOWN, 7, 1, 2))
        # wait on the stats the receiver publishes after applying a trap, not on the database: the
        # test database is SQLite in memory (shared cache), where a read here while the receiver's
        # thread writes is a "table is locked" error (the embedded deployment's file is not)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and (cache.get(STATS_KEY) or {}).get("accepted") != 1:
            time.sleep(0.05)
        assert traps.receiver.stats()["accepted"] == 1
        alarm = Alarm.objects.open().filter(code="device.interface_down", object_key="leaf1/swp7").first()
        assert alarm is not None and alarm.severity == "critical"
    finally:
        traps.stop()
    assert not traps.running


def test_port_zero_is_off():
    assert start_traps(0) is None


def test_busy_port_fails_cleanly(db):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as busy:
        busy.bind(("0.0.0.0", 0))
        port = busy.getsockname()[1]
        with pytest.raises(
            TrapListenError, match=f"cannot listen for SNMP traps on 0.0.0.0:{port}: .*in use"
        ):
            BackgroundReceiver(("0.0.0.0", port)).start()
        # serve stops before daphne, the worker or the notice listeners start: one line, exit 1
        with pytest.raises(CommandError, match=f"0.0.0.0:{port}: .*Address already in use"):
            call_command("serve", "--port", "1", "--no-worker", "--no-notices", "--snmp-trap-port", str(port))
    with pytest.raises(CommandError, match="expected 1-65535"):
        call_command("serve", "--no-worker", "--no-notices", "--snmp-trap-port", "70000")


def _wait(cond, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def test_devices_added_or_identified_after_start_are_picked_up_by_the_rescan(transactional_db):
    """The re-scan re-configures the running receiver on the same socket (it used to bind a second
    socket on the same address and fail with "Address already in use", so nothing added after
    start was ever known): a v2c device created after start, and an SNMPv3 device whose engine ID
    became known after start (its first poll), both have their traps accepted."""
    from fabric.models import Fabric
    from tests.support.traps import send_v3

    fabric = Fabric.objects.create(name="roce")
    v3 = Device(fabric=fabric, name="core1", address="127.0.0.1", version="3", user="ops",
                auth_protocol="sha", priv_protocol="aes128", engine_id="")  # fmt: skip
    v3.set_secret("auth_key", "auth-pass-1")
    v3.set_secret("priv_key", "priv-pass-1")
    v3.save()
    Interface.objects.create(device=v3, if_index=7, name="Ethernet7", admin_status="up", oper_status="up")
    cache.delete(STATS_KEY)
    port = free_udp_port()
    traps = BackgroundReceiver(("127.0.0.1", port), rescan_s=0.2).start()
    receiver = traps.receiver
    try:
        assert receiver.configured == 1 and receiver._v2 == {} and receiver._v3 == {}
        dev = Device(fabric=fabric, name="leaf1", address="127.0.0.1", port=161)
        dev.set_secret("community", "msn4600")
        dev.save()
        Interface.objects.create(device=dev, if_index=7, name="swp7", admin_status="up", oper_status="up")
        Device.objects.filter(pk=v3.pk).update(engine_id="80001f8880aabbccdd0011")  # as its first poll does
        # two re-scans after the writes: the second one certainly read them
        seen = receiver.configured
        assert _wait(lambda: receiver.configured >= seen + 2), receiver.configured
        asyncio.run(send(port, "msn4600", mibs.TRAP_LINK_DOWN, 7, 1, 2))
        assert _wait(lambda: (cache.get(STATS_KEY) or {}).get("accepted") == 1), receiver.stats()
        asyncio.run(send_v3(port, "80001f8880aabbccdd0011", "ops", "auth-pass-1", "priv-pass-1", 7))
        assert _wait(lambda: (cache.get(STATS_KEY) or {}).get("accepted") == 2), receiver.stats()
        stats = receiver.stats()
        assert stats["dropped_unknown_community"] == 0 and stats["dropped_bad_v3"] == 0
        assert stats["dropped_unknown_source"] == 0
        assert traps.running and receiver.configured > seen + 2 - 1
    finally:
        traps.stop()
    assert not traps.running
    keys = set(Alarm.objects.open().filter(code="device.interface_down").values_list("object_key", flat=True))
    assert keys == {"leaf1/swp7", "core1/Ethernet7"}
