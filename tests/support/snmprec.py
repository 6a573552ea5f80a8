"""Read a ``.snmprec`` recording the plain way, as the tests' independent oracle (snmpsim's format:
``OID|type|value`` per line; type tags are BER numbers, ``x`` after one means the value is hex:
``4x|6c6f`` = OCTET STRING "lo"; 2 INTEGER, 4 OCTET STRING, 6 OID, 64 IpAddress, 65 Counter32,
66 Gauge32, 67 TimeTicks, 70 Counter64)."""

from __future__ import annotations

import gzip
from pathlib import Path


def read(path: Path) -> dict[str, object]:
    """``{oid: value}`` of a recording: ints for numeric types, str for the rest (hex decoded)."""
    opener = gzip.open if path.suffix == ".gz" else open
    out: dict[str, object] = {}
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.rstrip("\n").split("|", 2)
            if len(parts) != 3:
                continue
            oid, tag, value = parts
            if tag.endswith("x"):
                value = bytes.fromhex(value).decode("utf-8", "replace")
                tag = tag[:-1]
            if tag in ("2", "65", "66", "67", "70") and value.lstrip("-").isdigit():
                value = int(value)
            out.setdefault(oid, value)
    return out


def column(rec: dict[str, object], prefix: str) -> dict[str, object]:
    """``{index: value}`` of the table column ``prefix`` (numeric OID without the index)."""
    p = prefix + "."
    return {oid[len(p) :]: v for oid, v in rec.items() if oid.startswith(p)}


def recorded(path: Path, oids) -> dict[str, tuple[str, str]]:
    """``{oid: (type tag, value)}`` of ``oids`` exactly as the recording ``path`` has them (the
    form snmpsim's ``set_values`` takes: put back rows a test deleted, as recorded)."""
    wanted = set(oids)
    opener = gzip.open if path.suffix == ".gz" else open
    out: dict[str, tuple[str, str]] = {}
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            parts = line.rstrip("\r\n").split("|", 2)
            if len(parts) == 3 and parts[0] in wanted:
                out.setdefault(parts[0], (parts[1], parts[2]))
    return out


def lone_row(rec: dict[str, object], name_column: str, table: str) -> tuple[object, list[str]]:
    """A row of ``table`` (its entry OID prefix) whose ``name_column`` value no other row has, the
    first by index: ``(value, [the row's OIDs in the recording])``. Raises ``StopIteration`` when
    every value is shared."""
    names = column(rec, name_column)
    counts: dict[object, int] = {}
    for name in names.values():
        counts[name] = counts.get(name, 0) + 1
    index, value = next((i, n) for i, n in sorted(names.items()) if n and counts[n] == 1)
    return value, [o for o in rec if o.startswith(table + ".") and o.endswith("." + index)]
