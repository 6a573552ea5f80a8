"""One port's cable and transceiver reading, as the cable parsers give it (pure: no Django).

Both ``fabric.parsers.mlxlink`` (``mlxlink -m -c`` of one port) and ``fabric.parsers.db_csv``
(ibdiagnet2's ``CABLE_INFO`` section, one row per port) fill a :class:`CableReading`; the cables
service (``fabric.services.cables``) stores :meth:`CableReading.as_dict` and compares readings.
Units are in the field names: °C, metres, nm, mV, mA, dBm. A field the tool did not give (or gave
as ``N/A``/``NA``) is None (an empty list for per-lane values); a field it gave unreadable is None
too and named in ``problems`` with where it was (``"line N: field: why"``).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

#: how the tools print "no value"
NA_WORDS = frozenset({"", "N/A", "NA", "n/a", "na", "-"})


@dataclass
class CableReading:
    """A port's module (transceiver or cable end) and link-quality figures.

    * inventory: ``identifier`` (form factor, e.g. ``QSFP56``), ``technology`` (e.g. ``850 nm
      VCSEL``, ``Copper cable unequalized``), ``cable_type`` (passive copper, active, optical
      module...), ``vendor``, ``part_number``, ``serial_number``, ``revision``, ``length_m``,
      ``wavelength_nm``, ``firmware`` (the module's own firmware);
    * diagnostics (DDM): ``temperature_c`` with the module's alarm thresholds
      ``temperature_low_c``/``temperature_high_c``, ``voltage_mv``, per lane ``bias_ma``,
      ``rx_power_dbm``, ``tx_power_dbm`` with their ``*_low``/``*_high`` thresholds; module alarm
      flags the tool reports as set: ``alarms`` (e.g. ``["HighTemperatureAlarm"]``);
    * link (mlxlink only): ``state``, ``speed``, ``width``, ``fec`` (active FEC mode),
      ``recommendation`` (Troubleshooting Info);
    * errors and BER (mlxlink ``-c`` only): ``effective_ber``, ``raw_ber``, ``symbol_ber`` (as
      numbers, e.g. 1.5e-254), ``effective_errors``, ``symbol_errors``,
      ``raw_errors_per_lane``, ``raw_ber_per_lane``;
    * ``raw``: values kept as printed because their unit is not established (ibdiagnet's bare
      ``RXnPower`` numbers, say), ``{column: text}``;
    * ``node_guid``/``port_num``: the port, when the output names it (db_csv rows do).
    """

    node_guid: str | None = None
    port_num: int | None = None
    identifier: str | None = None
    technology: str | None = None
    cable_type: str | None = None
    vendor: str | None = None
    part_number: str | None = None
    serial_number: str | None = None
    revision: str | None = None
    length_m: float | None = None
    wavelength_nm: int | None = None
    firmware: str | None = None
    supported_speeds: str | None = None
    temperature_c: float | None = None
    temperature_low_c: float | None = None
    temperature_high_c: float | None = None
    voltage_mv: float | None = None
    bias_ma: list[float] = field(default_factory=list)
    rx_power_dbm: list[float] = field(default_factory=list)
    rx_power_low_dbm: float | None = None
    rx_power_high_dbm: float | None = None
    tx_power_dbm: list[float] = field(default_factory=list)
    tx_power_low_dbm: float | None = None
    tx_power_high_dbm: float | None = None
    alarms: list[str] = field(default_factory=list)
    state: str | None = None
    speed: str | None = None
    width: str | None = None
    fec: str | None = None
    recommendation: str | None = None
    effective_ber: float | None = None
    raw_ber: float | None = None
    symbol_ber: float | None = None
    effective_errors: int | None = None
    symbol_errors: int | None = None
    raw_errors_per_lane: list[int] = field(default_factory=list)
    raw_ber_per_lane: list[float] = field(default_factory=list)
    raw: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        """JSON-ready: every field (lists and dicts copied)."""
        return asdict(self)

    @property
    def has_module(self) -> bool:
        """True when the reading names a module (vendor, part or serial number)."""
        return any((self.vendor, self.part_number, self.serial_number))


_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")


def is_na(text: str | None) -> bool:
    """True for a value the tools print when they have none (``N/A``, ``NA``, empty)."""
    return text is None or text.strip() in NA_WORDS


def to_float(text: str, unit_suffixes: tuple[str, ...] = ()) -> float | None:
    """``text`` as a number, after dropping one of ``unit_suffixes`` (case-insensitive, e.g.
    ``("C",)`` for ``"35C"``); None when it does not read as one, or reads as infinity
    (``1e999``: JSON has no infinity and PostgreSQL's ``jsonb`` refuses the ``Infinity`` Python
    writes). Pure."""
    value = text.strip()
    for suffix in unit_suffixes:
        if value.lower().endswith(suffix.lower()):
            value = value[: -len(suffix)].strip()
            break
    if not _NUMBER.match(value):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def clean_text(text: str | None) -> str | None:
    """A printed text value stripped (padding of fixed-width EEPROM fields), None when N/A."""
    if is_na(text):
        return None
    return text.strip() or None
