"""Parser tests: every realdata variant, malformed input with located errors, and fuzzing.

Expected values for the inline snippets are read off the snippets themselves; for real files the
tests check invariants computed independently from the text (header and port-line counts).
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric import rates
from fabric.parsers import (
    TopologyParseError,
    detect_and_parse,
    detect_format,
    parse_ibnetdiscover,
    parse_ports,
    parse_subnet_lst,
)
from fabric.parsers.ibnetdiscover import derived_guid
from fabric.parsers.records import STATE_ACTIVE, STATE_DOWN, STATE_INIT
from fabric.parsers.sminfo import parse_sminfo
from fabric.services.derive import aggregation_nodes, derive_tiers, host_from_description

SMALL = """#
# Topology file: generated on Tue Feb 23 14:02:06 2021
#
vendid=0x2c9
devid=0xd2f0
sysimgguid=0x1c34da0300728866
switchguid=0x1c34da0300728866(1c34da0300728866)
Switch\t41 "S-1c34da0300728866"\t\t# "MF0;leaf-1:MQM8700/U1" enhanced port 0 lid 1600 lmc 0
[1]\t"H-1c34da0300608820"[1](1c34da0300608820) \t\t# "host001 mlx5_0" lid 837 4xHDR
[2]\t"H-1c34da0300608908"[1](1c34da0300608908) \t\t# "host002 HCA-2" lid 256 2xEDR
[39]\t"S-0c42a1030079ae0c"[1]\t\t# "spine # 1 \\"big\\"" lid 102 4xHDR
[40]\t"S-1c34da0300728866"[41]\t\t# "MF0;leaf-1:MQM8700/U1" lid 1600 4xHDR
[41]\t"S-1c34da0300728866"[40]\t\t# "MF0;leaf-1:MQM8700/U1" lid 1600 4xHDR

vendid=0x2c9
devid=0xd2f0
switchguid=0xc42a1030079ae0c(c42a1030079ae0c)
Switch\t41 "S-0c42a1030079ae0c"\t\t# "spine # 1 \\"big\\"" base port 0 lid 102 lmc 0
[1]\t"S-1c34da0300728866"[39]\t\t# "MF0;leaf-1:MQM8700/U1" lid 1600 4xHDR

vendid=0x2c9
devid=0x101b
sysimgguid=0x1c34da0300608820
caguid=0x1c34da0300608820
Ca\t1 "H-1c34da0300608820"\t\t# "host001 mlx5_0"
[1](1c34da0300608820) \t"S-1c34da0300728866"[1]\t\t# lid 837 lmc 0 "MF0;leaf-1:MQM8700/U1" lid 1600 4xHDR

vendid=0x2c9
devid=0x101b
caguid=0x1c34da0300608908
Ca\t1 "H-1c34da0300608908"\t\t# "host002 HCA-2"
[1](1c34da0300608908) \t"S-1c34da0300728866"[2]\t\t# lid 256 lmc 0 "MF0;leaf-1:MQM8700/U1" lid 1600 2xEDR

vendid=0x2c9
devid=0x101b
caguid=0xb8e92403009ca838
Ca\t1 "H-b8e92403009ca838"\t\t# "lonely-host HCA-1"
"""

SW1 = "0x1c34da0300728866"
SPINE = "0x0c42a1030079ae0c"
CA1 = "0x1c34da0300608820"
CA2 = "0x1c34da0300608908"


def _read(path: Path) -> str:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8", "replace")


def test_small_topology_nodes_ports_links():
    topo = parse_ibnetdiscover(SMALL, "small")
    assert topo.counts() == {"switches": 2, "cas": 3, "routers": 0, "links": 4, "ports": 8}
    sw = topo.nodes[SW1]
    assert (sw.lid, sw.enhanced_port0, sw.num_ports, sw.vendor_id, sw.device_id) == (
        1600,
        True,
        41,
        0x2C9,
        0xD2F0,
    )
    spine = topo.nodes[SPINE]
    assert spine.description == 'spine # 1 \\"big\\"'
    assert (spine.lid, spine.enhanced_port0) == (102, False)
    assert topo.nodes[CA1].description == "host001 mlx5_0"
    assert topo.nodes["0xb8e92403009ca838"].num_ports == 1  # a CA with no port lines is kept
    # the self-loop cable [40]<->[41] is one link
    assert ((SW1, 40), (SW1, 41)) in topo.links
    p = topo.ports[(CA2, 1)]
    assert (p.lid, p.width, p.speed, p.port_guid, p.state) == (256, "2x", "EDR", CA2, STATE_ACTIVE)
    assert topo.ports[(SW1, 39)].lid == 1600  # switch ports carry the switch LID
    link = topo.links[((CA1, 1), (SW1, 1))]
    assert (link.width, link.speed) == ("4x", "HDR")
    assert topo.warnings == []


def test_whitespace_variants_give_the_same_topology():
    base = parse_ibnetdiscover(SMALL)
    variants = {
        "crlf": SMALL.replace("\n", "\r\n"),
        "cr": SMALL.replace("\n", "\r"),
        "bom": "\ufeff" + SMALL,
        "no tabs": SMALL.replace("\t", ""),
        "spaces": SMALL.replace("\t", "    "),
    }
    for name, text in variants.items():
        topo = parse_ibnetdiscover(text, name)
        assert topo.counts() == base.counts(), name
        assert set(topo.links) == set(base.links), name
        assert {g: n.description for g, n in topo.nodes.items()} == {
            g: n.description for g, n in base.nodes.items()
        }, name


def test_stray_lines_are_warned_with_their_line():
    text = "src/query_smp.c:195; umad (DR path slid 0) bad status 110; Connection timed out\n" + SMALL
    text += "admin@host [ mgmt ] (config) # \n"
    topo = parse_ibnetdiscover(text, "stray")
    assert topo.counts()["switches"] == 2
    lines = [w.line for w in topo.warnings]
    assert lines == [1, len(text.splitlines())]


def test_grouping_headers_ext_ports_labels_routers_and_speeds():
    text = """Chassis 1 (guid 0x8f10400410015) Voltaire ISR9288
Spine Nodes

switchguid=0x8f10400410015(8f10400410015)
Switch\t24 "S-0008f10400410015"\t\t# "ISR9288 Voltaire sLB-24" base port 0 lid 3 lmc 0
[1][ext 7]\t"S-0008f10400410016"[2][ext 9]\t\t# "ISR9288 Voltaire sFB-12" lid 4 12xQDR
[2](1/2)\t"H-0002c9030004e938"[1](2c9030004e939) \t\t# "node1 mlx4_0" lid 9 1xSDR
[3]\t"R-0002c90300001234"[1](2c90300001235) \t\t# "gw router" lid 10 4xFDR10
[4]\t"S-0008f10400410016"[3]\t\t# "ISR9288 Voltaire sFB-12" lid 4 8xXDR

Non-Chassis Nodes

switchguid=0x8f10400410016(8f10400410016)
Switch\t12 "S-0008f10400410016"\t\t# "ISR9288 Voltaire sFB-12" enhanced port 0 lid 4 lmc 0
[2][ext 9]\t"S-0008f10400410015"[1][ext 7]\t\t# "ISR9288 Voltaire sLB-24" lid 3 12xQDR
[3]\t"S-0008f10400410015"[4]\t\t# "ISR9288 Voltaire sLB-24" lid 3 8xXDR

caguid=0x2c9030004e938
Ca\t2 "H-0002c9030004e938"\t\t# "node1 mlx4_0"
[1](2c9030004e939) \t"S-0008f10400410015"[2]\t\t# lid 9 lmc 0 "ISR9288 Voltaire sLB-24" lid 3 1xSDR

routerguid=0x2c90300001234
Rt\t2 "R-0002c90300001234"\t\t# "gw router"
[1](2c90300001235) \t"S-0008f10400410015"[3]\t\t# lid 10 lmc 0 "ISR9288 Voltaire sLB-24" lid 3 4xFDR10
"""
    topo = parse_ibnetdiscover(text, "grouped")
    assert topo.warnings == []
    assert topo.counts() == {"switches": 2, "cas": 1, "routers": 1, "links": 4, "ports": 8}
    a, b = "0x0008f10400410015", "0x0008f10400410016"
    assert topo.ports[(a, 1)].label == "7" and topo.ports[(b, 2)].label == "9"
    assert topo.ports[(a, 2)].label == "1/2"
    assert topo.ports[("0x0002c9030004e938", 1)].port_guid == "0x0002c9030004e939"
    assert (topo.links[((a, 1), (b, 2))].width, topo.links[((a, 1), (b, 2))].speed) == ("12x", "QDR")
    assert topo.links[((a, 4), (b, 3))].speed == "XDR"
    assert topo.links[(("0x0002c90300001234", 1), (a, 3))].speed == "FDR10"
    assert topo.nodes["0x0002c90300001234"].node_type == "router"


def test_bad_lids_are_unset_with_warnings():
    text = """switchguid=0x1111111111111111(1111111111111111)
Switch  37 "S-1111111111111111"         # "sw1" enhanced port 0 lid  lmc 0
[1]     "H-0c42a103006d6174"[1](c42a103006d6174)                # "h1 HCA-1" lid 65535 4xEDR
[2]     "H-0c42a103006d6175"[1](c42a103006d6175)                # "h2 HCA-1" lid -1 4xEDR

caguid=0x0c42a103006d6174
Ca      1 "H-0c42a103006d6174"          # "h1 HCA-1"
[1](c42a103006d6174)    "S-1111111111111111"[1]         # lid 65535 lmc 0 "sw1" lid  4xEDR

caguid=0x0c42a103006d6175
Ca      1 "H-0c42a103006d6175"          # "h2 HCA-1"
[1](c42a103006d6175)    "S-1111111111111111"[2]         # lid 65335 lmc 0 "sw1" lid  4xEDR
"""
    topo = parse_ibnetdiscover(text, "badlid")
    assert topo.counts()["links"] == 2
    assert topo.nodes["0x1111111111111111"].lid is None
    assert topo.ports[("0x0c42a103006d6174", 1)].lid is None
    assert topo.ports[("0x0c42a103006d6174", 1)].state == STATE_INIT  # up but no LID
    by_line = {}
    for w in topo.warnings:
        by_line.setdefault(w.line, []).append(w.message)
    assert "empty" in by_line[2][0]
    assert any("65535" in m for m in by_line[3])
    assert any("-1" in m for m in by_line[4])
    assert any("65335" in m for m in by_line[12])


def test_non_hex_guids_are_skipped_never_invented():
    """Issue 10: a node whose file-given GUID is not hex is skipped with a located warning; Weft
    never derives a GUID for it (a hash could collide with a real node later)."""
    text = """caguid=0x3333333333host3
Ca      1 "H-03333333333host3"          # "host_3 HCA-1"
[1](3333333333host3)    "S-3333333333333333"[35]                # lid 11 lmc 0 "sw3" lid 10 4xEDR

switchguid=0x3333333333333333(3333333333333333)
Switch  37 "S-3333333333333333"         # "sw3" enhanced port 0 lid 10 lmc 0
[35]    "H-03333333333host3"[1](3333333333host3)                # "host_3 HCA-1" lid 11 4xEDR
"""
    topo = parse_ibnetdiscover(text, "anon")
    assert derived_guid("H-03333333333host3") not in topo.nodes
    assert list(topo.nodes) == ["0x3333333333333333"] and topo.counts()["links"] == 0
    msgs = [(w.line, w.message) for w in topo.warnings]
    assert msgs[0] == (
        1,
        "caguid '0x3333333333host3' of node 'H-03333333333host3' is not a hex GUID; node record skipped",
    )
    assert msgs[1][0] == 7 and "skipped at line 2; link skipped" in msgs[1][1]
    assert topo.truncated is None  # a skipped record is not a file cut short


def test_duplicate_guid_and_missing_peer_are_located():
    text = """switchguid=0x1(1)
Switch 8 "S-0000000000000001"   # "a" base port 0 lid 1 lmc 0
[1]   "S-0000000000000002"[1]   # "b" lid 2 4xQDR
[2]   "S-0000000000000009"[1]   # "gone" lid 9 4xQDR

switchguid=0x2(2)
Switch 8 "S-0000000000000002"   # "b" base port 0 lid 2 lmc 0
[1]   "S-0000000000000001"[1]   # "a" lid 1 4xQDR

switchguid=0x1(1)
Switch 8 "S-0000000000000001"   # "a again" base port 0 lid 5 lmc 0
"""
    topo = parse_ibnetdiscover(text, "dups")
    assert topo.counts()["switches"] == 2 and topo.counts()["links"] == 1
    assert topo.nodes["0x0000000000000001"].description == "a"
    lines = {w.line: w.message for w in topo.warnings}
    assert "has no record" in lines[4]
    assert "twice" in lines[11] or "duplicated" in lines[11]


def test_duplicate_port_guid_on_two_cas_is_warned():
    text = """switchguid=0x1(1)
Switch 8 "S-0000000000000001"   # "sw" base port 0 lid 1 lmc 0
[1]   "H-00000000000000a0"[1](00000000000000a1)   # "host001 mlx5_0" lid 2 4xHDR
[2]   "H-00000000000000b0"[1](00000000000000a1)   # "host002 mlx5_0" lid 3 4xHDR

caguid=0xa0
Ca 1 "H-00000000000000a0"   # "host001 mlx5_0"
[1](00000000000000a1)   "S-0000000000000001"[1]   # lid 2 lmc 0 "sw" lid 1 4xHDR

caguid=0xb0
Ca 1 "H-00000000000000b0"   # "host002 mlx5_0"
[1](00000000000000a1)   "S-0000000000000001"[2]   # lid 3 lmc 0 "sw" lid 1 4xHDR
"""
    topo = parse_ibnetdiscover(text, "dup-ports")
    assert topo.counts()["cas"] == 2 and topo.counts()["links"] == 2
    dup = [w for w in topo.warnings if "duplicated port GUID 0x00000000000000a1" in w.message]
    assert len(dup) == 1, topo.warnings
    # switch ports share the switch GUID: never reported
    assert not [w for w in topo.warnings if "0x0000000000000001" in w.message]


def test_conflicting_link_ends_are_warned():
    text = """Switch 8 "sw1"
[1] "sw2"[1]
[2] "sw2"[1]

Switch 8 "sw2"
[1] "sw1"[1]
"""
    topo = parse_ibnetdiscover(text)
    assert topo.counts()["links"] == 1
    assert topo.warnings[0].line == 3 and "already linked" in topo.warnings[0].message


def test_ibsim_netfile_without_guids():
    text = """# comment
Switch 5 "spine1"
[1]    "switch1"[1]   4xDDR

Switch 5 "switch1"
[1]    "spine1"[1] w=4
[2]    "node1"[1]

Hca 1 "node1"
[1] "switch1"[2]
"""
    topo = parse_ibnetdiscover(text, "net")
    assert topo.warnings == []
    assert topo.counts() == {"switches": 2, "cas": 1, "routers": 0, "links": 2, "ports": 4}
    assert topo.nodes[derived_guid("node1")].description == "node1"
    spine = derived_guid("spine1")
    link = topo.links[tuple(sorted([(spine, 1), (derived_guid("switch1"), 1)]))]
    assert (link.width, link.speed) == ("4x", "DDR")


@pytest.mark.parametrize(
    "text,line",
    [
        ("", 0),
        ("\n\n   \n", 1),
        ("hello world\nthis is not a fabric\n", 1),
        ("# only comments\n#\n<html><body>404</body></html>\n", 3),
        ("\x00\x01\x02binary\xff\n\x7fELF", 1),
    ],
)
def test_not_topology_is_rejected_with_location(text, line):
    with pytest.raises(TopologyParseError) as info:
        detect_and_parse(text, "junk.txt")
    assert info.value.line == line
    assert str(info.value).startswith(f"junk.txt:{line}: ")


def test_truncated_file_keeps_complete_records_and_warns(realdata):
    text = _read(realdata / "ibnetdiscover" / "selene_storage.ibnetdiscover.txt")
    cut = text[: len(text) // 2]
    cut = cut[: cut.rfind("\n") - 7]  # cut inside a line
    topo = parse_ibnetdiscover(cut, "cut")
    headers = len(re.findall(r"^(Switch|Ca)\s", cut, re.M))
    assert len(topo.nodes) == headers
    assert topo.warnings, "a truncated file must warn (links to nodes it lost, the cut line)"
    # Exactly the port lines whose remote node lost its record to the cut warn, each at its line
    # and saying so; the cut line itself is one of them (its remote's record is past the cut).
    names = set(re.findall(r'^(?:Switch|Ca)\s+\d+\s+"([^"]+)"', cut, re.M))
    dangling = {
        n
        for n, line in enumerate(cut.splitlines(), 1)
        if (m := re.match(r'^\[\d+\]\s*"([^"]+)"\[\d+\]', line)) and m.group(1) not in names
    }
    last = len(cut.splitlines())
    assert last in dangling
    assert sorted(w.line for w in topo.warnings) == sorted(dangling)
    assert all("which has no record; link skipped" in w.message for w in topo.warnings)


def _realdata_topology_files(root: Path) -> list[Path]:
    out = []
    for folder in ("ibnetdiscover", "ibdiagnet", "ibsim_net"):
        for path in sorted((root / folder).iterdir()):
            head = _read(path)[:200_000]
            if re.search(r'^\s*(Switch|Ca|Hca|Rt)\s*\d+\s*"', head, re.M):
                out.append(path)
    return out


def test_every_realdata_topology_parses_consistently(realdata):
    files = _realdata_topology_files(realdata)
    assert len(files) >= 25
    for path in files:
        text = _read(path)
        topo = detect_and_parse(text, path.name)
        assert topo.format == "ibnetdiscover"
        # independent counts from the text: one header per node, minus skipped duplicates
        headers = re.findall(r'^\s*(Switch|Ca|Hca|Rt)\s*\d+\s*"([^"]*)"', text, re.M)
        dups = sum(1 for w in topo.warnings
                   if "twice" in w.message or "duplicated node GUID" in w.message or "node record skipped" in w.message)  # fmt: skip
        assert len(topo.nodes) == len(headers) - dups, path.name
        kinds = {"Switch": "switch", "Ca": "ca", "Hca": "ca", "Rt": "router"}
        for kind in ("switch", "ca", "router"):
            expected = sum(1 for k, _ in headers if kinds[k] == kind)
            assert sum(1 for n in topo.nodes.values() if n.node_type == kind) <= expected
        for (ga, pa), (gb, pb) in topo.links:
            assert ga in topo.nodes and gb in topo.nodes
            assert (ga, pa) in topo.ports and (gb, pb) in topo.ports
        # each port is in at most one link
        ends = [end for key in topo.links for end in key]
        assert len(ends) == len(set(ends)), path.name
        # ibnetdiscover lists every link from both ends: port lines = 2 × links (+ skipped lines)
        if "ibnetdiscover" in path.name and "EDITED" not in path.name:
            port_lines = len(re.findall(r"^\s*\[\d+\]", text, re.M))
            assert port_lines == 2 * len(topo.links), path.name


def test_selene_compute_counts_match_the_text(realdata):
    text = _read(realdata / "ibnetdiscover" / "selene_compute.ibnetdiscover.txt.gz")
    topo = detect_and_parse(text, "selene")
    assert topo.counts()["switches"] == len(re.findall(r"^Switch\s", text, re.M))
    assert topo.counts()["cas"] == len(re.findall(r"^Ca\s", text, re.M))
    assert 2 * topo.counts()["links"] == len(re.findall(r"^\[\d+\]", text, re.M))
    assert topo.warnings == []
    tiers = derive_tiers(topo)
    assert {tiers[g] for g, n in topo.nodes.items() if n.node_type == "switch"} <= {1, 2, 3}


def test_ports_format(realdata):
    topo = parse_ports(_read(realdata / "ibnetdiscover_ports" / "treydock_test.out"), "test.out")
    assert detect_format(_read(realdata / "ibnetdiscover_ports" / "treydock_test.out")) == "ports"
    sw = topo.nodes["0x7cfe9003009ce5b0"]
    assert (sw.node_type, sw.lid, sw.description) == ("switch", 1719, "ib-i1l1s01")
    ca = topo.nodes["0x7cfe9003003b4bde"]
    assert (ca.node_type, ca.description) == ("ca", "o0001 HCA-1")
    assert topo.ports[("0x7cfe9003003b4bde", 1)].lid == 134
    assert (("0x7cfe9003003b4bde", 1), ("0x7cfe9003009ce5b0", 10)) in topo.links
    down = topo.ports[("0x506b4b03005c2740", 37)]
    assert (down.state, down.width) == (STATE_DOWN, "")
    unquoted = parse_ports(_read(realdata / "ibnetdiscover_ports" / "treydock_test3.out"))
    assert next(iter(unquoted.nodes.values())).description == "Infiniscale-IV Mellanox Technologies"


def test_subnet_lst(realdata):
    text = _read(realdata / "opensm_subnet_lst" / "ibutils_subnet.lst")
    topo = parse_subnet_lst(text, "subnet.lst")
    link_lines = [ln for ln in text.splitlines() if ln.strip().startswith("{")]
    assert len(topo.links) <= len(link_lines)
    sw = topo.nodes["0x0002c90109fb0000"]
    assert (sw.node_type, sw.num_ports, sw.lid, sw.vendor_id, sw.device_id) == ("switch", 8, 2, 0x2C9, 0xA87C)
    assert topo.ports[("0x0002c90109fb0000", 5)].state == STATE_ACTIVE
    rhino = detect_and_parse(_read(realdata / "opensm_subnet_lst" / "ibutils_RhinoBased512_SYNTHETIC.lst.gz"))
    assert rhino.format == "subnet_lst"
    speeds = {link.speed for link in rhino.links.values()}
    assert speeds <= {"SDR", "DDR", "QDR"} and "DDR" in speeds


def test_subnet_lst_rejects_other_text():
    with pytest.raises(TopologyParseError) as info:
        parse_subnet_lst("x\n{ not a link }\n", "a.lst")
    assert info.value.line == 1


def test_sminfo():
    (sm,) = parse_sminfo(
        "sminfo: sm lid 1 sm guid 0x2c90300000001, activity count 1234 priority 15 state 3 SMINFO_MASTER"
    )
    assert (sm.guid, sm.lid, sm.priority, sm.state, sm.activity_count) == (
        "0x0002c90300000001",
        1,
        15,
        3,
        1234,
    )
    with pytest.raises(TopologyParseError):
        parse_sminfo("ibwarn: no SM")


def test_rates_table():
    assert rates.data_rate_gbps("4x", "HDR") == 200.0
    assert rates.data_rate_gbps("4x", "NDR") == 400.0
    assert rates.data_rate_gbps("4x", "EDR") == 100.0
    assert rates.data_rate_gbps("4x", "FDR") == pytest.approx(54.545, abs=1e-3)
    assert rates.data_rate_gbps("4x", "FDR10") == 40.0
    assert rates.data_rate_gbps("4x", "QDR") == 32.0
    assert rates.data_rate_gbps("1x", "SDR") == 2.0
    assert rates.data_rate_gbps("12x", "DDR") == 48.0
    assert rates.data_rate_gbps("2x", "XDR") == 400.0
    assert rates.data_rate_gbps("4x", "") is None
    assert rates.data_rate_bytes_per_s("4x", "HDR") == 25e9
    assert rates.split_link("4xFDR10") == ("4x", "FDR10")
    assert rates.split_link("12x") == ("12x", "")
    assert rates.split_link("4xFOO") is None


@pytest.mark.parametrize(
    "desc,host",
    [
        ("host017 mlx5_3", "host017"),
        ("selene-cache-02 mlx5_1 ", "selene-cache-02"),
        ("r-ufm216 HCA-2", "r-ufm216"),
        ("SAT111092710053 ibp11s0f0", "SAT111092710053"),
        ("MT25408 ConnectX Mellanox Technologies", None),
        ("Mellanox Technologies Aggregation Node", None),
        ("H-1 MT23108 Infinihost-II Mellanox Technologies", None),
        ("", None),
    ],
)
def test_host_from_description(desc, host):
    assert host_from_description(desc) == host


def test_tiers_of_a_three_level_tree():
    text = """Switch 4 "core"
[1] "spine"[1]

Switch 4 "spine"
[1] "core"[1]
[2] "leaf"[1]

Switch 4 "leaf"
[1] "spine"[2]
[2] "h1"[1]
[3] "agg"[1]

Switch 4 "lonely"

Hca 1 "h1"
[1] "leaf"[2]

Hca 1 "agg" # "Mellanox Technologies Aggregation Node"
[1] "leaf"[3]

Switch 4 "agg-only"
[1] "agg2"[1]

Hca 1 "agg2" # "Mellanox Technologies Aggregation Node"
[1] "agg-only"[1]
"""
    topo = parse_ibnetdiscover(text)
    tiers = {topo.nodes[g].name: t for g, t in derive_tiers(topo).items()}
    assert tiers == {
        "core": 3,
        "spine": 2,
        "leaf": 1,
        "lonely": 9,
        "h1": 0,
        "agg": 0,
        "agg-only": 9,
        "agg2": 0,
    }


def test_aggregation_nodes_are_recognised_by_device_id_and_by_their_switch(realdata):
    """A SHARP AN renamed by its site (no "Aggregation Node" in the description) is still found:
    by its switch-ASIC device ID, or by sharing its switch's system image GUID; a ConnectX host
    on the same switch is not. Selene: 666, one per switch, each on the switch's port 41."""
    text = """
vendid=0x2c9
devid=0xd2f0
sysimgguid=0x1c34da0300728866
switchguid=0x1c34da0300728866(1c34da0300728866)
Switch	41 "S-1c34da0300728866"		# "leaf-a" enhanced port 0 lid 2 lmc 0
[1]	"H-0000000000000001"[1](0000000000000001) 		# "gpu01 mlx5_0" lid 3 4xHDR
[40]	"H-0000000000000002"[1](0000000000000002) 		# "leaf-a-an" lid 4 4xHDR
[41]	"H-0000000000000003"[1](0000000000000003) 		# "leaf-a sharp" lid 5 4xHDR

vendid=0x2c9
devid=0x101b
sysimgguid=0x0000000000000001
caguid=0x0000000000000001
Ca	1 "H-0000000000000001"		# "gpu01 mlx5_0"
[1](0000000000000001) 	"S-1c34da0300728866"[1]		# lid 3 lmc 0 "leaf-a" lid 2 4xHDR

vendid=0x2c9
devid=0xcf09
sysimgguid=0x0000000000000002
caguid=0x0000000000000002
Ca	1 "H-0000000000000002"		# "leaf-a-an"
[1](0000000000000002) 	"S-1c34da0300728866"[40]		# lid 4 lmc 0 "leaf-a" lid 2 4xHDR

vendid=0x2c9
devid=0x101b
sysimgguid=0x1c34da0300728866
caguid=0x0000000000000003
Ca	1 "H-0000000000000003"		# "leaf-a sharp"
[1](0000000000000003) 	"S-1c34da0300728866"[41]		# lid 5 lmc 0 "leaf-a" lid 2 4xHDR
"""
    topo = parse_ibnetdiscover(text)
    switch = "0x1c34da0300728866"
    assert aggregation_nodes(topo) == {"0x0000000000000002": switch, "0x0000000000000003": switch}
    assert derive_tiers(topo)[switch] == 1  # gpu01 still makes it a leaf
    selene = parse_ibnetdiscover(
        gzip.decompress(
            (realdata / "ibnetdiscover/selene_compute.ibnetdiscover.txt.gz").read_bytes()
        ).decode()
    )
    ans = aggregation_nodes(selene)
    assert len(ans) == 666 and len(set(ans.values())) == 666
    switch_port = {here: end for a, b in selene.links for here, end in ((a[0], b), (b[0], a)) if here in ans}
    assert all(switch_port[an] == (sw, 41) for an, sw in ans.items())


_fuzz_lines = st.sampled_from(
    SMALL.splitlines() + ["[1]", '"', "Switch", 'Ca 1 "', '[x]"a"[1]', "lid -1", "\r"]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_fuzz_lines, max_size=40), st.text(max_size=200))
def test_fuzz_parser_never_crashes(lines, noise):
    for text in ("\n".join(lines), "\n".join(lines) + noise, noise):
        try:
            topo = detect_and_parse(text, "fuzz")
        except TopologyParseError as exc:
            assert str(exc).startswith("fuzz:")
            continue
        for (ga, _pa), (gb, _pb) in topo.links:
            assert ga in topo.nodes and gb in topo.nodes


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_fuzz_binary_never_crashes(data):
    text = data.decode("utf-8", "replace")
    for parse in (detect_and_parse, parse_ports, parse_subnet_lst, parse_ibnetdiscover):
        try:
            parse(text, "bin")
        except TopologyParseError:
            pass
