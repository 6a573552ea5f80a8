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


class CountersUmad(FakeUmad):
    """Answers PortCounters and PortCountersExtended from one set of port registers (64-bit), as a
    device with CapMask2 AddlPortCountersExtended does: PortCounters shows them clamped to its widths."""

    REGS = {  # IBTA names -> value; symbol errors beyond 16 bits, xmit wait beyond 32
        "sym": 70_000, "ler": 3, "ld": 1, "rcv": 7, "rphys": 2, "relay": 0, "disc": 5, "xcon": 1,
        "rcon": 300, "lli": 20, "ebo": 2, "vl15": 4, "xw": 5 << 32, "qp1": 0,
        "xd": 10**12, "rd": 2 * 10**12, "xp": 3 * 10**9, "rp": 5 * 10**9,
    }  # fmt: skip

    def __init__(self) -> None:
        super().__init__(lambda *_: False)

    def send(self, lid: int, mad: bytes) -> None:
        self.sent += 1
        attr = struct.unpack_from(">H", mad, 16)[0]
        reply = bytearray(mad)
        reply[3] = 0x81
        r, d = self.REGS, madpoll.DATA_OFFSET
        if attr == madpoll.ATTR_PORT_COUNTERS_EXT:
            struct.pack_into(">QQQQ", reply, d + 8, r["xd"], r["rd"], r["xp"], r["rp"])
            keys = (
                "sym",
                "ler",
                "ld",
                "rcv",
                "rphys",
                "relay",
                "disc",
                "xcon",
                "rcon",
                "lli",
                "ebo",
                "vl15",
                "xw",
                "qp1",
            )
            struct.pack_into(">14Q", reply, d + 72, *(r[k] for k in keys))
        else:
            c = lambda k, m: min(r[k], m)  # noqa: E731
            struct.pack_into(
                ">HBBHHHHBBBBHHIIIII", reply, d + 4,
                c("sym", 0xFFFF), c("ler", 0xFF), c("ld", 0xFF), c("rcv", 0xFFFF), c("rphys", 0xFFFF),
                c("relay", 0xFFFF), c("disc", 0xFFFF), c("xcon", 0xFF), c("rcon", 0xFF), 0,
                c("lli", 0xF) << 4 | c("ebo", 0xF), c("qp1", 0xFFFF), c("vl15", 0xFFFF),
                c("xd", 0xFFFFFFFF), c("rd", 0xFFFFFFFF), c("xp", 0xFFFFFFFF), c("rp", 0xFFFFFFFF),
                c("xw", 0xFFFFFFFF),
            )  # fmt: skip
        self.queue.append(bytes(reply))


def test_one_extended_mad_reads_what_two_mads_read_where_capmask2_says_so():
    """CapMask2 AddlPortCountersExtended (mode 2): one PortCountersExtended per port gives the values
    PortCounters + PortCountersExtended give (errors clamped to their PortCounters widths)."""
    two, one = CountersUmad(), CountersUmad()
    a, _ = madpoll.run([("Q", 5, 1, 1)], two, window=4, timeout_s=0.01, retries=0)
    b, _ = madpoll.run([("Q", 5, 1, 2)], one, window=4, timeout_s=0.01, retries=0)
    assert (two.sent, one.sent) == (2, 1)
    ra, _ = coll.decode_stream(madpoll.records([("Q", 5, 1, 1)], a))
    rb, _ = coll.decode_stream(madpoll.records([("Q", 5, 1, 2)], b))
    assert ra == rb
    (_lid, _port, ext, raw, err) = rb[0]
    values = dict(zip(madpoll.FIELDS, raw, strict=True))
    assert ext is True and err == ""
    assert values["xmit_data"] == 10**12 and values["rcv_pkts"] == 5 * 10**9
    assert (
        values["symbol_errors"] == 0xFFFF and values["xmit_wait"] == 0xFFFFFFFF
    )  # saturated, as PortCounters
    assert values["rcv_constraint_errors"] == 0xFF and values["local_link_integrity_errors"] == 0xF
    assert values["excessive_buffer_overrun_errors"] == 2 and values["xmit_discards"] == 5


def test_capabilities_read_capmask2_from_class_port_info():
    """ClassPortInfo: CapabilityMask bytes 2..3, CapabilityMask2 the top 27 bits of bytes 4..7."""
    cpi = bytearray(44)
    struct.pack_into(">HI", cpi, 2, 0x1200, (madpoll.CAP2_ADDL_PORT_COUNTERS_EXT << 5) | 0x12)
    caps = madpoll.capabilities(bytes(cpi))
    assert caps & 0xFFFF == 0x1200 and caps & madpoll.CAP_ADDL_EXT
    struct.pack_into(">HI", cpi, 2, 0x1200, 0x12)  # ibsim 0.10: CapMask 0x1200, CapMask2 0
    assert madpoll.capabilities(bytes(cpi)) == 0x1200
