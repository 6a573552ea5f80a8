"""The MAD poller's loop (``madpoll.run``) against a fake umad: what its statistics count (pure, no DB)."""

from __future__ import annotations

import struct

from telemetry.collectors import counters as coll
from telemetry.collectors import madpoll


class FakeUmad:
    """Answers every GMP at once with status 0, except those ``dead(lid, attr, port)`` drops."""

    def __init__(self, dead) -> None:
        self.dead = dead
        self.queue: list[bytes] = []
        self.sent = 0

    def send(self, lid: int, mad: bytes) -> None:
        self.sent += 1
        attr = struct.unpack_from(">H", mad, 16)[0]
        port = mad[madpoll.DATA_OFFSET + 1]
        if not self.dead(lid, attr, port):
            reply = bytearray(mad)
            reply[3] = 0x81  # GetResp
            self.queue.append(bytes(reply))

    def recv(self, timeout_ms: int):
        return (0, self.queue.pop(0)) if self.queue else None


def test_timeouts_count_the_ports_left_unread_not_the_mads():
    requests = [("N", 5), ("Q", 5, 1, 1), ("Q", 5, 2, 1), ("N", 9), ("Q", 9, 1, 1), ("Q", 9, 3, 0)]

    # LID 9 is gone; at LID 5 port 2 only PortCountersExtended goes unanswered (read with 32-bit values)
    def dead(lid, attr, port):
        return lid == 9 or (lid == 5 and port == 2 and attr == madpoll.ATTR_PORT_COUNTERS_EXT)

    umad = FakeUmad(dead)
    answers, stats = madpoll.run(requests, umad, window=4, timeout_s=0.01, retries=1)
    reads, _caps = coll.decode_records(madpoll.records(requests, answers))
    stale = sorted(k for k, r in reads.items() if r.error == coll.STATUS_TEXT[madpoll.STATUS_TIMEOUT])
    assert stale == [(9, 1), (9, 3)]
    assert reads[(5, 2)].error == "" and reads[(5, 2)].extended is False
    assert stats["timeouts"] == 2 == len(stale)
    # the MADs: ClassPortInfo + PortCounters + PortCountersExtended + PortCounters at LID 9, and the
    # extended one at LID 5 port 2, each sent twice (one retry)
    assert stats["mad_timeouts"] == 5
    assert stats["sent"] == umad.sent == 9 + 5 and stats["answered"] == 9 - 5


def test_no_timeouts_on_a_healthy_fabric():
    requests = [("N", 5), ("Q", 5, 1, 1), ("Q", 5, 2, 0)]
    answers, stats = madpoll.run(requests, FakeUmad(lambda *_: False), window=2, timeout_s=0.01, retries=1)
    assert stats == {"sent": 4, "answered": 4, "timeouts": 0, "mad_timeouts": 0}
    assert [a[0] for a in answers] == [madpoll.STATUS_OK] * 4
