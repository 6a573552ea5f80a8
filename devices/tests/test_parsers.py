"""Pure parsers of SNMP tables and traps (no agent, no database)."""

from __future__ import annotations

import pytest

from devices import mibs, parsers


def test_sensor_value_scale_and_precision():
    assert parsers.sensor_value(390, 9, 1) == 39.0  # units, one decimal
    assert parsers.sensor_value(12500, 8, 0) == 12.5  # milli
    assert parsers.sensor_value(3, 10, 0) == 3000.0  # kilo
    assert parsers.sensor_value(5, 9, -2) == 500.0  # negative precision: trailing zeros
    assert parsers.sensor_value(None, 9, 0) is None


def test_interfaces_hc_fallback_speed_and_known_names():
    t = {
        mibs.IF_NAME: {"1": b"swp1", "2": b"swp2"},
        mibs.IF_DESCR: {"1": b"swp1", "2": b"swp2"},
        mibs.IF_HIGH_SPEED: {"1": 100000, "2": 0},
        mibs.IF_SPEED: {"1": 4294967295, "2": 1000000000},
        mibs.IF_ADMIN: {"1": 1, "2": 1},
        mibs.IF_OPER: {"1": 1, "2": 7},
        mibs.IF_HC_IN_OCTETS: {"1": 2**64 - 1},
        mibs.IF_HC_OUT_OCTETS: {"1": 5},
        mibs.IF_IN_OCTETS: {"2": 7},
    }
    assert parsers.needs_32bit(t)
    a, b = parsers.interfaces(t)
    assert (a.name, a.speed_mbps, a.hc, a.counters["in_octets"]) == ("swp1", 100000.0, True, 2**64 - 1)
    assert (b.name, b.speed_mbps, b.hc, b.counters["in_octets"], b.oper_status) == (
        "swp2",
        1000.0,
        False,
        7,
        "lowerLayerDown",
    )
    state = {
        mibs.IF_OPER: {"1": 2},
        mibs.IF_ADMIN: {"1": 1},
        mibs.IF_HC_IN_OCTETS: {"1": 9},
        mibs.IF_HC_OUT_OCTETS: {"1": 9},
    }
    known = {1: {"name": "swp1", "descr": "swp1", "alias": "to spine", "if_type": 6, "speed_mbps": 100000.0}}
    [c] = parsers.interfaces(state, known)
    assert (c.name, c.alias, c.speed_mbps, c.oper_status) == ("swp1", "to spine", 100000.0, "down")


def test_neighbours_match_local_ports_by_name_and_format_macs():
    ifaces = [parsers.InterfaceRecord(if_index=19, name="Eth1/19")]
    t = {
        mibs.LLDP_LOC_PORT_ID: {"7": b"Eth1/19"},
        mibs.LLDP_REM_CHASSIS_SUBTYPE: {"0.7.1": 4},
        mibs.LLDP_REM_CHASSIS: {"0.7.1": bytes.fromhex("0c42a1b2c3d4")},
        mibs.LLDP_REM_PORT_SUBTYPE: {"0.7.1": 5},
        mibs.LLDP_REM_PORT: {"0.7.1": b"swp31"},
        mibs.LLDP_REM_SYS_NAME: {"0.7.1": b"spine-2"},
    }
    [n] = parsers.neighbours(t, ifaces)
    assert (n.if_index, n.local_port, n.chassis_id, n.port_id, n.sys_name) == (
        19,
        "Eth1/19",
        "0c:42:a1:b2:c3:d4",
        "swp31",
        "spine-2",
    )


def test_link_down_trap():
    rec = parsers.trap([
        ("1.3.6.1.2.1.1.3.0", 12345),
        (mibs.SNMP_TRAP_OID, mibs.TRAP_LINK_DOWN),
        (f"{mibs.IF_INDEX}.7", 7),
        (f"{mibs.IF_ADMIN}.7", 1),
        (f"{mibs.IF_OPER}.7", 2),
    ])  # fmt: skip
    assert (rec.link, rec.if_index, rec.admin_status, rec.oper_status) == ("down", 7, "up", "down")
    with pytest.raises(parsers.ParseError):
        parsers.trap([("1.3.6.1.2.1.1.3.0", 1)])


def test_identity_needs_sys_object_id():
    with pytest.raises(parsers.ParseError, match="sysObjectID"):
        parsers.identity({mibs.SYS_DESCR: b"x"})
    ident = parsers.identity(
        {mibs.SYS_OBJECT_ID: "1.3.6.1.4.1.30065.1.3011.7150.3282.52", mibs.SYS_NAME: b"leaf"}
    )
    assert (ident.vendor, ident.sys_name) == ("Arista", "leaf")
