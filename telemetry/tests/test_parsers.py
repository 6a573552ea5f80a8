"""Parsers of perfquery and ibqueryerrors on every real output in ``$WEFT_REALDATA`` (pure, no DB)."""

from __future__ import annotations

import pytest

from telemetry.parsers import ParseError
from telemetry.parsers.ibqueryerrors import parse_ibqueryerrors
from telemetry.parsers.perfquery import merge_port_counters, parse_perfquery
from tests.support.perfquery_text import PLAIN_LID133

# Expected values per real file: (kind, lid, port, capmask, capmask2, {field: value}) per block.
PERFQUERY_EXPECTED = {
    "tacc_stats_2011_perfquery_oldnames.txt": [
        (
            "counters",
            936,
            1,
            None,
            None,
            {
                "symbol_errors": 0,
                "link_error_recovery": 0,
                "rcv_switch_relay_errors": 0,
                "xmit_discards": 0,
                "local_link_integrity_errors": 0,
                "excessive_buffer_overrun_errors": 0,
                "xmit_data": 905972985,
                "rcv_data": 2411533950,
                "xmit_pkts": 22945597,
                "rcv_pkts": 26264095,
            },
        )
    ],
    "treydock_perfquery_x_0x506b4b03005c2740.out": [
        (
            "extended",
            2052,
            1,
            0x5300,
            0x2,
            {
                "xmit_data": 178791657177235,
                "rcv_data": 178762341961629,
                "xmit_pkts": 393094651266,
                "rcv_pkts": 387654829341,
                "unicast_xmit_pkts": 387471005571,
                "multicast_xmit_pkts": 5623645694,
                "link_downed": 1,
                "rcv_switch_relay_errors": 7,
                "xmit_discards": 20046,
                "xmit_wait": 41864608,
                "qp1_dropped": 0,
            },
        )
    ],
    "treydock_perfquery_x_0x7cfe9003003b4b96.out": [
        (
            "extended",
            133,
            1,
            0x5A00,
            0x0,
            {
                "xmit_data": 37108676853855,
                "rcv_data": 37225401952885,
                "multicast_rcv_pkts": 3732373137,
                "xmit_wait": 0,
            },
        )
    ],
    "treydock_perfquery_x_0x7cfe9003003b4bde.out": [
        (
            "extended",
            134,
            1,
            0x5A00,
            0x0,
            {"xmit_data": 9049592493976, "rcv_pkts": 33038722564, "unicast_rcv_pkts": 29306563974},
        )
    ],
    "treydock_perfquery_x_0x7cfe9003009ce5b0.out": [
        ("extended", 1719, 1, 0x5300, 0x2, {"xmit_data": 36298026860928, "xmit_wait": 22730501}),
        (
            "extended",
            1719,
            2,
            0x5300,
            0x2,
            {"rcv_data": 39078804993378, "xmit_wait": 36510964, "multicast_xmit_pkts": 0},
        ),
    ],
    "treydock_perfquery_E_0x506b4b03005c2740-1.out": [
        ("rcv_error_details", 2052, 1, None, None, {"local_physical_errors": 0, "looping_errors": 0})
    ],
    "treydock_perfquery_E_0x7cfe9003003b4b96-1.out": [
        ("rcv_error_details", 133, 1, None, None, {"malformed_pkt_errors": 0})
    ],
    "treydock_perfquery_E_0x7cfe9003003b4bde-1.out": [
        ("rcv_error_details", 134, 1, None, None, {"dlid_mapping_errors": 0})
    ],
    "treydock_perfquery_E_0x7cfe9003009ce5b0-1.out": [
        ("rcv_error_details", 1719, 1, None, None, {"vl_mapping_errors": 0})
    ],
    "treydock_perfquery_E_0x7cfe9003009ce5b0-2.out": [
        ("rcv_error_details", 1719, 2, None, None, {"buffer_overrun_errors": 0})
    ],
}


def _files(realdata, sub):
    files = sorted(p for p in (realdata / sub).iterdir() if p.is_file())
    assert files, f"no files in {realdata / sub}"
    return files


def test_every_perfquery_file_parses_with_expected_values(realdata):
    seen = set()
    for path in _files(realdata, "perfquery"):
        blocks = parse_perfquery(path.read_text(), source=path.name)
        assert blocks, path.name
        expected = PERFQUERY_EXPECTED.get(path.name)
        assert expected is not None, f"{path.name}: add expected values for this new real file"
        assert len(blocks) == len(expected), path.name
        for block, (kind, lid, port, cap, cap2, values) in zip(blocks, expected, strict=True):
            assert (block.kind, block.lid, block.port, block.capmask, block.capmask2) == (
                kind,
                lid,
                port,
                cap,
                cap2,
            )
            for name, value in values.items():
                assert block.values[name] == value, (path.name, name)
            # every printed counter line is kept (raw names) and none is a selector
            assert "PortSelect" not in block.raw and "CounterSelect" not in block.raw
        seen.add(path.name)
    assert seen == set(PERFQUERY_EXPECTED)


def test_old_and_new_names_map_to_the_same_fields(realdata):
    old = parse_perfquery((realdata / "perfquery" / "tacc_stats_2011_perfquery_oldnames.txt").read_text())[0]
    new = parse_perfquery(
        (realdata / "perfquery" / "treydock_perfquery_x_0x506b4b03005c2740.out").read_text()
    )[0]
    assert old.raw["XmtData"] == old.values["xmit_data"]
    assert old.raw["LinkRecovers"] == old.values["link_error_recovery"]
    common = {
        "xmit_data",
        "rcv_data",
        "xmit_pkts",
        "rcv_pkts",
        "symbol_errors",
        "link_downed",
        "vl15_dropped",
    }
    assert common <= set(old.values) and common <= set(new.values)


def test_merge_prefers_extended_data_and_keeps_errors():
    text = (
        "# Port counters: Lid 5 port 2 (CapMask: 0x1300)\nPortSelect:......................2\n"
        "SymbolErrorCounter:..............3\nPortXmitData:....................4294967295\n"
        "PortXmitWait:....................77\n"
        "# Port extended counters: Lid 5 port 2 (CapMask: 0x1300 CapMask2: 0x0000000)\n"
        "PortSelect:......................2\nPortXmitData:....................12345678901\n"
    )
    merged = merge_port_counters(parse_perfquery(text))
    rec = merged[(5, 2)]
    assert rec["extended"] is True
    assert rec["values"]["xmit_data"] == 12345678901
    assert rec["values"]["symbol_errors"] == 3 and rec["values"]["xmit_wait"] == 77
    assert rec["capmask"] == 0x1300


@pytest.mark.parametrize(
    "text,line,needle",
    [
        ("PortXmitData:....1\n", 1, "before any"),
        ("# Port counters: Lid 1 port 1\nPortXmitData:....12x\n", 2, "not an integer"),
        ("# Port counters: Lid 1 port 1\nthis is garbage\n", 2, "unrecognised"),
        ("# Port counters: Lid 1 port 1\nPortSelect:......2\n", 2, "does not match"),
        ("# Port nonsense header\n", 1, "header"),
    ],
)
def test_perfquery_errors_say_where(text, line, needle):
    with pytest.raises(ParseError) as exc:
        parse_perfquery(text, source="x.txt")
    assert exc.value.line == line
    assert str(exc.value).startswith(f"x.txt:{line}: ")
    assert needle in str(exc.value)


def test_ibqueryerrors_clean_node_is_silence_plus_summary(realdata):
    path = realdata / "ibqueryerrors" / "guilbaults_issue48_ibqueryerrors_clean_node.txt"
    rep = parse_ibqueryerrors(path.read_text(), source=path.name)
    assert rep.nodes == []
    assert (rep.nodes_checked, rep.bad_nodes, rep.ports_checked, rep.bad_ports) == (1, 0, 1, 0)
    assert rep.thresholds.startswith("[SymbolErrorCounter = 0]") and "[PortXmitWait = 0]" in rep.thresholds
    assert rep.suppressed == []


def test_ibqueryerrors_data_line_with_human_units(realdata):
    path = realdata / "ibqueryerrors" / "guilbaults_issue48_ibqueryerrors_data_PARTIAL.txt"
    rep = parse_ibqueryerrors(path.read_text(), source=path.name)
    assert rep.nodes_checked is None  # the summary was not captured in this excerpt
    (node,) = rep.nodes
    assert (node.kind, node.guid, node.name) == ("errors", None, "maestro-3002 HCA-1")
    (port,) = node.ports
    assert port.guid == 0x0C42A1030079989C  # printed unpadded: compared as a number
    assert port.port == 1
    assert port.values == {
        "xmit_wait": 2544,
        "xmit_data": 6399401,
        "rcv_data": 1758872,
        "xmit_pkts": 13959,
        "rcv_pkts": 13514,
        "unicast_xmit_pkts": 13959,
        "unicast_rcv_pkts": 13514,
    }
    # the tool's human value is words × 4 in binary units: the parser's field names carry words
    assert port.human["xmit_data"] == f"{port.values['xmit_data'] * 4 / 2**20:.3f}MB"
    assert port.human["rcv_data"] == f"{port.values['rcv_data'] * 4 / 2**20:.3f}MB"
    assert port.human["xmit_pkts"] == f"{port.values['xmit_pkts'] / 1024:.3f}K"
    assert port.saturated == []


def test_every_ibqueryerrors_file_parses(realdata):
    for path in _files(realdata, "ibqueryerrors"):
        rep = parse_ibqueryerrors(path.read_text(), source=path.name)
        assert rep.nodes or rep.nodes_checked is not None, path.name


def test_ibqueryerrors_port_all_saturation_and_details_swap():
    # lines as rdma-core prints them (format strings of ibqueryerrors.c print_results)
    text = (
        'Errors for 0x200000 "Switch1"\n'
        "   GUID 0x200000 port ALL: [PortRcvSwitchRelayErrors == 2] [PortXmitData == 4294967295 (15.999GB)]\n"
        "   GUID 0x200000 port 7: [SymbolErrorCounter == 65535] [LinkDownedCounter == 255]\n"
        'Errors for "Hca2"\n'
        "   GUID 0x100004 port 1: [PortRcvErrors == 7] [PortNeighborMTUDiscards == 4] "
        "[PortXmitDiscards == 5] [PortLocalPhysicalErrors == 3] [PortMalformedPktErrors == 2]\n"
        "\n## Summary: 6 nodes checked, 2 bad nodes found\n"
        "##          20 ports checked, 2 ports have errors beyond threshold\n"
        "##          1 PMA query failures\n## Thresholds: \n## Suppressed: PortXmitWait\n"
    )
    rep = parse_ibqueryerrors(text)
    sw, ca = rep.nodes
    assert sw.guid == 0x200000 and sw.ports[0].port is None
    assert sw.ports[0].saturated == ["xmit_data"]
    assert sorted(sw.ports[1].saturated) == ["link_downed", "symbol_errors"]
    p = ca.ports[0]
    assert p.values == {
        "rcv_errors": 7,
        "malformed_pkt_errors": 4,
        "xmit_discards": 5,
        "inactive_discards": 3,
        "neighbor_mtu_discards": 2,
    }
    assert p.swapped_details == 3
    assert (rep.bad_ports, rep.pma_query_failures, rep.suppressed) == (2, 1, ["PortXmitWait"])
    assert rep.port_values()[(0x100004, 1)]["inactive_discards"] == 3


@pytest.mark.parametrize(
    "text,line",
    [
        ("   GUID 0x1 port 1: [PortXmitWait == 3]\n", 1),
        ('Errors for "a"\n   GUID 0x1 port 1: [PortXmitWait == 3] junk\n', 2),
        ('Errors for "a"\nsomething else\n', 2),
    ],
)
def test_ibqueryerrors_errors_say_where(text, line):
    with pytest.raises(ParseError) as exc:
        parse_ibqueryerrors(text, source="iqe.txt")
    assert exc.value.line == line and "iqe.txt" in str(exc.value)


def test_extended_block_without_addl_capmask2_does_not_overwrite_errors(realdata):
    """Older infiniband-diags print an all-zero error block in ``perfquery -x`` when CapMask2 is 0
    (real output): not authoritative, the 32-bit counters keep the errors and PortXmitWait."""
    ext = (realdata / "perfquery" / "treydock_perfquery_x_0x7cfe9003003b4b96.out").read_text()
    blocks = parse_perfquery(PLAIN_LID133 + ext)  # the order the perfquery collector reads them in
    assert [b.capmask2 for b in blocks if b.kind == "extended"] == [0]
    assert next(b for b in blocks if b.kind == "extended").values["symbol_errors"] == 0  # what it printed
    rec = merge_port_counters(blocks)[(133, 1)]
    v = rec["values"]
    assert rec["extended"] is True and rec["capmask"] == 0x5A00
    assert (v["symbol_errors"], v["link_error_recovery"], v["link_downed"], v["rcv_errors"]) == (7, 2, 3, 5)
    assert v["xmit_wait"] == 123456
    assert (v["xmit_data"], v["rcv_data"]) == (37108676853855, 37225401952885)  # 64-bit data win
    assert (v["xmit_pkts"], v["rcv_pkts"]) == (96917117320, 100583719365)


def test_extended_block_alone_has_errors_only_with_addl_capmask2(realdata):
    ext = (realdata / "perfquery" / "treydock_perfquery_x_0x7cfe9003003b4bde.out").read_text()
    v = merge_port_counters(parse_perfquery(ext))[(134, 1)]["values"]
    assert v["xmit_data"] == 9049592493976 and v["multicast_rcv_pkts"] == 3732158589
    # not read (None downstream), never a made-up 0
    assert not {"symbol_errors", "link_downed", "xmit_wait", "qp1_dropped"} & set(v)
    # with CapMask2 0x2 (AddlPortCountersExtended, real output) the error block is the device's
    ext = (realdata / "perfquery" / "treydock_perfquery_x_0x506b4b03005c2740.out").read_text()
    v = merge_port_counters(parse_perfquery(ext))[(2052, 1)]["values"]
    assert (v["link_downed"], v["xmit_discards"], v["xmit_wait"]) == (1, 20046, 41864608)
    assert v["rcv_switch_relay_errors"] == 7 and v["xmit_data"] == 178791657177235
