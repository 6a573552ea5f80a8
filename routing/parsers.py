"""``dump_lfts``/``ibroute`` output (pure, no Django): the unicast linear forwarding tables.

``dump_lfts`` (infiniband-diags, today a wrapper of ``dump_fts``) prints, per switch, what
``ibroute`` prints for one switch::

    Unicast lids [0x0-0xb] of switch DR path slid 0; dlid 0; 0,1,3,3 guid 0x0c42a10300a00400 (MF0;leaf-03:MQM8700/U1):
      Lid  Out   Destination
           Port     Info
    0x0001 003 : (Channel Adapter portguid 0x1c34da0300400011: 'host001 mlx5_0')
    0x0006 000 : (Switch portguid 0x0c42a10300a00400: 'MF0;leaf-03:MQM8700/U1')
    11 valid lids dumped

(``ibroute`` by LID prints ``of switch Lid 6 guid ...``). A LID line is the destination LID and
the out port (000: the switch itself); LIDs not listed are unassigned (the LFT's 0xFF, IBTA Vol 1
14.2.5.10). The switch's own LID is the one routed to port 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.errors import LocatedError
from fabric.guid import normalize_guid

#: An LFT entry that forwards nowhere (IBTA Vol 1 14.2.5.10: port 255 = "drop"/unassigned).
UNASSIGNED = 0xFF


class LftParseError(LocatedError):
    """``dump_lfts`` output this parser cannot read (``"<source>:<line>: <message>"``)."""


@dataclass(frozen=True)
class SwitchLft:
    """One switch's unicast LFT: ``node_guid`` (canonical), ``lid`` (the LID routed to port 0, or
    None when none is), ``description`` (as printed), ``lft``: one byte per destination LID from 0
    to the highest listed (``lft[dlid]`` = out port, :data:`UNASSIGNED` when not listed)."""

    node_guid: str
    lid: int | None
    description: str
    lft: bytes


_HEADER = re.compile(
    r"^Unicast lids \[(0x[0-9a-fA-F]+)-(0x[0-9a-fA-F]+)\] of switch .*? guid (0x[0-9a-fA-F]+) \((.*)\):\s*$"
)
_ENTRY = re.compile(r"^(0x[0-9a-fA-F]+)\s+(\d+)\s*:")
_TRAILER = re.compile(r"^\d+ (valid )?lids dumped")


def parse_dump_lfts(text: str, *, source: str = "dump_lfts") -> list[SwitchLft]:
    """The LFT of every switch in ``dump_lfts`` (or ``ibroute``) output, in output order.

    Raises:
        LftParseError: an entry before any switch header, a port above 255, a LID outside the
            header's range or listed twice, or a header whose range is reversed.
    """
    out: list[SwitchLft] = []
    cur: dict | None = None

    def close() -> None:
        if cur is not None:
            top = max(cur["entries"], default=-1)
            lft = bytearray([UNASSIGNED]) * (top + 1)
            for dlid, port in cur["entries"].items():
                lft[dlid] = port
            own = [d for d, p in cur["entries"].items() if p == 0]
            out.append(SwitchLft(cur["guid"], min(own) if own else None, cur["desc"], bytes(lft)))

    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if m := _HEADER.match(line):
            close()
            lo, hi = int(m.group(1), 16), int(m.group(2), 16)
            if hi < lo:
                raise LftParseError(f"LID range {m.group(1)}-{m.group(2)} is reversed", source, n)
            cur = {"guid": normalize_guid(m.group(3)), "desc": m.group(4), "lo": lo, "hi": hi, "entries": {}}
            continue
        if m := _ENTRY.match(line):
            if cur is None:
                raise LftParseError("LID entry before any 'Unicast lids ... of switch' header", source, n)
            dlid, port = int(m.group(1), 16), int(m.group(2))
            if port > 255:
                raise LftParseError(f"out port {port} above 255", source, n)
            if not cur["lo"] <= dlid <= cur["hi"]:
                raise LftParseError(f"LID {dlid:#x} outside the header's range", source, n)
            if dlid in cur["entries"]:
                raise LftParseError(f"LID {dlid:#x} listed twice", source, n)
            cur["entries"][dlid] = port
            continue
        # column headings, trailers, the wrapper's warning: nothing to read
    close()
    return out
