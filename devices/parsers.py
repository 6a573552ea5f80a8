"""From SNMP tables to plain records (pure: no Django, no I/O).

Input is what ``devices.collectors.snmp.Session.walk`` returns, ``{column OID: {index: value}}``
(values as ``devices.collectors.snmp.plain`` gives them: ints, bytes, dotted strings), and
``get``'s ``{oid: value}``. Semantics: SNMPv2-MIB, IF-MIB (RFC 2863), ENTITY-MIB (RFC 6933),
ENTITY-SENSOR-MIB (RFC 3433), LLDP-MIB (IEEE 802.1AB), IEEE8021-PFC-MIB (see ``devices.mibs``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import mibs

#: IF-MIB ifAdminStatus/ifOperStatus values
IF_STATUS = {
    1: "up",
    2: "down",
    3: "testing",
    4: "unknown",
    5: "dormant",
    6: "notPresent",
    7: "lowerLayerDown",
}

#: ENTITY-SENSOR-MIB EntitySensorDataType → (kind, unit)
SENSOR_TYPES = {
    1: ("other", ""),
    2: ("other", ""),
    3: ("voltage", "V AC"),
    4: ("voltage", "V DC"),
    5: ("current", "A"),
    6: ("power", "W"),
    7: ("frequency", "Hz"),
    8: ("temperature", "°C"),
    9: ("humidity", "%RH"),
    10: ("fan", "RPM"),
    11: ("airflow", "CMM"),
    12: ("state", ""),
}
#: EntitySensorDataScale → power of ten (RFC 3433 lists exa (14) before peta (15))
SENSOR_SCALE = {
    1: -24, 2: -21, 3: -18, 4: -15, 5: -12, 6: -9, 7: -6, 8: -3, 9: 0,
    10: 3, 11: 6, 12: 9, 13: 12, 14: 18, 15: 15, 16: 21, 17: 24,
}  # fmt: skip
#: EntitySensorStatus
SENSOR_STATUS = {1: "ok", 2: "unavailable", 3: "nonoperational"}
#: entPhysicalClass values Weft cares about
ENT_CHASSIS, ENT_PSU, ENT_FAN = 3, 6, 7

#: Private enterprise numbers (sysObjectID 1.3.6.1.4.1.<n>) of the vendors in the recordings
VENDORS = {
    9: "Cisco",
    8072: "Net-SNMP",
    30065: "Arista",
    33049: "Mellanox",
    40310: "Cumulus",
    674: "Dell",
    6027: "Dell (Force10)",
    2636: "Juniper",
}


class ParseError(ValueError):
    """A table the parser cannot make sense of (e.g. no sysObjectID)."""


def text(value) -> str:
    """An OCTET STRING as text (UTF-8, undecodable bytes replaced, NULs and outer spaces dropped)."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.replace(b"\x00", b"").decode("utf-8", "replace").strip()
    return str(value).strip()


def mac(value) -> str:
    """Six octets as ``aa:bb:cc:dd:ee:ff``; anything else as :func:`text`."""
    if isinstance(value, bytes) and len(value) == 6:
        return ":".join(f"{b:02x}" for b in value)
    return text(value)


@dataclass
class Identity:
    """Who a device is: SNMPv2-MIB system group and the ENTITY-MIB chassis (class 3; the first
    one by index). ``vendor`` from the sysObjectID's enterprise number, "" when unknown."""

    sys_descr: str
    sys_object_id: str
    sys_name: str
    uptime_ticks: int | None
    vendor: str = ""
    model: str = ""
    serial: str = ""
    chassis_descr: str = ""
    engine_id: str = ""


def identity(system: dict[str, object], entity: dict[str, dict[str, object]] | None = None) -> Identity:
    """:class:`Identity` from a GET of ``mibs.SYSTEM`` and a walk of ``mibs.ENTITY`` (may be empty).

    Raises:
        ParseError: the agent gave no sysObjectID (not an SNMPv2-MIB agent, or a view without
            the system group).
    """
    oid = system.get(mibs.SYS_OBJECT_ID)
    if not oid:
        raise ParseError("the agent did not answer sysObjectID.0 (no system group in its view)")
    oid = str(oid)
    vendor = ""
    parts = oid.split(".")
    if oid.startswith("1.3.6.1.4.1.") and len(parts) > 6:
        vendor = VENDORS.get(int(parts[6]), f"enterprise {parts[6]}")
    ident = Identity(
        sys_descr=text(system.get(mibs.SYS_DESCR)),
        sys_object_id=oid,
        sys_name=text(system.get(mibs.SYS_NAME)),
        uptime_ticks=system.get(mibs.SYS_UPTIME) if isinstance(system.get(mibs.SYS_UPTIME), int) else None,
        vendor=vendor,
    )
    engine = system.get(mibs.SNMP_ENGINE_ID)
    if isinstance(engine, bytes):
        ident.engine_id = engine.hex()
    entity = entity or {}
    classes = entity.get(mibs.ENT_CLASS, {})
    chassis = sorted((int(i) for i, c in classes.items() if c == ENT_CHASSIS), key=int)
    if chassis:
        i = str(chassis[0])
        ident.model = text(entity.get(mibs.ENT_MODEL, {}).get(i)) or text(
            entity.get(mibs.ENT_NAME, {}).get(i)
        )
        ident.serial = text(entity.get(mibs.ENT_SERIAL, {}).get(i))
        ident.chassis_descr = text(entity.get(mibs.ENT_DESCR, {}).get(i))
        mfg = text(entity.get(mibs.ENT_MFG, {}).get(i))
        if mfg and not vendor:
            ident.vendor = mfg
    return ident


@dataclass
class InterfaceRecord:
    """One IF-MIB interface. ``name`` = ifName (else ifDescr); ``speed_mbps`` = ifHighSpeed (else
    ifSpeed / 10**6; None when 0 or absent); statuses as :data:`IF_STATUS` names ("" absent);
    ``hc`` the octet/packet counters are the 64-bit ifHC* ones; ``counters`` keyed by
    ``telemetry.semantics.ETHERNET_COUNTERS`` (None: not read); ``discontinuity`` the
    ifCounterDiscontinuityTime (TimeTicks) when the agent has it."""

    if_index: int
    name: str
    descr: str = ""
    alias: str = ""
    if_type: int | None = None
    speed_mbps: float | None = None
    admin_status: str = ""
    oper_status: str = ""
    hc: bool = False
    counters: dict[str, int | None] = field(default_factory=dict)
    discontinuity: int | None = None


def needs_32bit(tables: dict[str, dict[str, object]]) -> bool:
    """Whether some interface of a walk lacks the 64-bit octet counters (then walk
    ``mibs.COUNTERS_32`` too)."""
    indexes = (
        set(tables.get(mibs.IF_NAME, {}))
        | set(tables.get(mibs.IF_DESCR, {}))
        | set(tables.get(mibs.IF_OPER, {}))
    )
    hc = tables.get(mibs.IF_HC_IN_OCTETS, {})
    return any(i not in hc for i in indexes)


def interfaces(
    tables: dict[str, dict[str, object]], known: dict[int, dict] | None = None
) -> list[InterfaceRecord]:
    """Interfaces (sorted by ifIndex) from walks of the ifTable/ifXTable columns of ``devices.mibs``
    (and of ``mibs.PFC`` when the agent has IEEE8021-PFC-MIB: its ports are taken as ifIndexes,
    as on the Arista EOS recordings, where bridge port n is interface n).

    ``known`` ``{ifIndex: {"name", "descr", "alias", "if_type", "speed_mbps"}}`` fills in the
    inventory columns a poll did not walk (``mibs.INTERFACE_INVENTORY`` is read on inventory
    polls only: names and speeds change rarely)."""
    known = known or {}

    def col(oid):
        return tables.get(oid, {})

    indexes = set(col(mibs.IF_DESCR)) | set(col(mibs.IF_NAME)) | set(col(mibs.IF_OPER))
    out = []
    for idx in sorted(indexes, key=lambda i: tuple(int(x) for x in i.split("."))):
        hc = idx in col(mibs.IF_HC_IN_OCTETS) and idx in col(mibs.IF_HC_OUT_OCTETS)
        high = col(mibs.IF_HIGH_SPEED).get(idx)
        low = col(mibs.IF_SPEED).get(idx)
        if isinstance(high, int) and high > 0:
            speed = float(high)
        elif isinstance(low, int) and 0 < low < 0xFFFFFFFF:
            speed = low / 1e6
        else:
            speed = None
        if hc:
            rate = (mibs.IF_HC_OUT_OCTETS, mibs.IF_HC_IN_OCTETS, mibs.IF_HC_OUT_UCAST, mibs.IF_HC_IN_UCAST)
        else:
            rate = (mibs.IF_OUT_OCTETS, mibs.IF_IN_OCTETS, mibs.IF_OUT_UCAST, mibs.IF_IN_UCAST)
        events = (mibs.IF_IN_DISCARDS, mibs.IF_IN_ERRORS, mibs.IF_OUT_DISCARDS, mibs.IF_OUT_ERRORS)
        events += (mibs.PFC_INDICATIONS, mibs.PFC_REQUESTS)
        names = (
            "out_octets", "in_octets", "out_pkts", "in_pkts",
            "in_discards", "in_errors", "out_discards", "out_errors", "pfc_in", "pfc_out",
        )  # fmt: skip
        counters = {}
        for name, oid in zip(names, rate + events, strict=True):
            v = col(oid).get(idx)
            counters[name] = v if isinstance(v, int) else None
        disc = col(mibs.IF_DISCONTINUITY).get(idx)
        descr = text(col(mibs.IF_DESCR).get(idx))
        prior = known.get(int(idx.split(".")[0]))
        inventoried = mibs.IF_DESCR in tables or mibs.IF_NAME in tables
        if not inventoried and prior is not None:
            descr = prior["descr"]
            name, alias, if_type, speed = prior["name"], prior["alias"], prior["if_type"], prior["speed_mbps"]
        else:
            name = text(col(mibs.IF_NAME).get(idx)) or descr or f"ifIndex {idx}"
            alias = text(col(mibs.IF_ALIAS).get(idx))
            if_type = col(mibs.IF_TYPE).get(idx) if isinstance(col(mibs.IF_TYPE).get(idx), int) else None
        out.append(
            InterfaceRecord(
                if_index=int(idx.split(".")[0]),
                name=name,
                descr=descr,
                alias=alias,
                if_type=if_type,
                speed_mbps=speed,
                admin_status=IF_STATUS.get(col(mibs.IF_ADMIN).get(idx), ""),
                oper_status=IF_STATUS.get(col(mibs.IF_OPER).get(idx), ""),
                hc=hc,
                counters=counters,
                discontinuity=disc if isinstance(disc, int) else None,
            )
        )
    return out


@dataclass
class SensorRecord:
    """One ENTITY-SENSOR-MIB sensor: ``index`` (entPhysicalIndex), ``name`` (entPhysicalName, else
    entPhysicalDescr), ``kind``/``unit`` from its type (:data:`SENSOR_TYPES`; a fan-named sensor of
    type other/unknown is a ``fan``), ``raw`` entPhySensorValue, ``value`` = raw × 10**(3·scale
    exponent) × 10**-precision (None when unavailable), ``status`` (:data:`SENSOR_STATUS`),
    ``component`` ``fan``/``psu`` when the sensor or an entity containing it is one, else ""."""

    index: int
    name: str
    kind: str
    unit: str
    sensor_type: int
    scale: int
    precision: int
    raw: int | None
    value: float | None
    status: str
    component: str = ""


def sensor_value(raw: int | None, scale: int, precision: int) -> float | None:
    """entPhySensorValue in its unit: ``raw × 10**SENSOR_SCALE[scale] × 10**-precision`` (RFC 3433;
    precision -8..9, negative precision = trailing zeros). Rounded to the digits it carries."""
    if raw is None:
        return None
    exp = SENSOR_SCALE.get(scale, 0) - precision
    value = raw * (10.0**exp)
    return round(value, max(0, -exp)) if exp < 0 else value


def sensors(
    tables: dict[str, dict[str, object]],
    entity: dict[str, dict[str, object]] | None = None,
    known: dict[int, tuple[int, int, int]] | None = None,
) -> list[SensorRecord]:
    """Sensors (sorted by index) from walks of ``mibs.SENSORS`` and ``mibs.ENTITY_TREE``.

    A poll that walked only the readings (``mibs.SENSOR_READINGS``) passes ``known``
    ``{index: (type, scale, precision)}`` from the stored sensors (static columns); names and
    components then come from the stored rows (``devices.services.poll``)."""
    entity = entity or {}
    if mibs.SENSOR_TYPE not in tables and known:
        tables = dict(tables)
        present = tables.get(mibs.SENSOR_VALUE, {})
        tables[mibs.SENSOR_TYPE] = {str(i): k[0] for i, k in known.items() if str(i) in present}
        tables[mibs.SENSOR_SCALE] = {str(i): k[1] for i, k in known.items()}
        tables[mibs.SENSOR_PRECISION] = {str(i): k[2] for i, k in known.items()}
    names, descrs = entity.get(mibs.ENT_NAME, {}), entity.get(mibs.ENT_DESCR, {})
    classes, parents = entity.get(mibs.ENT_CLASS, {}), entity.get(mibs.ENT_CONTAINED_IN, {})
    types = tables.get(mibs.SENSOR_TYPE, {})
    out = []
    for idx in sorted(types, key=lambda i: int(i.split(".")[0])):
        stype = types[idx] if isinstance(types[idx], int) else 2
        scale = tables.get(mibs.SENSOR_SCALE, {}).get(idx, 9)
        prec = tables.get(mibs.SENSOR_PRECISION, {}).get(idx, 0)
        raw = tables.get(mibs.SENSOR_VALUE, {}).get(idx)
        status = SENSOR_STATUS.get(tables.get(mibs.SENSOR_STATUS, {}).get(idx), "unknown")
        name = text(names.get(idx)) or text(descrs.get(idx)) or f"sensor {idx}"
        kind, unit = SENSOR_TYPES.get(stype, ("other", ""))
        if kind == "other" and "fan" in name.lower():
            kind, unit = "fan", "RPM"
        component = ""
        seen, cur = set(), idx
        while cur and cur not in seen and len(seen) < 16:  # the entity itself, then its containers
            seen.add(cur)
            cls = classes.get(cur)
            if cls == ENT_FAN:
                component = "fan"
                break
            if cls == ENT_PSU:
                component = "psu"
                break
            parent = parents.get(cur)
            cur = str(parent) if isinstance(parent, int) and parent else None
        raw = raw if isinstance(raw, int) else None
        out.append(
            SensorRecord(
                index=int(idx.split(".")[0]),
                name=name,
                kind=kind,
                unit=unit,
                sensor_type=stype,
                scale=scale if isinstance(scale, int) else 9,
                precision=prec if isinstance(prec, int) else 0,
                raw=raw,
                value=None if status == "unavailable" else sensor_value(raw, scale, prec),
                status=status,
                component=component,
            )
        )
    return out


@dataclass(frozen=True)
class NeighbourRecord:
    """One LLDP remote system seen on a local port: ``if_index`` of the local interface (None when
    the local port cannot be matched to one), ``local_port`` its LLDP name, ``chassis_id`` (MAC as
    ``aa:bb:…`` for subtype macAddress), ``port_id`` (MAC or text), ``port_descr``, ``sys_name``."""

    if_index: int | None
    local_port: str
    chassis_id: str
    port_id: str
    port_descr: str
    sys_name: str


def neighbours(tables: dict[str, dict[str, object]], ifaces: list[InterfaceRecord]) -> list[NeighbourRecord]:
    """LLDP neighbours from walks of ``mibs.LLDP`` (lldpRemTable index: timeMark.localPortNum.remIndex).

    The local port number is matched to an interface by its lldpLocPortId or lldpLocPortDesc
    equal to an ifName/ifDescr, else taken as an ifIndex when one exists (LLDP-MIB leaves the
    numbering to the agent: SONiC and EOS number ports as their ifIndex)."""
    by_name: dict[str, int] = {}
    for i in ifaces:
        for n in (i.name, i.descr):
            if n:
                by_name.setdefault(n, i.if_index)
    if_indexes = {i.if_index for i in ifaces}
    loc_id, loc_desc = tables.get(mibs.LLDP_LOC_PORT_ID, {}), tables.get(mibs.LLDP_LOC_PORT_DESC, {})
    out = set()
    for idx, chassis in tables.get(mibs.LLDP_REM_CHASSIS, {}).items():
        parts = idx.split(".")
        if len(parts) < 3:
            continue
        port_num = parts[1]
        local = text(loc_id.get(port_num)) or text(loc_desc.get(port_num))
        if_index = by_name.get(local) or by_name.get(text(loc_desc.get(port_num)))
        if if_index is None and int(port_num) in if_indexes:
            if_index = int(port_num)
        csub = tables.get(mibs.LLDP_REM_CHASSIS_SUBTYPE, {}).get(idx)
        psub = tables.get(mibs.LLDP_REM_PORT_SUBTYPE, {}).get(idx)
        port = tables.get(mibs.LLDP_REM_PORT, {}).get(idx)
        out.add(
            NeighbourRecord(
                if_index=if_index,
                local_port=local or port_num,
                chassis_id=mac(chassis) if csub == 4 else text(chassis),
                port_id=mac(port) if psub == 3 else text(port),
                port_descr=text(tables.get(mibs.LLDP_REM_PORT_DESC, {}).get(idx)),
                sys_name=text(tables.get(mibs.LLDP_REM_SYS_NAME, {}).get(idx)),
            )
        )
    return sorted(out, key=lambda n: (n.if_index or 0, n.local_port, n.chassis_id, n.port_id))


@dataclass
class TrapRecord:
    """A received notification: ``trap_oid`` (snmpTrapOID.0), for linkDown/linkUp the interface
    (``if_index`` from the ifIndex varbind) and its ``admin_status``/``oper_status`` names when
    sent; ``varbinds`` ``[(oid, value as text)]`` for the event's details."""

    trap_oid: str
    if_index: int | None = None
    admin_status: str = ""
    oper_status: str = ""
    varbinds: list[tuple[str, str]] = field(default_factory=list)

    @property
    def link(self) -> str:
        """``"down"``/``"up"`` for linkDown/linkUp, else ""."""
        return {mibs.TRAP_LINK_DOWN: "down", mibs.TRAP_LINK_UP: "up"}.get(self.trap_oid, "")


def trap(varbinds: list[tuple[str, object]]) -> TrapRecord:
    """:class:`TrapRecord` of an SNMPv2 notification's varbinds (RFC 3416 4.2.6: sysUpTime.0,
    snmpTrapOID.0, then the objects; IF-MIB linkDown/linkUp carry ifIndex, ifAdminStatus,
    ifOperStatus of the interface, the index as the OIDs' suffix).

    Raises:
        ParseError: no snmpTrapOID.0 varbind.
    """
    rec = None
    shown = []
    for oid, value in varbinds:
        shown.append((oid, text(value) if isinstance(value, bytes) else str(value)))
        if oid == mibs.SNMP_TRAP_OID:
            rec = TrapRecord(trap_oid=str(value))
    if rec is None:
        raise ParseError("notification without snmpTrapOID.0")
    rec.varbinds = shown
    for oid, value in varbinds:
        for prefix, attr in (
            (mibs.IF_INDEX, "if_index"),
            (mibs.IF_ADMIN, "admin_status"),
            (mibs.IF_OPER, "oper_status"),
        ):
            if oid.startswith(prefix + "."):
                suffix = oid[len(prefix) + 1 :]
                if rec.if_index is None and suffix.isdigit():
                    rec.if_index = int(suffix)
                if attr == "if_index" and isinstance(value, int):
                    rec.if_index = value
                elif attr != "if_index" and isinstance(value, int):
                    setattr(rec, attr, IF_STATUS.get(value, ""))
    return rec
