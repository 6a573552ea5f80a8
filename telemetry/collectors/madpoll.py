"""Pipelined PerfMgt MAD poller: many PortCounters GETs in flight through libibumad (ctypes).

Run as a child process with the fabric's tool environment (so ``LD_PRELOAD=libumad2sim.so``
points it at a lab, exactly as for the diags)::

    python -m telemetry.collectors.madpoll [-C ca] [-P port] [--window N] [--timeout S] < requests

Input lines: ``N lid`` (query ClassPortInfo of the node reachable at ``lid``) and ``Q lid port ext``
(query PortCounters of ``port`` at ``lid``; with ``ext`` = 1 also PortCountersExtended). Output
lines, one per request: ``N lid capmask`` / ``N lid !reason`` and
``Q lid port v0 v1 ... v15`` (values in :data:`FIELDS` order, ``-`` for not read) or
``Q lid port !reason``. A last line ``# sent=.. answered=.. timeouts=.. mad_timeouts=.. elapsed_s=..``
(``timeouts`` ports left unread by a timeout, ``mad_timeouts`` MADs that timed out, see :func:`run`).

Why: each ``perfquery`` process costs ~10 ms of start-up and does one MAD round trip at a time;
``ibqueryerrors`` rediscovers the whole fabric with SMPs before it reads any counter. Here the
stored topology gives LIDs and port numbers, so one process keeps ``window`` GMPs outstanding
(bounded parallelism, like the kernel's per-agent send queue) and decodes replies as they come.

MAD layouts (IBTA Vol 1, 13.4.2 common MAD header; 16.1.3.5 PortCounters, Table 247;
16.1.4.11 PortCountersExtended; 16.1.2 ClassPortInfo CapabilityMask): see :func:`decode_port_counters`.
No Django import: this module is pure apart from ctypes (it imports only ``telemetry.semantics`` and
the libibumad binding ``fabric.collectors.umad``, shared with the SM-notice listener).
"""

from __future__ import annotations

import argparse
import gc
import os
import select
import struct
import sys
import time

from fabric.collectors.umad import Umad
from telemetry.semantics import ALL_COUNTERS

PERF_CLASS = 0x04
METHOD_GET = 0x01
METHOD_SET = 0x02
ATTR_CLASS_PORT_INFO = 0x0001
ATTR_PORT_COUNTERS = 0x0012
ATTR_PORT_COUNTERS_EXT = 0x001D
QKEY = 0x80010000
MAD_SIZE = 256
DATA_OFFSET = 64  # GMP: 24-byte common header + 40 reserved bytes, then 192 bytes of data

# ClassPortInfo CapabilityMask bits of the PerfMgt class (IBTA 16.1.2, rdma-core mad.h)
CAP_ALL_PORT_SELECT = 1 << 8
CAP_EXT_WIDTH = 1 << 9
CAP_EXT_WIDTH_NOIETF = 1 << 10
CAP_XMIT_WAIT = 1 << 12
#: ClassPortInfo CapabilityMask2 (bytes 4..7, top 27 bits) IsAddlPortCountersExtendedSupported
#: (IBTA 16.1.2, rdma-core ``IB_PM_IS_ADDL_PORT_CTRS_EXT_SUP``): PortCountersExtended also carries
#: the error counters and PortXmitWait (64-bit), so one MAD reads every counter of a port. Weft
#: keeps the node's capabilities as one int: CapabilityMask | CapabilityMask2 << 16
#: (:func:`capabilities`).
CAP2_ADDL_PORT_COUNTERS_EXT = 1 << 1
CAP_ADDL_EXT = CAP2_ADDL_PORT_COUNTERS_EXT << 16

FIELDS: tuple[str, ...] = ALL_COUNTERS
"""Output order of a ``Q`` line: the 16 raw counters as defined by ``telemetry.semantics``."""

#: Per-MAD timeout (seconds) when ``--timeout`` is not given; the default of the
#: ``WEFT_MAD_TIMEOUT_S`` setting too (why 1.0 s: see ``weft/settings.py``).
DEFAULT_TIMEOUT_S = 1.0


def decode_port_counters(data: bytes) -> dict[str, int]:
    """Decode the 32-bit PortCounters attribute (IBTA Vol 1, Table 247), big-endian.

    ``data`` is the MAD data area (from byte 64 of the MAD). Data counters are in 4-byte words.
    Byte 19 packs LocalLinkIntegrityErrors (high nibble) and ExcessiveBufferOverrunErrors (low).
    """
    (sym, ler, ld, rcv, rphys, _relay, disc, xcon, rcon, _cs2, lli_ebo, _qp1, vl15, xd, rd, xp, rp, xw) = (
        struct.unpack_from(">HBBHHHHBBBBHHIIIII", data, 4)
    )
    return {
        "symbol_errors": sym,
        "link_error_recovery": ler,
        "link_downed": ld,
        "rcv_errors": rcv,
        "rcv_remote_phys_errors": rphys,
        "xmit_discards": disc,
        "xmit_constraint_errors": xcon,
        "rcv_constraint_errors": rcon,
        "local_link_integrity_errors": lli_ebo >> 4,
        "excessive_buffer_overrun_errors": lli_ebo & 0x0F,
        "vl15_dropped": vl15,
        "xmit_data": xd,
        "rcv_data": rd,
        "xmit_pkts": xp,
        "rcv_pkts": rp,
        "xmit_wait": xw,
    }


def decode_port_counters_ext(data: bytes) -> dict[str, int]:
    """Decode PortCountersExtended (IBTA Vol 1, 16.1.4.11): 64-bit data (4-byte words) and packets."""
    xd, rd, xp, rp = struct.unpack_from(">QQQQ", data, 8)
    return {"xmit_data": xd, "rcv_data": rd, "xmit_pkts": xp, "rcv_pkts": rp}


#: PortCountersExtended with AddlPortCountersExtended (rdma-core ``IB_PC_EXT_ERR_*``, byte offsets in
#: the data area): SymbolErrorCounter at 72 ... QP1Dropped at 176, each 64-bit big-endian.
_EXT_ERRORS = struct.Struct(">14Q")
_EXT_ERRORS_OFFSET = 72


def capabilities(class_port_info: bytes) -> int:
    """CapabilityMask | CapabilityMask2 << 16 from a PerfMgt ClassPortInfo data area (IBTA 16.1.2:
    CapabilityMask bytes 2..3, CapabilityMask2 the top 27 bits of bytes 4..7)."""
    cap, word = struct.unpack_from(">HI", class_port_info, 2)
    return cap | (word >> 5) << 16


def pc_from_ext(ext: bytes) -> bytes:
    """The 44-byte PortCounters data area (Table 247 layout, from byte 0 of the data) built from a
    PortCountersExtended that carries the error counters (CapMask2 AddlPortCountersExtended).

    Each 64-bit counter is clamped to its PortCounters width, which is what the 32-bit attribute
    shows for the same register (IBTA 16.1.3: PortCounters stop at their maximum): the values are
    exactly those of a PortCounters read, so the sweep's semantics do not depend on the MAD count.
    The 32-bit data/packet words are clamped too (the extended ones are used, ``ext`` flag set).
    """
    (sym, ler, ld, rcv, rphys, relay, disc, xcon, rcon, lli, ebo, vl15, xw, qp1) = _EXT_ERRORS.unpack_from(
        ext, _EXT_ERRORS_OFFSET
    )
    xd, rd, xp, rp = struct.unpack_from(">QQQQ", ext, 8)
    m32 = 0xFFFFFFFF
    return struct.pack(
        ">4xHBBHHHHBBBBHHIIIII",
        min(sym, 0xFFFF),
        min(ler, 0xFF),
        min(ld, 0xFF),
        min(rcv, 0xFFFF),
        min(rphys, 0xFFFF),
        min(relay, 0xFFFF),
        min(disc, 0xFFFF),
        min(xcon, 0xFF),
        min(rcon, 0xFF),
        0,
        min(lli, 0xF) << 4 | min(ebo, 0xF),
        min(qp1, 0xFFFF),
        min(vl15, 0xFFFF),
        min(xd, m32),
        min(rd, m32),
        min(xp, m32),
        min(rp, m32),
        min(xw, m32),
    )


def build_gmp(
    tid: int, attr_id: int, port_select: int, method: int = METHOD_GET, counter_select: int = 0
) -> bytes:
    """Build a 256-byte PerfMgt GMP (common MAD header, IBTA 13.4.2) with PortSelect set.

    For PortCounters a SET with ``counter_select`` (bit mask, 0xFFFF = all) clears counters;
    ``CounterSelect2`` bit 0 selects PortXmitWait too.
    """
    buf = bytearray(MAD_SIZE)
    # base version 1, class, class version 1, method; status 0; class specific 0; TID; attr id; attr mod
    struct.pack_into(">BBBBHHQHHI", buf, 0, 1, PERF_CLASS, 1, method, 0, 0, tid, attr_id, 0, 0)
    if attr_id != ATTR_CLASS_PORT_INFO:
        struct.pack_into(">BBH", buf, DATA_OFFSET, 0, port_select, counter_select)
        if method == METHOD_SET and attr_id == ATTR_PORT_COUNTERS:
            buf[DATA_OFFSET + 18] = 0xFF  # CounterSelect2: PortXmitWait and the rest
    return bytes(buf)


# A binary result record: lid, port, kind (0 port, 1 class port info, 2 reset), status, ext flag,
# then the PortCounters data (44 bytes) and PortCountersExtended data (40 bytes) as received.
RECORD = struct.Struct(">HBBBB44s40s")
STATUS_OK, STATUS_TIMEOUT, STATUS_MAD_ERROR, STATUS_NO_EXT = 0, 1, 2, 3


def run(
    requests: list[tuple],
    umad: Umad,
    window: int,
    timeout_s: float,
    retries: int,
    tid_base: int = 0,
    emit=None,
    emit_every: int = 1024,
) -> tuple[list, dict]:
    """Send ``requests`` with at most ``window`` outstanding and collect the answers.

    ``requests``: ``("N", lid)`` or ``("Q", lid, port, ext)`` or ``("R", lid, port)`` (reset).
    A MAD unanswered after ``timeout_s`` is resent up to ``retries`` times, then reported as a
    timeout. ``tid_base`` offsets the transaction ids (a serving poller gives every batch its own
    range, so a late answer to an earlier batch is never taken for this one). Returns ``(answers, stats)``: ``answers[seq]`` = ``(status, mad bytes or None)`` per MAD
    in :func:`plan` order, ``stats`` = ``{"sent", "answered", "timeouts", "mad_timeouts"}``:
    ``timeouts`` counts the ports (``Q``/``R`` requests) whose PortCounters MAD timed out, i.e. the
    ports the sweep marks stale for a timeout (a port whose only PortCountersExtended timed out is
    read with 32-bit values; a ClassPortInfo timeout leaves no port unread); ``mad_timeouts``
    counts every MAD that timed out after its retries or that the kernel reported timed out.

    ``emit(start, end, answers, seq)`` (``seq``: the first MAD of request ``start``), when given, is called as soon as requests ``start..end-1`` (in
    request order, at least ``emit_every`` of them) all have their answers, and once more for the
    rest at the end: a serving poller streams their records while later MADs are still in flight.
    """
    mads = _plan_cache[1] if _plan_cache[0] is requests else plan(requests)
    _plan_cache[:] = [requests, mads]
    # request index after the last fully answered one, tracked over the MADs in plan order
    done_mad = emitted = 0
    owner = [m[0] for m in mads]
    first_seq = [0] * len(requests)
    if emit is not None:
        for seq in range(len(mads) - 1, -1, -1):
            first_seq[owner[seq]] = seq
    templates = {  # one GMP per (attribute, method), built once: not one per MAD
        (attr, method): bytearray(build_gmp(0, attr, 0, method, 0xFFFF if method == METHOD_SET else 0))
        for attr, method in {(m[2], m[4]) for m in mads}
    }
    answers: list = [None] * len(mads)
    pending: dict[int, tuple[float, int]] = {}  # seq -> (deadline, tries); insertion order = age
    nxt = sent = answered = mad_timeouts = 0
    total = len(mads)
    send = umad.send
    recv = umad.recv
    mono = time.monotonic

    pack_tid, unpack_tid, unpack_status = _TID.pack_into, _TID.unpack_from, _MAD_STATUS.unpack_from
    recv_ms = int(timeout_s * 1000)

    def _send(seq: int) -> None:
        _, lid, attr, port, method = mads[seq]
        mad = templates[attr, method]
        pack_tid(mad, 8, tid_base + seq + 1)
        mad[DATA_OFFSET + 1] = port
        send(lid, mad)

    while nxt < total or pending:
        if nxt < total and len(pending) < window:
            deadline = mono() + timeout_s
            while nxt < total and len(pending) < window:
                _send(nxt)
                pending[nxt] = (deadline, 0)
                nxt += 1
                sent += 1
        got = recv(recv_ms)
        if got is not None:
            ustatus, mad = got
            seq = (unpack_tid(mad, 8)[0] & 0xFFFFFFFF) - tid_base - 1
            if pending.pop(seq, None) is not None:
                answered += 1
                mstatus = unpack_status(mad, 4)[0]
                if ustatus:
                    answers[seq] = (STATUS_TIMEOUT, None)
                    mad_timeouts += 1
                elif mstatus:
                    answers[seq] = (STATUS_MAD_ERROR, mstatus)
                else:
                    answers[seq] = (STATUS_OK, mad)
                if emit is not None and not answered & 63:
                    while done_mad < total and answers[done_mad] is not None:
                        done_mad += 1
                    upto = owner[done_mad] if done_mad < total else len(requests)
                    if upto - emitted >= emit_every:
                        emit(emitted, upto, answers, first_seq[emitted])
                        emitted = upto
            if pending and (answered & 255) and got is not None:
                continue
        now = mono()
        while pending:
            seq, (deadline, tries) = next(iter(pending.items()))
            if deadline > now:
                break
            del pending[seq]
            if tries < retries:
                _send(seq)
                pending[seq] = (now + timeout_s, tries + 1)
                sent += 1
            else:
                answers[seq] = (STATUS_TIMEOUT, None)
                mad_timeouts += 1
    if emit is not None and emitted < len(requests):
        emit(emitted, len(requests), answers, first_seq[emitted])
    ports_timed_out = 0
    first_of: set[int] = set()
    for seq, (i, *_rest) in enumerate(mads):
        if i in first_of:
            continue
        first_of.add(i)  # a request's first MAD: ClassPortInfo, or the PortCounters that decides a port
        if requests[i][0] != "N" and answers[seq][0] == STATUS_TIMEOUT:
            ports_timed_out += 1
    return answers, {
        "sent": sent,
        "answered": answered,
        "timeouts": ports_timed_out,
        "mad_timeouts": mad_timeouts,
    }


_TID = struct.Struct(">Q")  # TransactionID, MAD bytes 8..15
_MAD_STATUS = struct.Struct(">H")  # Status, MAD bytes 4..5


#: ``[requests, plan(requests)]`` of the last :func:`run` (a serving poller's ``AGAIN`` runs the same
#: list object again: its plan is not rebuilt)
_plan_cache: list = [None, None]


def plan(requests: list[tuple]) -> list[tuple[int, int, int, int, int]]:
    """The MADs for ``requests``: ``(request index, lid, attribute id, port, method)`` each."""
    mads: list[tuple[int, int, int, int, int]] = []
    for i, req in enumerate(requests):
        if req[0] == "N":
            mads.append((i, req[1], ATTR_CLASS_PORT_INFO, 0, METHOD_GET))
        elif req[0] == "R":
            mads.append((i, req[1], ATTR_PORT_COUNTERS, req[2], METHOD_SET))
            if req[3] if len(req) > 3 else 1:
                mads.append((i, req[1], ATTR_PORT_COUNTERS_EXT, req[2], METHOD_SET))
        elif req[3] == 2:  # AddlPortCountersExtended: PortCountersExtended carries every counter
            mads.append((i, req[1], ATTR_PORT_COUNTERS_EXT, req[2], METHOD_GET))
        else:
            mads.append((i, req[1], ATTR_PORT_COUNTERS, req[2], METHOD_GET))
            if req[3]:
                mads.append((i, req[1], ATTR_PORT_COUNTERS_EXT, req[2], METHOD_GET))
    return mads


def records(
    requests: list[tuple], answers: list, start: int = 0, end: int | None = None, seq: int = 0
) -> bytes:
    """Pack one :data:`RECORD` per request from the MAD answers (see :func:`decode_record`);
    ``requests[start:end]`` only when given, whose first MAD is ``answers[seq]``."""
    out = bytearray()
    pack = RECORD.pack
    empty44, empty40 = bytes(44), bytes(40)
    for req in requests[start:end]:
        kind = req[0]
        first = answers[seq]
        seq += 1
        status = first[0] if first is not None else STATUS_TIMEOUT
        if kind == "N":
            data = first[1][DATA_OFFSET : DATA_OFFSET + 44] if status == STATUS_OK else empty44
            out += pack(req[1], 0, 1, status, 0, data, empty40)
            continue
        if kind == "Q" and req[3] == 2:  # one PortCountersExtended with the error counters
            if status == STATUS_OK:
                ext = first[1][DATA_OFFSET : DATA_OFFSET + 192]
                out += pack(req[1], req[2], 0, status, 1, pc_from_ext(ext), ext[:40])
            else:
                out += pack(req[1], req[2], 0, status, 0, empty44, empty40)
            continue
        second = None
        if (kind == "Q" and req[3]) or (kind == "R" and (req[3] if len(req) > 3 else 1)):
            second = answers[seq]
            seq += 1
        pc = first[1][DATA_OFFSET : DATA_OFFSET + 44] if status == STATUS_OK else empty44
        ext_flag = 0
        ext = empty40
        if second is not None and second[0] == STATUS_OK:
            ext_flag = 1
            ext = second[1][DATA_OFFSET : DATA_OFFSET + 40]
        elif second is not None and status == STATUS_OK:
            ext_flag = 0  # extended asked but refused/timed out: 32-bit values only
        out += pack(req[1], req[2], 0 if kind == "Q" else 2, status, ext_flag, pc, ext)
    return bytes(out)


_PC = struct.Struct(">4xHBBHHHHBBBBHHIIIII")
_EXT = struct.Struct(">8xQQQQ")


def decode_record(rec: bytes) -> dict:
    """Decode one :data:`RECORD` into ``{"lid", "port", "kind", "status", "extended", "values"}``.

    ``values`` maps :data:`FIELDS` to ints (empty when the port was not read); for a ClassPortInfo
    record ``values`` = ``{"capmask": int}``.
    """
    lid, port, kind, status, ext, pc, extd = RECORD.unpack(rec)
    out = {"lid": lid, "port": port, "kind": kind, "status": status, "extended": bool(ext), "values": {}}
    if status != STATUS_OK:
        return out
    if kind == 1:
        out["values"] = {"capmask": struct.unpack_from(">H", pc, 2)[0]}
        return out
    out["values"] = decode_port_counters(pc)
    if ext:
        out["values"].update(decode_port_counters_ext(extd))
    return out


def parse_requests(lines) -> list[tuple]:
    """Parse request lines (see the module docstring). Raises ValueError with the line number."""
    reqs: list[tuple] = []
    for n, line in enumerate(lines, 1):
        parts = line.split()
        if not parts:
            continue
        try:
            if parts[0] == "N" and len(parts) == 2:
                reqs.append(("N", int(parts[1])))
            elif parts[0] == "Q" and len(parts) == 4 and parts[3] in ("0", "1", "2"):
                reqs.append(("Q", int(parts[1]), int(parts[2]), int(parts[3])))
            elif parts[0] == "R" and len(parts) == 3:
                reqs.append(("R", int(parts[1]), int(parts[2])))
            else:
                raise ValueError
        except ValueError:
            raise ValueError(f"stdin line {n}: bad request {line.strip()!r}")
    return reqs


#: Header of a streamed frame (``STREAM``/``AGAIN``): kind (``R`` records, ``S`` stats, the last),
#: epoch seconds when the frame was made (the poller's clock: when its last answer came), length.
FRAME = struct.Struct(">cdI")


class _Out:
    """Non-blocking stdout with a buffer: the poller keeps its MADs flowing while the reader (the
    sweep, busy storing the previous chunk) has not drained the pipe yet; :meth:`drain` blocks."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()
        os.set_blocking(fd, False)

    def write(self, data: bytes) -> None:
        self.buf += data
        self._try()

    def _try(self) -> None:
        while self.buf:
            try:
                n = os.write(self.fd, self.buf)
            except BlockingIOError:
                return
            del self.buf[:n]

    def drain(self) -> None:
        while self.buf:
            select.select([], [self.fd], [])
            self._try()


def serve(umad: Umad, window: int, timeout_s: float, retries: int) -> int:
    """Serve batches on stdin until EOF (``--serve``). Saves the process start-up and umad/ibsim
    attach (~0.2 s) per sweep.

    * ``BATCH n`` then ``n`` request lines: answer ``>II`` (record bytes, stats bytes), the
      records, and the stats text.
    * ``STREAM n`` then ``n`` request lines, or ``AGAIN`` (the previous request list again, a
      sweep of the same topology): answer :data:`FRAME` frames, ``R`` with the records of the
      requests answered so far (in request order, every ~1,024 requests, while the later MADs are
      in flight) and a last ``S`` with the stats text.
    """
    out = _Out(sys.stdout.fileno())
    batch = 0
    reqs: list[tuple] | None = None
    while True:
        header = sys.stdin.buffer.readline()
        if not header:
            return 0
        parts = header.split()
        kind = parts[0] if parts else b""
        if not ((kind in (b"BATCH", b"STREAM") and len(parts) == 2) or (kind == b"AGAIN" and reqs)):
            print(f"madpoll: bad batch header {header[:60]!r}", file=sys.stderr)
            return 2
        if kind != b"AGAIN":
            lines = [sys.stdin.buffer.readline().decode() for _ in range(int(parts[1]))]
        batch = batch % 255 + 1
        t0 = time.monotonic()
        if kind != b"AGAIN":
            try:
                reqs = parse_requests(lines)
            except ValueError as exc:
                print(f"madpoll: {exc}", file=sys.stderr)
                return 2
        emit = None
        if kind != b"BATCH":

            def emit(start: int, end: int, answers: list, seq: int, reqs=reqs) -> None:
                blob = records(reqs, answers, start, end, seq)
                out.write(FRAME.pack(b"R", time.time(), len(blob)) + blob)

        answers, stats = run(reqs, umad, window, timeout_s, retries, tid_base=batch << 24, emit=emit)
        text = (
            f"madpoll: sent={stats['sent']} answered={stats['answered']} timeouts={stats['timeouts']} "
            f"mad_timeouts={stats['mad_timeouts']} elapsed_s={time.monotonic() - t0:.4f} (serving)"
        ).encode()
        if emit is not None:
            out.write(FRAME.pack(b"S", time.time(), len(text)) + text)
        else:
            blob = records(reqs, answers)
            out.write(struct.pack(">II", len(blob), len(text)) + blob + text)
        out.drain()


def main(argv: list[str] | None = None) -> int:
    """Entry point: requests on stdin, binary :data:`RECORD` stream on stdout, stats on stderr."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-C", dest="ca", default=None)
    ap.add_argument("-P", dest="port", type=int, default=None)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="per-MAD timeout, seconds")
    ap.add_argument("--retries", type=int, default=1)
    ap.add_argument("--text", action="store_true", help="print decoded lines instead of records")
    ap.add_argument("--serve", action="store_true", help="serve BATCH requests on stdin until EOF")
    args = ap.parse_args(argv)
    # This program makes no reference cycles; the cyclic collector would only rescan the request
    # plan and the answers (hundreds of thousands of tuples) every 700 allocations, and the
    # poller's CPU is the sweep's critical path (the collect time).
    gc.disable()
    if args.serve:
        try:
            umad = Umad(args.ca, args.port, int(args.timeout * 1000))
        except OSError as exc:
            print(f"madpoll: {exc}", file=sys.stderr)
            return 3
        return serve(umad, args.window, args.timeout, args.retries)
    try:
        reqs = parse_requests(sys.stdin)
    except ValueError as exc:
        print(f"madpoll: {exc}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    try:
        umad = Umad(args.ca, args.port, int(args.timeout * 1000))
    except OSError as exc:
        print(f"madpoll: {exc}", file=sys.stderr)
        return 3
    answers, stats = run(reqs, umad, args.window, args.timeout, args.retries)
    blob = records(reqs, answers)
    if args.text:
        for i in range(0, len(blob), RECORD.size):
            print(decode_record(blob[i : i + RECORD.size]))
    else:
        sys.stdout.buffer.write(blob)
        sys.stdout.flush()
    print(
        f"madpoll: sent={stats['sent']} answered={stats['answered']} timeouts={stats['timeouts']} "
        f"mad_timeouts={stats['mad_timeouts']} elapsed_s={time.monotonic() - t0:.4f}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
