"""Pipelined LinearForwardingTable reader: every switch's unicast LFT through libibumad (ctypes).

Run as a child process with the fabric's tool environment (so ``LD_PRELOAD=libumad2sim.so``
points it at a lab, exactly as for the diags)::

    python -m routing.collectors.lftpoll [-C ca] [-P port] [--window N] [--timeout S] < lids

Input: one switch LID per line. For each it sends a LID-routed ``SubnGet(NodeInfo)`` (attribute
0x0011, IBTA Vol 1 14.2.5.3: the NodeGUID, bytes 12..19, says which switch answers at that LID) and
``SubnGet(SwitchInfo)`` (attribute 0x0012, 14.2.5.4: LinearFDBTop, the highest LID the table
holds, is bytes 6..7 of the attribute), then
``SubnGet(LinearForwardingTable)`` for blocks ``0 .. LinearFDBTop // 64`` (14.2.5.10: attribute
0x0019, attribute modifier = block number, 64 one-byte entries per block), with at most
``--window`` SMPs in flight over all switches (as ``telemetry.collectors.madpoll`` reads counters).

Output (stdout, binary), one record per input LID in input order: ``>HBQH`` (LID, status, node
GUID, length) then ``length`` bytes: the LFT entries 0..LinearFDBTop (status 0), or an empty table with status
1 (an SMP timed out after its retries) or 2 (an SMP answered with an error status). A last line
on stderr: ``lftpoll: switches=.. smps=.. timeouts=.. errors=.. elapsed_s=..``.

Why not ``dump_lfts``: it re-discovers the fabric with directed-route SMPs and reads one block at a
time per switch (one round trip each); the stored topology already has the switch LIDs.
No Django import: pure apart from ctypes (imports only the libibumad binding
``fabric.collectors.umad``).
"""

from __future__ import annotations

import argparse
import gc
import os
import struct
import sys
import time
from collections import deque

from fabric.collectors.umad import MAD_SIZE, Umad

SMP_LID_CLASS = 0x01
GET = 0x01
ATTR_NODE_INFO = 0x0011
ATTR_SWITCH_INFO = 0x0012
ATTR_LFT = 0x0019
SMP_DATA = 64
BLOCK = 64
RECORD = struct.Struct(">HBQH")
STATUS_OK, STATUS_TIMEOUT, STATUS_ERROR = 0, 1, 2
DEFAULT_TIMEOUT_S = 1.0
#: LinearFDBTop above this is refused (unicast LIDs end at 0xBFFF, IBTA Vol 1 4.1.3)
MAX_TOP = 0xBFFF


def build_smp(attr: int) -> bytearray:
    """A 256-byte LID-routed SubnGet SMP (IBTA 14.2.1.1: common header; M_Key 0) for ``attr``;
    the caller packs the TID (bytes 8..15) and attribute modifier (bytes 20..23)."""
    mad = bytearray(MAD_SIZE)
    struct.pack_into(">BBBBHHQHHI", mad, 0, 1, SMP_LID_CLASS, 1, GET, 0, 0, 0, attr, 0, 0)
    return mad


def linear_fdb_top(switch_info: bytes) -> int:
    """LinearFDBTop from a SwitchInfo attribute (IBTA Table 146: bits 48..63)."""
    return struct.unpack_from(">H", switch_info, 6)[0]


def read_lfts(umad: Umad, lids: list[int], window: int, timeout_s: float, retries: int) -> tuple[list, dict]:
    """Read the LFTs of the switches at ``lids``; returns ``(results, stats)`` with ``results[i]`` =
    ``(status, node GUID, bytes)`` for ``lids[i]`` and ``stats`` = ``{"smps", "timeouts", "errors"}``."""
    n = len(lids)
    tables: list[bytearray | None] = [None] * n
    status = [STATUS_OK] * n
    blocks_left = [0] * n
    guids = [0] * n
    # request: (switch index, attr, block); seq = index in reqs (the TID)
    reqs: list[tuple[int, int, int]] = [
        (i, a, 0) for i in range(n) for a in (ATTR_NODE_INFO, ATTR_SWITCH_INFO)
    ]
    queue = deque(range(len(reqs)))
    pending: dict[int, tuple[float, int]] = {}
    templates = {a: build_smp(a) for a in (ATTR_NODE_INFO, ATTR_SWITCH_INFO, ATTR_LFT)}
    hdr = umad.hdr
    sbuf = bytearray(hdr + MAD_SIZE)
    struct.pack_into("=IIIII", sbuf, 0, umad.agent, 0, umad.timeout_ms, 0, 0)
    struct.pack_into(">II", sbuf, 20, 0, 0)  # QP0, Q_Key 0: an SMP
    fd, mono = umad.fd, time.monotonic
    recv_ms = max(1, int(timeout_s * 1000))
    smps = timeouts = errors = 0

    def send(seq: int) -> None:
        i, attr, block = reqs[seq]
        mad = templates[attr]
        struct.pack_into(">Q", mad, 8, seq + 1)
        struct.pack_into(">I", mad, 20, block)
        struct.pack_into(">H", sbuf, 28, lids[i])
        sbuf[hdr:] = mad
        os.write(fd, sbuf)

    def fail(i: int, why: int) -> None:
        if status[i] == STATUS_OK:
            status[i] = why
            tables[i] = None

    while queue or pending:
        if queue and len(pending) < window:
            deadline = mono() + timeout_s
            while queue and len(pending) < window:
                seq = queue.popleft()
                if status[reqs[seq][0]] != STATUS_OK:
                    continue
                send(seq)
                smps += 1
                pending[seq] = (deadline, 0)
        got = umad.recv(recv_ms)
        if got is not None:
            ustatus, mad = got
            # the low 32 bits are ours: the sender puts its agent (bits 32..47) and ibsim its client
            # id (48..63) above them (umad2sim.c, sim_mad.c update_trid), as a kernel puts its agent
            seq = (struct.unpack_from(">Q", mad, 8)[0] & 0xFFFFFFFF) - 1
            if pending.pop(seq, None) is not None:
                i, attr, block = reqs[seq]
                mstatus = struct.unpack_from(">H", mad, 4)[0] & 0x7FFF  # bit 15: D (direction), DR only
                if ustatus:
                    timeouts += 1
                    fail(i, STATUS_TIMEOUT)
                elif mstatus:
                    errors += 1
                    fail(i, STATUS_ERROR)
                elif status[i] == STATUS_OK:
                    data = mad[SMP_DATA : SMP_DATA + BLOCK]
                    if attr == ATTR_NODE_INFO:
                        guids[i] = struct.unpack_from(">Q", data, 12)[0]
                    elif attr == ATTR_SWITCH_INFO:
                        top = min(linear_fdb_top(data), MAX_TOP)
                        tables[i] = bytearray(b"\xff") * (top + 1)
                        nblocks = top // BLOCK + 1
                        blocks_left[i] = nblocks
                        for b in range(nblocks):
                            reqs.append((i, ATTR_LFT, b))
                            queue.append(len(reqs) - 1)
                    else:
                        t = tables[i]
                        start = block * BLOCK
                        t[start : start + BLOCK] = data[: max(0, min(BLOCK, len(t) - start))]
                        blocks_left[i] -= 1
            if pending and got is not None:
                continue
        now = mono()
        while pending:
            seq, (deadline, tries) = next(iter(pending.items()))
            if deadline > now:
                break
            del pending[seq]
            if tries < retries and status[reqs[seq][0]] == STATUS_OK:
                send(seq)
                smps += 1
                pending[seq] = (now + timeout_s, tries + 1)
            else:
                timeouts += 1
                fail(reqs[seq][0], STATUS_TIMEOUT)
    results = [
        (status[i], guids[i], bytes(tables[i] or b"") if status[i] == STATUS_OK else b"") for i in range(n)
    ]
    return results, {"smps": smps, "timeouts": timeouts, "errors": errors}


def decode(blob: bytes) -> list[tuple[int, int, int, bytes]]:
    """The records of an output stream: ``[(lid, status, node GUID, lft bytes), ...]``.

    Raises:
        ValueError: the stream ends inside a record.
    """
    out = []
    at = 0
    while at < len(blob):
        if at + RECORD.size > len(blob):
            raise ValueError(f"lftpoll output cut at byte {at}")
        lid, st, guid, length = RECORD.unpack_from(blob, at)
        at += RECORD.size
        if at + length > len(blob):
            raise ValueError(f"lftpoll output cut inside the table of LID {lid}")
        out.append((lid, st, guid, blob[at : at + length]))
        at += length
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point: LIDs on stdin, records on stdout, the stats line on stderr; exit 2 on bad
    input, 3 when the umad port cannot be opened."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-C", dest="ca", default=None)
    ap.add_argument("-P", dest="port", type=int, default=None)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="per-SMP timeout, seconds")
    ap.add_argument("--retries", type=int, default=2)
    args = ap.parse_args(argv)
    gc.disable()  # no reference cycles here; see telemetry.collectors.madpoll
    lids: list[int] = []
    for n, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        try:
            lid = int(line)
            if not 1 <= lid <= MAX_TOP:
                raise ValueError
        except ValueError:
            print(f"lftpoll: stdin line {n}: not a unicast LID: {line.strip()[:40]!r}", file=sys.stderr)
            return 2
        lids.append(lid)
    t0 = time.monotonic()
    try:
        umad = Umad(args.ca, args.port, int(args.timeout * 1000), mgmt_class=SMP_LID_CLASS, class_version=1)
    except OSError as exc:
        print(f"lftpoll: {exc}", file=sys.stderr)
        return 3
    results, stats = read_lfts(umad, lids, max(1, args.window), args.timeout, args.retries)
    out = bytearray()
    for lid, (st, guid, table) in zip(lids, results, strict=True):
        out += RECORD.pack(lid, st, guid, len(table)) + table
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    print(
        f"lftpoll: switches={len(lids)} smps={stats['smps']} timeouts={stats['timeouts']} "
        f"errors={stats['errors']} elapsed_s={time.monotonic() - t0:.4f}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
