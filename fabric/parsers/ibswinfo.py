"""Parser of ``ibswinfo.sh`` output: an unmanaged switch's inventory and vitals (pure: no Django).

``ibswinfo.sh`` (Kilian Cavalotti, github.com/stanford-rc/ibswinfo) reads an unmanaged Mellanox/
NVIDIA switch (SwitchIB, Quantum) through its in-band registers (MFT's ``mlxreg``/``flint`` over
MADs: ``ibswinfo.sh -d lid-<LID>``) and prints, in its default output, ``key | value`` lines in
sections: the ASIC family and vendor, then inventory (part and serial number, product name,
revision, ports, PSID, GUID, firmware version), ``uptime (d-h:m:s)``, one block per power supply
(``PSU<n> status`` then indented ``P/N``, ``S/N``, ``DC power``, ``fan status``, ``power (W)``),
``temperature (C)`` and ``max temp (C)`` (the ASIC sensor's reading and the highest it measured
since the last reset: the MTMP register's ``temperature`` and ``max_temperature``, 1/8 °C units
divided by the script), newer versions ``warn threshold (C) | <lo>/<hi> (low/high)`` (MTMP's
``temperature_threshold_lo/hi``),
``fan status`` (the chassis fans as one status) and ``fan#<n> (rpm)``. ``-o vitals`` prints
``key : value`` lines instead: ``uptime (sec)``, ``psu<n>.power (W)``, ``cur.temp (C)``,
``max.temp (C)``, ``fan#<n>.speed (rpm)``. Both forms are read; the same reading comes out.

Real outputs seen (``$WEFT_REALDATA/ibswinfo``, from the treydock and SckyzO IB exporters' test
fixtures) include a PSU whose power reads ``foo``, a PSU block cut after ``S/N``, an empty PSU
status, and fan and temperature lines without a value: a value that does not read is left None
and named in :attr:`SwitchInfo.problems` with its line (``line N: field: why``); the parse never
fails for one field. Text with no ibswinfo field at all (no ``key | value`` line, or only lines
whose keys ibswinfo never prints: another tool's output) or with a NUL byte (binary data, a
UTF-16 file) raises :class:`IbswinfoParseError`; a number beyond :data:`NUMBER_LIMIT` is a
problem, not a value.

Statuses are kept as printed (``OK``, ``ERROR``, ...); :func:`is_ok` says whether one is healthy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .records import NUL_WHY, TopologyParseError, nul_line


class IbswinfoParseError(TopologyParseError):
    """Text with no ``ibswinfo`` field; ``str()`` names the source."""


@dataclass
class PsuInfo:
    """One power supply: ``index`` as printed (``PSU0`` → 0); statuses as printed or None;
    ``power_w`` in watts (int) or None."""

    index: int
    status: str | None = None
    part_number: str | None = None
    serial_number: str | None = None
    dc_power: str | None = None
    fan_status: str | None = None
    power_w: int | None = None


@dataclass
class SwitchInfo:
    """One switch's reading. Temperatures in °C (``max_temperature_c``: the highest measured since
    the switch's last reset, not a limit; ``warn_low_c``/``warn_high_c``: the sensor's warning
    thresholds, when the script prints them), uptime in seconds, fan speeds in rpm
    (``fans``: ``{fan number: rpm}``); every field None when the output did not give it (or gave
    it unreadable: then ``problems`` says so, ``"line N: field: why"``)."""

    asic: str | None = None
    part_number: str | None = None
    serial_number: str | None = None
    product_name: str | None = None
    revision: str | None = None
    ports: int | None = None
    psid: str | None = None
    guid: str | None = None
    firmware: str | None = None
    uptime_s: int | None = None
    psus: list[PsuInfo] = field(default_factory=list)
    temperature_c: int | None = None
    max_temperature_c: int | None = None
    warn_low_c: int | None = None
    warn_high_c: int | None = None
    fan_status: str | None = None
    fans: dict[int, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        """JSON-ready: the fields, ``psus`` as dicts, ``fans`` keyed by the fan number as text."""
        out = {k: v for k, v in self.__dict__.items() if k not in ("psus", "fans")}
        out["psus"] = [dict(p.__dict__) for p in self.psus]
        out["fans"] = {str(k): v for k, v in sorted(self.fans.items())}
        return out


#: the healthy status words ibswinfo prints (anything else, e.g. ``ERROR``, is a failure)
OK_WORDS = {"OK"}


def is_ok(status: str | None) -> bool | None:
    """True for a healthy status (``OK``), False for any other word, None when absent."""
    if status is None:
        return None
    return status.strip().upper() in OK_WORDS


#: ``key | value`` / ``key : value``: the separator follows the key's padding (a key may hold a
#: colon itself: ``uptime (d-h:m:s)``)
_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>\S.*?)\s+(?P<sep>[|:])(?:\s+(?P<value>.*?))?\s*$")
_UPTIME = re.compile(r"^(?:(?P<d>\d+)d-)?(?P<h>\d+):(?P<m>\d{2}):(?P<s>\d{2})$")
_PSU = re.compile(r"^psu\s*(?P<n>\d+)\s+status$", re.I)
_PSU_VITAL = re.compile(r"^psu(?P<n>\d+)\.power \(w\)$", re.I)
_FAN = re.compile(r"^fan#(?P<n>\d+)(?:\.speed)? \(rpm\)$", re.I)
#: the largest magnitude a number field may have (a larger one is unreadable: no sensor reads it,
#: and a float would overflow)
NUMBER_LIMIT = 2**53
_GUID = re.compile(r"^(?:0x)?[0-9a-fA-F]{1,16}$")
_TEXT_FIELDS = {
    "part number": "part_number",
    "serial number": "serial_number",
    "product name": "product_name",
    "revision": "revision",
    "psid": "psid",
    "firmware version": "firmware",
}
#: the top-level keys ibswinfo prints (besides ``PSU<n> status``, ``psu<n>.power (W)``, ``fan#<n>``)
_KNOWN_KEYS = {
    *_TEXT_FIELDS, "ports", "guid", "uptime (d-h:m:s)", "uptime (sec)", "temperature (c)", "cur.temp (c)",
    "max temp (c)", "max.temp (c)", "warn threshold (c)", "fan status",
}  # fmt: skip
_PSU_FIELDS = {
    "p/n": "part_number",
    "s/n": "serial_number",
    "dc power": "dc_power",
    "fan status": "fan_status",
}


def parse_ibswinfo(text: str, source: str = "<ibswinfo>") -> SwitchInfo:
    """Parse one ``ibswinfo.sh`` output (default or ``-o vitals`` form) into a :class:`SwitchInfo`.

    Raises:
        IbswinfoParseError: no ``key | value`` or ``key : value`` line at all, none that
            ibswinfo prints (not ibswinfo output), or a NUL byte (line located).
    """
    if at := nul_line(text):
        raise IbswinfoParseError(NUL_WHY, source, at)
    info = SwitchInfo()
    psu: PsuInfo | None = None
    fields = 0
    known = 0
    lines = text.splitlines()
    for n, raw in enumerate(lines, 1):
        line = raw.rstrip()
        if not line.strip() or set(line.strip()) <= {"=", "-"}:
            if set(line.strip()) <= {"-"}:
                psu = None  # a rule ends a PSU block
            continue
        m = _LINE.match(line)
        if m is None:
            if info.asic is None and not fields:
                info.asic = line.strip()  # the title line: "<family> <vendor>"
            continue
        fields += 1
        key, value = m["key"].strip().lower(), (m["value"] or "").strip()
        indented = bool(m["indent"]) and psu is not None
        if key in _KNOWN_KEYS or _PSU.match(key) or _PSU_VITAL.match(key) or _FAN.match(key):
            known += 1

        def bad(name: str, why: str, n: int = n) -> None:
            info.problems.append(f"line {n}: {name}: {why}")

        def number(name: str, value: str = value) -> int | None:
            if value == "":
                bad(name, "no value")
                return None
            if re.fullmatch(r"-?\d+(?:\.\d+)?", value):
                whole = value.partition(".")[0].lstrip("-").lstrip("0")
                if len(whole) > 16 or int(whole or 0) > NUMBER_LIMIT:
                    bad(name, f"out of range: {value[:40]!r}")
                    return None
                return int(float(value))
            bad(name, f"not a number: {value[:40]!r}")
            return None

        if indented:
            if key in _PSU_FIELDS:
                setattr(psu, _PSU_FIELDS[key], value or None)
                if not value:
                    bad(f"PSU{psu.index} {key}", "no value")
            elif key == "power (w)":
                psu.power_w = number(f"PSU{psu.index} power (W)")
            continue
        psu = None
        if pm := _PSU.match(key):
            psu = PsuInfo(index=int(pm["n"]), status=value or None)
            if not value:
                bad(f"PSU{psu.index} status", "no value")
            info.psus.append(psu)
        elif pm := _PSU_VITAL.match(key):
            idx = int(pm["n"])
            found = next((p for p in info.psus if p.index == idx), None) or PsuInfo(index=idx)
            if found not in info.psus:
                info.psus.append(found)
            found.power_w = number(f"psu{idx}.power (W)")
        elif fm := _FAN.match(key):
            rpm = number(f"fan#{fm['n']} (rpm)")
            if rpm is not None:
                info.fans[int(fm["n"])] = rpm
        elif key in _TEXT_FIELDS:
            setattr(info, _TEXT_FIELDS[key], value or None)
        elif key == "ports":
            info.ports = number("ports")
        elif key == "guid":
            if _GUID.match(value):
                info.guid = f"0x{int(value, 16):016x}"
            else:
                bad("GUID", f"not a GUID: {value[:40]!r}")
        elif key == "uptime (d-h:m:s)":
            um = _UPTIME.match(value)
            if um:
                info.uptime_s = (
                    int(um["d"] or 0) * 86400 + int(um["h"]) * 3600 + int(um["m"]) * 60 + int(um["s"])
                )
            else:
                bad("uptime", f"not d-h:m:s: {value[:40]!r}")
        elif key == "uptime (sec)":
            info.uptime_s = number("uptime (sec)")
        elif key in ("temperature (c)", "cur.temp (c)"):
            info.temperature_c = number("temperature (C)")
        elif key in ("max temp (c)", "max.temp (c)"):
            info.max_temperature_c = number("max temp (C)")
        elif key == "warn threshold (c)":
            tm = re.match(r"^(-?\d+)\s*/\s*(-?\d+)", value)
            if tm:
                info.warn_low_c, info.warn_high_c = int(tm[1]), int(tm[2])
            else:
                bad("warn threshold (C)", f"not <low>/<high>: {value[:40]!r}")
        elif key == "fan status":
            info.fan_status = value or None
            if not value:
                bad("fan status", "no value")
    if not fields:
        raise IbswinfoParseError(f"{source}: no 'key | value' line: not ibswinfo output")
    if not known:
        raise IbswinfoParseError(
            f"{source}: none of its {fields} 'key | value' lines is an ibswinfo field (part number, GUID, "
            "temperature, PSU, fan...): not ibswinfo output"
        )
    info.psus.sort(key=lambda p: p.index)
    return info
