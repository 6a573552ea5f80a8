"""The netfile reader (pure Python): records, GUIDs as ibsim assigns them, located errors."""

from __future__ import annotations

import gzip

import pytest

from lab.netfile import CA, SWITCH, NetfileError, parse_netfile, read_netfile

IBNETDISCOVER_STYLE = """\
#
# Topology file: generated on Tue Feb 23 14:02:06 2021
vendid=0x2c9
devid=0xd2f0
sysimgguid=0x1c34da0300728866
switchguid=0x1c34da0300728866(1c34da0300728866)
Switch\t41 "S-1c34da0300728866"\t\t# "MF0;MLG01-02:MQM8700/U1" enhanced port 0 lid 1600 lmc 0
[1]\t"H-1c34da0300608820"[1](1c34da0300608821) \t\t# "selene-swift-01 HCA-2" lid 837 4xHDR
[39]\t"S-1c34da030060a40c"[39]\t\t# "MF0;CSPINE1-80:MQM8700/U1" lid 102 4xHDR

switchguid=0x1c34da030060a40c(1c34da030060a40c)
Switch\t41 "S-1c34da030060a40c"\t\t# "MF0;CSPINE1-80:MQM8700/U1" enhanced port 0 lid 102 lmc 0
[39]\t"S-1c34da0300728866"[39]\t\t# "MF0;MLG01-02:MQM8700/U1" lid 1600 4xHDR

caguid=0x1c34da0300608820
Ca\t1 "H-1c34da0300608820"\t\t# "selene-swift-01 HCA-2"
[1](1c34da0300608821) \t"S-1c34da0300728866"[1]\t\t# lid 837 lmc 0 "MF0;MLG01-02:MQM8700/U1" lid 1600 4xHDR
"""


def test_ibnetdiscover_style_records():
    net = parse_netfile(IBNETDISCOVER_STYLE, "x.net")
    assert [n.kind for n in net.nodes] == [SWITCH, SWITCH, CA]
    leaf, spine, ca = net.nodes
    assert leaf.description == "MF0;MLG01-02:MQM8700/U1" and leaf.nports == 41
    assert leaf.guid == 0x1C34DA0300728866 and spine.guid == 0x1C34DA030060A40C
    assert ca.guid == 0x1C34DA0300608820 and ca.port_guid(1) == 0x1C34DA0300608821
    assert leaf.ports[39].remote_id == spine.node_id and leaf.ports[39].remote_port == 39
    assert (leaf.ports[1].width, leaf.ports[1].speed) == ("4x", "HDR")
    assert len(net.links) == 2  # each cable is listed from both ends
    assert net.max_lid == 1600
    assert net.total_ports == 42 + 42 + 1


def test_find_by_id_description_and_guid():
    net = parse_netfile(IBNETDISCOVER_STYLE)
    ca = net.nodes[2]
    assert net.find("H-1c34da0300608820") is ca
    assert net.find("selene-swift-01 HCA-2") is ca
    assert net.find("0x1c34da0300608820") is ca  # node GUID
    assert net.find("1c34da0300608821") is ca  # port GUID, without 0x
    assert net.find("MF0;CSPINE1-80:MQM8700/U1") is net.nodes[1]
    assert net.find("nothing") is None


def test_ambiguous_description_is_an_error():
    text = 'Switch 4 "a"\t# "same"\n[1] "b"[1]\n\nSwitch 4 "b"\t# "same"\n[1] "a"[1]\n'
    net = parse_netfile(text, "amb.net")
    with pytest.raises(NetfileError, match="ambiguous"):
        net.find("same")
    assert net.find("a").node_id == "a"


def test_default_guids_follow_ibsim_numbering(realdata):
    """Without guid lines ibsim numbers CAs from 0x100000 (nports + 1 GUIDs each), switches from 0x200000."""
    net = read_netfile(realdata / "ibsim_net" / "ibsim_net.2sw2path4hca")
    by_id = {n.node_id: n for n in net.nodes}
    assert by_id["Switch1"].guid == 0x200000 and by_id["Switch2"].guid == 0x200001
    assert [by_id[f"Hca{i}"].guid for i in (1, 2, 3, 4)] == [0x100000, 0x100003, 0x100006, 0x100009]


def test_selene_compute_reads_whole(realdata):
    text = gzip.decompress((realdata / "ibnetdiscover" / "selene_compute.ibnetdiscover.txt.gz").read_bytes())
    net = parse_netfile(text.decode(), "selene")
    assert len(net.switches) == 666 and len(net.cas) == 4341  # as SOURCES.md describes the capture
    assert all(n.nports == 41 for n in net.switches)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('Switch 8 "S1"\n[1] "S1"[2]\n[x] "S1"[3]\n', r"bad\.net:3: cannot parse port line"),
        ('Switch 8 "S1"\n[9] "S1"[2]\n', r"bad\.net:2: port 9 outside 0\.\.8"),
        ('Hca 2 "H1"\n[0] "H1"[1]\n', r"bad\.net:2: port 0 outside 1\.\.2"),
        ('Hca 2 "H1"\n\nHca 2 "H1"\n', r"bad\.net:3: duplicate node id 'H1'"),
        ('Switch 300 "S1"\n', r"bad\.net:1: 'S1' has 300 ports"),
        ("Switch 8 S1\n", r"bad\.net:1: cannot parse node header"),
        ('Hca 2 "H1"\n[1] "ghost"[1]\n', r"bad\.net:1: 'H1' port 1 links to undeclared node 'ghost'"),
        ("caguid=nothing\n", r"bad\.net:1: bad GUID assignment"),
        ("# only comments\n", r"bad\.net: no Switch/Ca/Hca node records"),
        ('Hca 2 "a#b"\n', r"reserved"),
    ],
)
def test_errors_say_where(text, message):
    with pytest.raises(NetfileError, match=message):
        parse_netfile(text, "bad.net")


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_LINES = st.sampled_from(
    [
        'Switch 8 "S1" # "MF0;leaf-01:MQM8700/U1" enhanced port 0 lid 1 lmc 0',
        'Switch\t4 "S2"',
        'Hca 2 "H1"',
        'Ca 1 "H2" # "host002 mlx5_0"',
        '[1] "S1"[1]',
        '[2] "H1"[1] # "x" lid 3 4xHDR',
        '[1](abc) "S2"[3] # lid 0 lmc 0 "S2" lid 0 4xEDR',
        "[x",
        "caguid=0x100",
        "switchguid=+0x10",
        "",
        "# comment",
        'Rt 2 "R1"',
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_LINES, st.text(max_size=40)), max_size=30))
def test_reader_either_parses_or_raises_a_located_netfile_error(lines):
    text = "\n".join(lines)
    try:
        net = parse_netfile(text, "fuzz.net")
    except NetfileError as exc:
        assert str(exc).startswith("fuzz.net")
        return
    known = {n.node_id for n in net.nodes}
    assert all(p.remote_id in known for n in net.nodes for p in n.ports.values())
