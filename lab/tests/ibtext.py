"""Small readers of infiniband-diags text for the lab tests (Weft's real parsers live in fabric/)."""

from __future__ import annotations

import re

# ibnetdiscover -p: "CA     7  1 0x1c34...11 4x EDR - SW     4  2 0x0c42... ( 'host004 mlx5_0' - 'MF0;leaf-02:...' )"
_PORT_LINE = re.compile(
    r"^(SW|CA|RT)\s+(\d+)\s+(\d+)\s+(0x[0-9a-f]+)\s+(\d+x)\s+(\S+)"
    r"(?:\s+-\s+(SW|CA|RT)\s+(\d+)\s+(\d+)\s+(0x[0-9a-f]+))?"
)


def ports_summary(text: str) -> dict:
    """From ``ibnetdiscover -p`` output: node GUIDs by type, distinct links, LIDs, rates of linked ports.

    Returns ``{"switches": set, "cas": set, "links": set of ((guid, port), (guid, port)),
    "lids": {guid: lid}, "rates": set of "4xHDR"}``. A CA is identified by its port GUID, a switch by
    its node GUID (what -p prints).
    """
    out = {"switches": set(), "cas": set(), "links": set(), "lids": {}, "rates": set()}
    for line in text.splitlines():
        m = _PORT_LINE.match(line)
        if not m:
            continue
        kind, lid, port, guid = m[1], int(m[2]), int(m[3]), m[4]
        out["switches" if kind == "SW" else "cas"].add(guid)
        out["lids"][guid] = lid
        if m[7]:
            a, b = (guid, port), (m[10], int(m[9]))
            out["links"].add((a, b) if a <= b else (b, a))
            out["rates"].add(f"{m[5]}{m[6]}")
    return out


def perf_counter(text: str, name: str) -> int:
    """The value of counter ``name`` in perfquery output (``PortXmitWait:....1234``)."""
    m = re.search(rf"^{re.escape(name)}:\.*(\d+)\s*$", text, re.M)
    if not m:
        raise AssertionError(f"{name} not in perfquery output:\n{text}")
    return int(m[1])


def pkeys(text: str) -> set[int]:
    """Non-zero PKeys of ``smpquery pkeys`` output (``   0: 0xffff 0x8a01 0x0000 ...``)."""
    found = set()
    for line in text.splitlines():
        if re.match(r"^\s*\d+:", line):
            found |= {int(x, 16) for x in re.findall(r"0x[0-9a-f]{4}", line)}
    return found - {0}


def alive(pid: int) -> bool:
    """Is ``pid`` a running (not zombie) process?"""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] not in "ZX"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
