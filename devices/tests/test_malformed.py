"""A responder answering garbage instead of SNMP (a wrong port, a broken agent): the poll says
"malformed answer from <addr>" rather than "no answer", and pysnmp's decode error never reaches
the log as an asyncio traceback; garbage sent to the trap receiver is counted as malformed."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading

import pytest

from devices.models import Device
from devices.services.poll import poll_devices
from devices.services.traps import TrapReceiver

pytestmark = pytest.mark.django_db

#: a datagram on which pyasn1 raises TypeError (ConstructedAsn1Type.clone()) inside pysnmp's
#: message dispatcher, which asyncio logged as "Exception in callback" with a traceback
TYPE_ERROR = b"\x61\x03\x02\x01\x00"


@pytest.fixture
def garbage_responder():
    """A UDP socket on loopback answering every datagram with garbage, alternately the
    TypeError payload and 48 random bytes; yields its port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.2)
    stop = threading.Event()
    answered = []

    def run():
        while not stop.is_set():
            try:
                _data, addr = sock.recvfrom(65535)
            except TimeoutError:
                continue
            sock.sendto(TYPE_ERROR if len(answered) % 2 == 0 else os.urandom(48), addr)
            answered.append(addr)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    yield sock.getsockname()[1], answered
    stop.set()
    t.join(5)
    sock.close()


def _no_asyncio_traceback(caplog) -> None:
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, [r.getMessage() for r in bad]
    assert "clone()" not in caplog.text and "Traceback" not in caplog.text


def test_garbage_answers_are_a_malformed_answer_not_a_timeout_or_a_traceback(garbage_responder, caplog):
    from fabric.models import Fabric

    port, answered = garbage_responder
    dev = Device(fabric=Fabric.objects.create(name="roce"), name="junk", address="127.0.0.1", port=port,
                 timeout_s=0.5, retries=1)  # fmt: skip
    dev.set_secret("community", "public")
    dev.save()
    with caplog.at_level(logging.DEBUG, logger="asyncio"):
        [summary] = poll_devices([dev])
    assert answered, "the responder was asked"
    assert summary["status"] == "failed", summary
    assert summary["error"].startswith(f"malformed answer from 127.0.0.1:{port}"), summary
    dev.refresh_from_db()
    assert dev.last_error.startswith(f"malformed answer from 127.0.0.1:{port}")
    assert "no answer" not in dev.last_error
    _no_asyncio_traceback(caplog)


def test_garbage_to_the_trap_receiver_is_counted_as_malformed(caplog):
    port = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    port.bind(("127.0.0.1", 0))
    listen = port.getsockname()
    port.close()
    receiver = TrapReceiver(listen)

    async def go():
        receiver.configure([])
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(TYPE_ERROR, listen)
            s.sendto(os.urandom(48), listen)
        loop = asyncio.get_running_loop()
        end = loop.time() + 10
        while receiver.stats()["dropped_malformed"] < 2 and loop.time() < end:
            await asyncio.sleep(0.02)
        receiver.configure([])  # a re-scan keeps the count
        assert receiver.stats()["dropped_malformed"] == 2
        receiver.close()

    with caplog.at_level(logging.DEBUG, logger="asyncio"):
        asyncio.run(go())
    assert receiver.stats()["dropped_malformed"] == 2 and receiver.stats()["accepted"] == 0
    _no_asyncio_traceback(caplog)
