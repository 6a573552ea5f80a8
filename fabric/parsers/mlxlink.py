"""Parser of ``mlxlink`` output: one port's module and link figures (pure: no Django).

``mlxlink`` (NVIDIA MFT, also in ``mstflint`` as ``mstlink``) reads a port's PHY registers;
``mlxlink -d <device> [-p <port>] -m -c`` prints, for a switch port (``-d lid-<LID> -p <port>``,
in-band) or an adapter's (``-d mlx5_0``), sections of ``Name<padding>: value`` lines, each under a
title underlined with dashes (the MFT manual's mlxlink page; mstflint ``mlxlink_cmd_print.cpp``
prints the title, a dash rule of its length, then each record as the name padded to a fixed
width, ``": "`` and the value)::

    Operational Info          State, Physical state, Speed, Width, FEC, ...
    Troubleshooting Info      Status Opcode, Group Opcode, Recommendation
    Module Info (-m)          Identifier, Compliance, Cable Technology, Cable Type, OUI,
                              Vendor Name, Vendor Part Number, Vendor Serial Number, Rev,
                              Wavelength [nm], Transfer Distance [m], FW Version,
                              Temperature [C], Voltage [mV], Bias Current [mA],
                              Rx Power Current [dBm], Tx Power Current [dBm], ...
    Physical Counters and BER Info (-c)
                              Time Since Last Clear [Min], Symbol Errors, Symbol BER,
                              Effective Physical Errors, Effective Physical BER,
                              Raw Physical Errors Per Lane, Raw Physical BER, ...
    Test Mode Info / Physical Counters and BER Info (PRBS)   (a port in PRBS test mode)

Diagnostic values carry the module's thresholds after them, ``<value> [<low>..<high>]``
(mstflint ``MlxlinkCommander::getValueAndThresholdsStr``), per-lane values are comma lists
(``-1.2,-0.8,-1.05,-0.9 [-10.5..3.4]``), a value the module does not give is ``N/A``, and BERs
are ``<coef>E-<magnitude>`` (``15E-255``). Values may be coloured with ANSI escapes (dropped). The
``--json`` form (``{"result": {"output": {<section>: {<name>: value | {"values": [...]}}}}}``) is
read too.

mlxlink does not print which device or port it read. A saved output may begin with the command
line that produced it (``$ mlxlink -d lid-0x1a -p 7 -m -c``, with or without the prompt or a
``#``): :attr:`MlxlinkOutput.device` and :attr:`MlxlinkOutput.port` come from it.

A value that does not read is left None and named in ``problems`` (``line N: <name>: why``);
``-E-`` error lines are listed the same way. Only text with no ``name : value`` line raises
:class:`MlxlinkParseError`.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field

from .cablerecord import CableReading, clean_text, is_na, to_float
from .records import NUL_WHY, TopologyParseError, nul_line

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_KV = re.compile(r"^(?P<key>[^\s:][^:]*?)\s*:(?:\s(?P<value>.*))?$")
_THRESH = re.compile(r"^(?P<value>.*?)\s*\[\s*(?P<lo>[^\[\]]*?)\s*\.\.\s*(?P<hi>[^\[\]]*?)\s*\]\s*$")
_RULE = re.compile(r"^-{3,}\s*$")


class MlxlinkParseError(TopologyParseError):
    """Text with no mlxlink field; ``str()`` names the source."""


@dataclass
class MlxlinkOutput:
    """One mlxlink run: the ``reading``, the sections seen, and the ``device`` (``lid-26``,
    ``mlx5_0``...) and ``port`` named by a command line at the top of a saved output (else
    None)."""

    reading: CableReading
    sections: list[str] = field(default_factory=list)
    device: str | None = None
    port: int | None = None


def _command_line(line: str) -> tuple[str | None, int | None] | None:
    """``(device, port)`` of an ``mlxlink ...`` command line, None when ``line`` is not one."""
    text = line.strip().lstrip("#$>").strip()
    if not re.match(r"^(?:\S*/)?(?:sudo\s+)?(?:\S*/)?(?:mlxlink|mstlink)\b", text):
        return None
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    device = port = None
    for i, word in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if word in ("-d", "--device"):
            device = nxt or None
        elif word.startswith("--device="):
            device = word.split("=", 1)[1] or None
        elif word in ("-p", "--port") and nxt.isdigit():
            port = int(nxt)
        elif word.startswith("--port=") and word.split("=", 1)[1].isdigit():
            port = int(word.split("=", 1)[1])
    return device, port


class _Filler:
    """Sets the reading's fields from ``(section, name, value, where)``."""

    def __init__(self, reading: CableReading) -> None:
        self.r = reading

    def bad(self, where: str, name: str, why: str) -> None:
        self.r.problems.append(f"{where}: {name}: {why}")

    def number(self, where: str, name: str, text: str) -> float | None:
        if is_na(text):
            return None
        value = to_float(text)
        if value is None:
            self.bad(where, name, f"not a number: {text[:40]!r}")
        return value

    def lanes(self, where: str, name: str, text: str) -> list[float]:
        if is_na(text):
            return []
        out: list[float] = []
        for part in text.split(","):
            value = to_float(part)
            if value is None:
                self.bad(where, name, f"lane {len(out)}: not a number: {part.strip()[:40]!r}")
                return []
            out.append(value)
        return out

    def with_thresholds(self, where: str, name: str, text: str) -> tuple[str, float | None, float | None]:
        """``value [lo..hi]`` → ``(value text, lo, hi)``; thresholds None when absent."""
        m = _THRESH.match(text)
        if m is None:
            return text, None, None
        lo = self.number(where, f"{name} low threshold", m["lo"])
        hi = self.number(where, f"{name} high threshold", m["hi"])
        return m["value"], lo, hi

    def set(self, section: str, name: str, value: str, where: str) -> None:
        r = self.r
        key = name.strip().lower()
        value = value.strip()
        sec = section.lower()
        if sec.startswith("test mode") or sec.endswith("(prbs)"):
            r.raw[f"{section}: {name.strip()}"] = value  # a port in PRBS test mode: kept as printed
            return
        text_fields = {
            "identifier": "identifier",
            "cable technology": "technology",
            "cable type": "cable_type",
            "vendor name": "vendor",
            "vendor part number": "part_number",
            "vendor serial number": "serial_number",
            "rev": "revision",
            "fw version": "firmware",
            "state": "state",
            "speed": "speed",
            "width": "width",
            "fec": "fec",
            "recommendation": "recommendation",
        }
        if key in text_fields:
            if key in ("state", "fw version") and not sec.startswith(("operational", "module")):
                return  # "State" / "FW Version" of other sections (Tool Information...)
            setattr(r, text_fields[key], clean_text(value))
        elif key in ("transfer distance [m]", "length [m]", "cable length [m]"):
            r.length_m = self.number(where, name.strip(), value)
        elif key == "wavelength [nm]":
            nm = self.number(where, name.strip(), value)
            r.wavelength_nm = int(nm) if nm is not None else None
        elif key == "temperature [c]":
            v, r.temperature_low_c, r.temperature_high_c = self.with_thresholds(
                where, "Temperature [C]", value
            )
            r.temperature_c = self.number(where, "Temperature [C]", v)
        elif key == "voltage [mv]":
            v, _, _ = self.with_thresholds(where, "Voltage [mV]", value)
            r.voltage_mv = self.number(where, "Voltage [mV]", v)
        elif key == "bias current [ma]":
            v, _, _ = self.with_thresholds(where, "Bias Current [mA]", value)
            r.bias_ma = self.lanes(where, "Bias Current [mA]", v)
        elif key == "rx power current [dbm]":
            v, r.rx_power_low_dbm, r.rx_power_high_dbm = self.with_thresholds(
                where, "Rx Power Current [dBm]", value
            )
            r.rx_power_dbm = self.lanes(where, "Rx Power Current [dBm]", v)
        elif key == "tx power current [dbm]":
            v, r.tx_power_low_dbm, r.tx_power_high_dbm = self.with_thresholds(
                where, "Tx Power Current [dBm]", value
            )
            r.tx_power_dbm = self.lanes(where, "Tx Power Current [dBm]", v)
        elif key in ("effective physical ber", "raw physical ber", "symbol ber"):
            attr = {
                "effective physical ber": "effective_ber",
                "raw physical ber": "raw_ber",
                "symbol ber": "symbol_ber",
            }
            setattr(r, attr[key], self.number(where, name.strip(), value))
        elif key in ("effective physical errors", "symbol errors"):
            n = self.number(where, name.strip(), value)
            setattr(r, "effective_errors" if key.startswith("effective") else "symbol_errors",
                    int(n) if n is not None else None)  # fmt: skip
        elif key == "raw physical errors per lane":
            r.raw_errors_per_lane = [int(v) for v in self.lanes(where, name.strip(), value)]
        elif key == "raw physical ber per lane":
            r.raw_ber_per_lane = self.lanes(where, name.strip(), value)


def parse_mlxlink(text: str, source: str = "<mlxlink>") -> MlxlinkOutput:
    """Parse one ``mlxlink`` output (text or ``--json``) into a :class:`MlxlinkOutput`.

    Raises:
        MlxlinkParseError: no ``name : value`` line at all (not mlxlink output), or ``--json``
            output that is not the documented object, or a NUL byte (binary data; line located).
    """
    if at := nul_line(text):
        raise MlxlinkParseError(NUL_WHY, source, at)
    if text.lstrip().startswith("{"):
        return _parse_json(text, source)
    reading = CableReading()
    fill = _Filler(reading)
    out = MlxlinkOutput(reading=reading)
    section = ""
    fields = 0
    lines = [_ANSI.sub("", raw).rstrip() for raw in text.splitlines()]
    for n, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped or _RULE.match(stripped):
            continue
        if not fields and not out.sections and (cmd := _command_line(stripped)) is not None:
            out.device, out.port = cmd
            continue
        if stripped.startswith(("-E-", "-W-")):
            if stripped.startswith("-E-"):
                reading.problems.append(f"line {n}: tool error: {stripped[3:].strip()[:200]}")
            continue
        nxt = lines[n].strip() if n < len(lines) else ""
        if _RULE.match(nxt) and ":" not in stripped:
            section = stripped
            out.sections.append(section)
            continue
        m = _KV.match(line)
        if m is None:
            continue
        fields += 1
        fill.set(section, m["key"], m["value"] or "", f"line {n}")
    if not fields:
        raise MlxlinkParseError("no 'name : value' line: not mlxlink output", source)
    return out


def _parse_json(text: str, source: str) -> MlxlinkOutput:
    try:
        doc = json.loads(text)
        sections = doc["result"]["output"]
        if not isinstance(sections, dict):
            raise TypeError("output is not an object")
    except (ValueError, KeyError, TypeError) as exc:
        raise MlxlinkParseError(f"not mlxlink --json output ({exc})", source) from None
    except RecursionError:  # json nests deeper than the interpreter's stack
        raise MlxlinkParseError("not mlxlink --json output (nested too deep)", source) from None
    reading = CableReading()
    fill = _Filler(reading)
    out = MlxlinkOutput(reading=reading, sections=list(sections))
    for section, records in sections.items():
        if not isinstance(records, dict):
            reading.problems.append(f"json {section}: not an object")
            continue
        for name, value in records.items():
            if isinstance(value, dict) and isinstance(value.get("values"), list):
                value = ",".join(str(v) for v in value["values"])
            fill.set(section, name, str(value), f"json {section}")
    return out
