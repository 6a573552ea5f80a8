"""The UFM API's input rules (``ufm.inputs``, pure): PKeys, GUIDs, booleans, memberships, QoS,
host lists and port names, each refusal naming its field."""

from __future__ import annotations

import pytest

from ufm.inputs import (
    UfmInputError,
    mtu_limit_of,
    parse_add_guids,
    parse_add_hosts,
    parse_bool,
    parse_empty_pkey,
    parse_guid,
    parse_pkey,
    parse_port_name,
    parse_positive,
    parse_qos_update,
    parse_remove_guids,
    parse_unhealthy_ports,
    pkey_text,
    rate_limit_of,
    ufm_guid,
)

G1, G2 = "1070fd0300176625", "1070FD0300176626"


@pytest.mark.parametrize("text", ["0x0005", "0x5", "0X5", "5", " 0x5 ", "0005"])
def test_pkey_forms_are_hexadecimal(text):
    assert parse_pkey(text) == 5


def test_pkey_without_0x_is_hex_and_the_range_is_exclusive():
    assert parse_pkey("10") == 0x10
    assert parse_pkey("0x7ffe") == 0x7FFE and parse_pkey("7fff", allow_default=True) == 0x7FFF
    for bad, why in [("0x0", "exclusive"), ("0x7fff", "exclusive"), ("0x8005", "exclusive"),
                     ("0x12345", "not a hexadecimal"), ("0xg1", "not a hexadecimal"), ("", "not a hexadecimal")]:  # fmt: skip
        with pytest.raises(UfmInputError, match=why) as err:
            parse_pkey(bad)
        assert err.value.field == "pkey" and str(err.value).startswith("pkey: ")
    with pytest.raises(UfmInputError, match="hexadecimal string"):
        parse_pkey(5)  # a JSON number: decimal or hex would be a guess
    assert pkey_text(0x7FFF) == "0x7fff" and pkey_text(5) == "0x5"


def test_guid_rules():
    assert parse_guid(G1) == "0x1070fd0300176625"
    assert parse_guid(G2) == "0x1070fd0300176626"  # any case
    assert parse_guid("0x" + G1) == "0x1070fd0300176625"
    assert parse_guid("00001070fd0300176625") == "0x1070fd0300176625"  # 20 digits, fits 64 bits
    assert ufm_guid("0x0002c90300a1b2c3") == "0002c90300a1b2c3"
    for bad in [
        "1070fd030017662",
        "1070fd03001766251070f",
        "1070fd030017662z",
        "10000000000000000000",
        "0" * 16,
        17,
    ]:
        with pytest.raises(UfmInputError) as err:
            parse_guid(bad)
        assert err.value.field == "guids"


def test_booleans_take_json_and_the_slurm_plugins_strings():
    assert parse_bool(True, "index0") is True and parse_bool("False", "index0") is False
    assert parse_bool("TRUE", "ip_over_ib") is True
    for bad in [1, "yes", None, "t"]:
        with pytest.raises(UfmInputError, match="index0: .* is not true or false"):
            parse_bool(bad, "index0")


def test_add_guids_defaults_memberships_and_errors():
    req = parse_add_guids({"pkey": "0x000A", "guids": [G1, G2]})
    assert (req.pkey, req.index0, req.ip_over_ib) == (0xA, None, None)  # defaults apply on create
    assert req.members == [("0x1070fd0300176625", "full"), ("0x1070fd0300176626", "full")]
    req = parse_add_guids({"pkey": "5", "guids": [G1, G2], "membership": "Full", "memberships": ["limited", "FULL"],
                           "index0": "true", "ip_over_ib": False})  # fmt: skip
    assert req.members == [("0x1070fd0300176625", "limited"), ("0x1070fd0300176626", "full")]
    assert (req.index0, req.ip_over_ib) == (True, False)
    assert parse_add_guids({"pkey": "5", "guids": [G1, G1.upper()]}).members == [
        ("0x1070fd0300176625", "full")
    ]
    cases = [
        ({"guids": [G1]}, "pkey"),
        ({"pkey": "5"}, "guids"),
        ({"pkey": "5", "guids": G1}, "guids"),
        ({"pkey": "5", "guids": [G1], "membership": "both"}, "membership"),
        ({"pkey": "5", "guids": [G1, G2], "memberships": ["full"]}, "memberships"),
        ({"pkey": "5", "guids": [G1], "memberships": "full"}, "memberships"),
        ({"pkey": "5", "guids": [G1, G1], "memberships": ["full", "limited"]}, "guids"),
        ({"pkey": "5", "guids": [G1], "index0": 1}, "index0"),
        ([G1], "body"),
    ]
    for body, field in cases:
        with pytest.raises(UfmInputError) as err:
            parse_add_guids(body)
        assert err.value.field == field, (body, str(err.value))


def test_remove_empty_qos_hosts_and_paging():
    assert parse_remove_guids({"pkey": "0x5", "guids": [G1, G1]}).guids == ["0x1070fd0300176625"]
    empty = parse_empty_pkey({"pkey": "0x12", "index0": False, "ip_over_ib": True, "mtu_limit": 2,
                              "service_level": 0, "rate_limit": 2.5, "partition_name": "user_partition"})  # fmt: skip
    assert (empty.pkey, empty.name, empty.qos.mtu, empty.qos.sl, empty.qos.rate) == (
        0x12,
        "user_partition",
        4,
        0,
        2,
    )
    assert parse_qos_update({"pkey": "0x5", "mtu_limit": 4.0, "rate_limit": 200}).qos.__dict__ == {
        "mtu": 5, "sl": None, "rate": 17,
    }  # fmt: skip
    for body, field in [({"pkey": "0x5", "mtu_limit": 3}, "mtu_limit"), ({"pkey": "0x5", "rate_limit": 15}, "rate_limit"),
                        ({"pkey": "0x5", "service_level": 16}, "service_level"),
                        ({"pkey": "0x5", "service_level": 1.5}, "service_level"),
                        ({"pkey": "0x5", "partition_name": "1st"}, "partition_name")]:  # fmt: skip
        with pytest.raises(UfmInputError) as err:
            parse_empty_pkey(body)
        assert err.value.field == field
    assert (mtu_limit_of(None), mtu_limit_of(5), rate_limit_of(None), rate_limit_of(2), rate_limit_of(17)) == (
        2, 4, 10, 2.5, 200,
    )  # fmt: skip
    hosts = parse_add_hosts(
        {"hosts_names": "node[01-04]", "pkey": "0x5", "ip_over_ib": "True", "index0": False}
    )
    assert (hosts.hosts, hosts.pkey, hosts.ip_over_ib, hosts.index0) == ("node[01-04]", 5, True, False)
    with pytest.raises(UfmInputError, match="hosts_names"):
        parse_add_hosts({"hosts_names": " ", "pkey": "0x5"})
    assert parse_positive("3", "rpp") == 3 and parse_positive(None, "rpp") is None
    for bad in ["0", "-1", "x", "1" * 13]:
        with pytest.raises(UfmInputError, match="rpp"):
            parse_positive(bad, "rpp")


def test_unhealthy_ports_body():
    req = parse_unhealthy_ports(
        {"ports": ["0c42a10300a00200_1", "0x0c42a10300a00200_1"], "ports_policy": "unhealthy"}
    )
    assert (req.ports, req.policy, req.action) == ([("0x0c42a10300a00200", 1)], "UNHEALTHY", "isolate")
    assert parse_port_name("0c42a10300a00200_36") == ("0x0c42a10300a00200", 36)
    for body, field in [({"ports": [], "ports_policy": "HEALTHY"}, "ports"),
                        ({"ports": ["0c42a10300a00200"], "ports_policy": "HEALTHY"}, "ports"),
                        ({"ports": ["0c42a10300a00200_0"], "ports_policy": "HEALTHY"}, "ports"),
                        ({"ports": ["0c42a10300a00200_1"], "ports_policy": "SICK"}, "ports_policy"),
                        ({"ports": ["0c42a10300a00200_1"], "ports_policy": "HEALTHY", "action": "reboot"}, "action")]:  # fmt: skip
        with pytest.raises(UfmInputError) as err:
            parse_unhealthy_ports(body)
        assert err.value.field == field
