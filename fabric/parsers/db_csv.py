"""Parser of ibdiagnet2's ``ibdiagnet2.db_csv`` (pure: no Django): its sections, and the cable
and transceiver rows of ``CABLE_INFO``.

``ibdiagnet`` writes one CSV database per run (``/var/tmp/ibdiagnet2/ibdiagnet2.db_csv`` or under
``-o DIR``): ``#`` comment lines (its banner and the ``INDEX_TABLE`` of offsets), then sections,
each a ``START_<NAME>`` line, a header line of column names, one CSV row per object and an
``END_<NAME>`` line (IBUtils2 manual, "ibdiagnet2.db_csv"; ibdiag's ``CSVOut::DumpStart/DumpEnd``).
Fields are CSV (text values quoted, e.g. ``"MT2138VS01234"``); ``N/A`` or ``NA`` mean no value.
:func:`read_sections` returns every section as rows; :func:`parse_cable_info` interprets the
``CABLE_INFO`` section written by ``ibdiagnet --get_cable_info`` (ibdiag's ``CableInfoRecord``:
``NodeGuid``, ``PortGuid``, ``PortNum``, ``Vendor``, ``OUI``, ``PN``, ``SN``, ``Rev``, the
``Length*`` columns and ``LengthDesc``, ``Identifier``/``IdentifierStr``, ``TypeDesc``,
``SupportedSpeedDesc``, ``Temperature`` (``35C``), ``FWVersion``, ``RX<n>Power``, ``TX<n>Bias``,
``TX<n>Power``, ``SupplyVoltageReporting``, the ``{High,Low}*{Alarm,Warning}`` flags and the
``{Alarm,Warn}TemperatureHighThresh``... thresholds): one :class:`CableReading` per row, the port
named by ``NodeGuid`` and ``PortNum``.

Units: temperatures with or without a trailing ``C``; a length from ``LengthDesc`` (``3 m``), else
``LengthCopperOrActive`` in metres. Power, bias and voltage columns are read only when the value
carries its unit (``dBm``, ``mW``, ``uW``, ``mA``, ``V``, ``mV``): the unit of a bare number in
these columns is not established from the public documentation, so such values are kept as
printed in :attr:`CableReading.raw`. A flag column (``HighTemperatureAlarm``, ``LowRX1PowerAlarm``,
...) that is set is listed in :attr:`CableReading.alarms`.

The PHY sections of ``--get_phy_info`` (``PHY_DB*``, BER) are register dumps whose column
meanings are not documented publicly; :func:`read_sections` returns them as rows, nothing more.

A row or value that does not read is skipped or left None and named in ``problems`` with its line
(``line N: CABLE_INFO: <column>: why``); only text with no section at all, or without a
``CABLE_INFO`` section, raises :class:`DbCsvParseError`.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field

from .cablerecord import CableReading, clean_text, is_na, to_float
from .records import NUL_WHY, TopologyParseError, nul_line


class DbCsvParseError(TopologyParseError):
    """Text that is not an ibdiagnet db_csv, or has no ``CABLE_INFO``; ``str()`` names the source."""


@dataclass
class Section:
    """One ``START_<name>`` … ``END_<name>`` block: its ``header`` and ``rows`` as
    ``(line number, {column: text})``."""

    name: str
    line: int
    header: list[str] = field(default_factory=list)
    rows: list[tuple[int, dict[str, str]]] = field(default_factory=list)


@dataclass
class DbCsv:
    """A parsed db_csv: ``sections`` by name and the ``problems`` of the file's structure."""

    sections: dict[str, Section] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def _csv_fields(line: str) -> list[str] | None:
    try:
        return next(csv.reader([line], skipinitialspace=True))
    except (csv.Error, StopIteration):
        return None


def read_sections(text: str, source: str = "<db_csv>") -> DbCsv:
    """Every section of a db_csv: a row whose field count differs from its header's is skipped
    (a problem), a section left open is closed at the next ``START_`` or the end (a problem).

    Raises:
        DbCsvParseError: no ``START_`` line at all (not a db_csv), or a NUL byte (binary data).
    """
    if at := nul_line(text):
        raise DbCsvParseError(NUL_WHY, source, at)
    out = DbCsv()
    cur: Section | None = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("START_") and "," not in line:
            if cur is not None:
                out.problems.append(f"line {n}: {cur.name}: no END_{cur.name} before {line}")
            cur = Section(name=line[6:], line=n)
            if cur.name in out.sections:
                out.problems.append(f"line {n}: {cur.name}: section repeated (the last one is kept)")
            out.sections[cur.name] = cur
            continue
        if line.startswith("END_") and "," not in line:
            if cur is None or line[4:] != cur.name:
                out.problems.append(f"line {n}: {line} without its START_")
            cur = None
            continue
        if cur is None:
            continue  # outside any section (the index table's lines are comments)
        fields = _csv_fields(line)
        if fields is None:
            out.problems.append(f"line {n}: {cur.name}: not a CSV line")
            continue
        fields = [f.strip() for f in fields]
        if not cur.header:
            cur.header = fields
            continue
        if len(fields) != len(cur.header):
            out.problems.append(
                f"line {n}: {cur.name}: {len(fields)} fields where the header has {len(cur.header)} (row skipped)"
            )
            continue
        cur.rows.append((n, dict(zip(cur.header, fields, strict=True))))
    if cur is not None:
        out.problems.append(f"line {cur.line}: {cur.name}: no END_{cur.name} (file cut short?)")
    if not out.sections:
        raise DbCsvParseError("no START_ section: not an ibdiagnet db_csv", source)
    out.problems.sort(key=_line_of)
    return out


def _line_of(problem: str) -> int:
    m = re.match(r"line (\d+):", problem)
    return int(m[1]) if m else 0


@dataclass
class CableInfo:
    """``CABLE_INFO`` read: one reading per good row (``node_guid``/``port_num`` set), and the
    ``problems`` of the file and of rows skipped whole."""

    readings: list[CableReading] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)


_GUID = re.compile(r"^(?:0x)?[0-9a-fA-F]{1,16}$")
_FLAG = re.compile(r"^(?:High|Low)\w*(?:Alarm|Warning)$")
_UNIT = re.compile(r"^\s*(?P<n>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<u>[A-Za-z]+)\s*$")


def _with_unit(text: str) -> tuple[float, str] | None:
    m = _UNIT.match(text)
    if not m or not math.isfinite(number := float(m["n"])):
        return None  # 1e999 dBm is no reading (and JSON has no infinity)
    return number, m["u"].lower()


def _dbm(text: str) -> float | None:
    """A power with its unit in dBm (``-1.5 dBm``, ``0.8 mW``, ``800 uW``); None for a bare number."""
    got = _with_unit(text)
    if got is None:
        return None
    value, unit = got
    if unit == "dbm":
        return value
    mw = {"mw": value, "uw": value / 1000.0}.get(unit)
    if mw is None:
        return None
    return round(10 * math.log10(mw), 3) if mw > 0 else -40.0  # mlxlink's floor for no light


def _row_reading(n: int, row: dict[str, str]) -> tuple[CableReading | None, str]:
    """One CABLE_INFO row → ``(reading, "")``, or ``(None, why)`` when the port does not read."""
    where = f"line {n}: CABLE_INFO"
    guid = (row.get("NodeGuid") or "").strip()
    if not _GUID.match(guid):
        return None, f"{where}: NodeGuid: not a GUID: {guid[:40]!r} (row skipped)"
    port = (row.get("PortNum") or "").strip()
    if not port.isdigit():
        return None, f"{where}: PortNum: not a port number: {port[:20]!r} (row skipped)"
    r = CableReading(node_guid=f"0x{int(guid, 16):016x}", port_num=int(port))

    def bad(col: str, why: str) -> None:
        r.problems.append(f"{where}: {col}: {why}")

    for col, attr in (("Vendor", "vendor"), ("PN", "part_number"), ("SN", "serial_number"), ("Rev", "revision"),
                      ("TypeDesc", "technology"), ("FWVersion", "firmware"),
                      ("SupportedSpeedDesc", "supported_speeds")):  # fmt: skip
        setattr(r, attr, clean_text(row.get(col)))
    r.identifier = clean_text(row.get("IdentifierStr")) or clean_text(row.get("Identifier"))

    def temp(col: str) -> float | None:
        text = row.get(col)
        if is_na(text):
            return None
        value = to_float(text, ("C",))
        if value is None:
            bad(col, f"not a temperature: {text.strip()[:40]!r}")
        return value

    r.temperature_c = temp("Temperature")
    r.temperature_high_c = temp("AlarmTemperatureHighThresh")
    r.temperature_low_c = temp("AlarmTemperatureLowThresh")

    desc = row.get("LengthDesc")
    if not is_na(desc):
        got = _with_unit(desc)
        if got and got[1] in ("m", "km"):
            r.length_m = got[0] * (1000 if got[1] == "km" else 1)
        elif (value := to_float(desc)) is not None:
            r.length_m = value
        else:
            bad("LengthDesc", f"not a length: {desc.strip()[:40]!r}")
    if r.length_m is None and not is_na(row.get("LengthCopperOrActive")):
        text = row["LengthCopperOrActive"]
        value = to_float(text, ("m",))
        if value is None:
            bad("LengthCopperOrActive", f"not a length: {text.strip()[:40]!r}")
        elif value > 0:
            r.length_m = value

    volt = row.get("SupplyVoltageReporting")
    if not is_na(volt):
        got = _with_unit(volt)
        if got and got[1] in ("v", "mv"):
            r.voltage_mv = got[0] * (1000 if got[1] == "v" else 1)
        else:
            r.raw["SupplyVoltageReporting"] = volt.strip()

    for kind, attr, unit in (("RX", "rx_power_dbm", "Power"), ("TX", "tx_power_dbm", "Power"),
                             ("TX", "bias_ma", "Bias")):  # fmt: skip
        lanes: list[float] = []
        for lane in range(1, 9):
            col = f"{kind}{lane}{unit}"
            text = row.get(col)
            if is_na(text):
                continue
            value = _dbm(text) if unit == "Power" else (
                got[0] if (got := _with_unit(text)) and got[1] == "ma" else None)  # fmt: skip
            if value is None:
                r.raw[col] = text.strip()  # a bare number: unit not established
                continue
            lanes.append(value)
        setattr(r, attr, lanes)

    for col, text in row.items():
        if _FLAG.match(col) and not is_na(text):
            try:
                on = int(text.strip(), 0) != 0
            except ValueError:
                bad(col, f"not a flag: {text.strip()[:20]!r}")
                continue
            if on:
                r.alarms.append(col)
    return r, ""


def parse_cable_info(text: str, source: str = "<db_csv>") -> CableInfo:
    """The ``CABLE_INFO`` rows of a db_csv as :class:`CableReading` records (module docstring).

    Raises:
        DbCsvParseError: not a db_csv, no ``CABLE_INFO`` section (ibdiagnet ran without
            ``--get_cable_info``), or the section has no ``NodeGuid``/``PortNum`` column.
    """
    db = read_sections(text, source)
    out = CableInfo(problems=list(db.problems), sections=list(db.sections))
    sec = db.sections.get("CABLE_INFO")
    if sec is None:
        raise DbCsvParseError(
            "no CABLE_INFO section (run ibdiagnet with --get_cable_info); "
            f"sections: {', '.join(list(db.sections)[:12])}",
            source,
        )
    missing = [c for c in ("NodeGuid", "PortNum") if c not in sec.header]
    if missing:
        raise DbCsvParseError(f"CABLE_INFO header has no {', '.join(missing)}", source, sec.line + 1)
    for n, row in sec.rows:
        reading, why = _row_reading(n, row)
        if reading is None:
            out.problems.append(why)
        else:
            out.readings.append(reading)
    out.problems.sort(key=_line_of)
    return out
