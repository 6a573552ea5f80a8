"""OpenSM partitions.conf parser/generator and the smpquery pkeys parser (pure, no database).

Every real file in ``$WEFT_REALDATA/opensm/*partitions.conf`` parses with its values asserted and
round-trips through the generator; bad input fails located (file:line)."""

from __future__ import annotations

import pytest

from fabric.parsers.partitions import (
    MAX_LINE,
    McastGroupRecord,
    MemberRecord,
    PartitionRecord,
    PartitionsParseError,
    c_strtoul,
    generate,
    parse_partitions,
    parse_smpquery_pkeys,
)

REAL = ("bentwire_partitions.conf", "esos_partitions.conf", "linuxrdma_2021-03_ceph.partitions.conf")


def _parse(realdata, name):
    path = realdata / "opensm" / name
    return parse_partitions(path.read_text(), source=str(path))


def test_every_realdata_partitions_file_is_covered(realdata):
    assert sorted(p.name for p in (realdata / "opensm").glob("*partitions.conf")) == sorted(REAL)


def test_bentwire_high_bit_is_membership_not_pkey(realdata):
    conf = _parse(realdata, "bentwire_partitions.conf")
    got = [(p.name, p.pkey, p.pkey_text, p.ipoib) for p in conf.partitions]
    assert got == [
        ("Default", 0x7FFF, "0xffff", True),
        ("DMZ", 0x0001, "0x8001", True),
        ("private0", 0x0002, "0x8002", True),
        ("private1", 0x0003, "0x8003", True),
        ("ipoib", 0x1000, "0x9000", True),
    ]
    for p in conf.partitions:
        assert [(m.guid, m.membership) for m in p.members] == [("ALL", "full"), ("SELF", "full")]
    assert [(w.line, w.message.split(":")[0]) for w in conf.warnings] == [
        (1, "PKey 0xffff has the membership bit set"),
        (2, "PKey 0x8001 has the membership bit set"),
        (3, "PKey 0x8002 has the membership bit set"),
        (4, "PKey 0x8003 has the membership bit set"),
        (5, "PKey 0x9000 has the membership bit set"),
    ]


def test_esos_spaces_around_separators(realdata):
    conf = _parse(realdata, "esos_partitions.conf")
    (p,) = conf.partitions
    assert (p.name, p.pkey, p.ipoib, p.mtu, p.rate, p.scope) == ("Default", 0x7FFF, True, None, None, [])
    assert [(m.guid, m.membership) for m in p.members] == [("ALL", "full")]
    assert conf.warnings == []


def test_ceph_two_definitions_of_default_merge_with_mgid_groups(realdata):
    conf = _parse(realdata, "linuxrdma_2021-03_ceph.partitions.conf")
    (p,) = conf.partitions  # Default=0x7fff given twice: one partition (OpenSM merges by PKey)
    assert (p.name, p.pkey, p.ipoib, p.mtu, p.rate, p.scope, p.sl) == (
        "Default",
        0x7FFF,
        True,
        4,
        7,
        [2],
        None,
    )
    assert [(m.guid, m.membership, m.line) for m in p.members] == [
        ("ALL", "full", 2),
        ("SELF", "full", 2),
        ("ALL_SWITCHES", "full", 2),
    ]
    assert [(g.mgid, g.line) for g in p.mcast_groups] == [
        ("ff12:401b:ffff::ffff:ffff", 4), ("ff12:401b::ffff:ffff", 5), ("ff12:401b::1", 6),
        ("ff12:401b::2", 7), ("ff12:401b::16", 8), ("ff12:401b::fb", 9), ("ff12:401b::fc", 10),
        ("ff12:401b::101", 11), ("ff12:401b::202", 12), ("ff12:601b::1", 13), ("ff12:601b::2", 14),
        ("ff12:601b::16", 15), ("ff12:601b::fb", 16), ("ff12:601b::101", 17), ("ff12:601b::202", 18),
        ("ff12:601b::1:3", 19),
    ]  # fmt: skip
    assert conf.warnings == []


@pytest.mark.parametrize("name", REAL)
def test_realdata_round_trips(realdata, name):
    conf = _parse(realdata, name)
    text = generate(conf.partitions)
    again = parse_partitions(text, source="generated")
    assert again.semantics() == conf.semantics()
    assert again.warnings == []  # the generator writes nothing OpenSM would complain about
    assert generate(again.partitions) == text  # stable


def test_man_page_examples_membership_and_defmember():
    text = (
        "Default=0x7fff : ALL, SELF=full ;\n"
        "NewPartition=0x10 , ipoib : 0x123456=full, 0x3456789034=limi,  0x2134af2306 ;\n"
        "ShareIO = 0x80 , defmember=full : 0x123451, 0x123452;\n"
        "# 0x123453, 0x123454 will be limited\n"
        "ShareIO = 0x80 : 0x123453, 0x123454, 0x123455=full;\n"
        "ShareIO = 0x80 , defmember=full : 0x12345b,   0x12345c=limited,\n"
        "0x12345d;\n"
    )
    conf = parse_partitions(text)
    by = conf.by_pkey()
    assert {m.guid: m.membership for m in by[0x7FFF].members} == {"ALL": "limited", "SELF": "full"}
    assert {m.guid: m.membership for m in by[0x10].members} == {
        "0x0000000000123456": "full",
        "0x0000003456789034": "limited",  # "limi" is a prefix of limited
        "0x0000002134af2306": "limited",
    }
    assert {m.guid: m.membership for m in by[0x80].members} == {
        "0x0000000000123451": "full", "0x0000000000123452": "full", "0x0000000000123453": "limited",
        "0x0000000000123454": "limited", "0x0000000000123455": "full", "0x000000000012345b": "full",
        "0x000000000012345c": "limited", "0x000000000012345d": "full",
    }  # fmt: skip
    assert by[0x80].name == "ShareIO" and len(conf.partitions) == 3


def test_full_wins_over_limited_when_a_port_is_listed_twice():
    conf = parse_partitions("P=0x5 : 0x10=limited, 0x10=full, 0x11=full ;\nP=0x5 : 0x11=limited ;\n")
    assert {m.guid: m.membership for m in conf.partitions[0].members} == {
        "0x0000000000000010": "full",
        "0x0000000000000011": "full",
    }


def test_strtoul_bases_like_c():
    assert [c_strtoul(t) for t in ("0x7fff", "0X10", "017", "0", "42")] == [0x7FFF, 16, 15, 0, 42]
    for bad in ("0x", "09", "-1", "1e3", "", "x10"):
        with pytest.raises(ValueError):
            c_strtoul(bad)


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("Default=0x7fff : ALL=full ;\nBroken=0x10 ALL=full ;\n", 2, "no partition definition found"),
        ("Default=0x7fff : ALL=full ;\n\nP=0xzz : ALL ;\n", 3, "PKey '0xzz' is not a number"),
        ("P=0x10 :\n  0x1=full,\n  0xq2=full ;\n", 3, "bad PortGUID '0xq2'"),
        ("P=0x10 : 0=full ;\n", 1, "bad PortGUID '0'"),
        ("P=0x10, , ipoib : ALL ;\n", 1, "bad partition flags: empty flag"),
        ("P=0x10000 : ALL ;\n", 1, "PKey 0x10000 is wider than 16 bits"),
        ("# only a comment\n\n", 0, "no partition definition"),
        ("Default=0x7fff : ALL=full ;\r\nP=0x10 : ALL ;\r\n", 1, "carriage return (CRLF line end)"),
        ("Default=0x7fff : ALL=full ;\nemptyp=0x0a05, ipoib :\n ;\n", 3, "';' with nothing before it"),
        ("P=0x10 : ALL ;;\n", 1, "';' with nothing before it"),
        ("P=0x10 :\n\tmgid=ff12:401b::1\n\t;\n", 3, "';' with nothing before it"),
        ("P=0x10 : " + ", ".join(f"0x{i:016x}=full" for i in range(1, 200)) + " ;\n", 1, "line of 4"),
    ],
)
def test_bad_input_is_located(text, line, message):
    with pytest.raises(PartitionsParseError) as err:
        parse_partitions(text, source="site/partitions.conf")
    assert err.value.line == line
    assert message in err.value.message
    assert str(err.value).startswith(f"site/partitions.conf:{line}: ")


def test_unknown_flags_and_bad_values_warn_as_opensm_skips_them():
    conf = parse_partitions(
        "P=0x10, ipoib, mtu=9, rate=abc, sl=16, scope=2, scope=5, colour=red : ALL=fu ;\n"
    )
    (p,) = conf.partitions
    assert (p.mtu, p.rate, p.sl, p.scope, p.ipoib) == (None, None, None, [2, 5], True)
    assert [w.message for w in conf.warnings] == [
        "mtu=9 is not an IBTA MTU code (1-5): skipped",
        "rate='abc' is not a number: skipped (as OpenSM does)",
        "sl=16 is above 15: skipped",
        "unrecognized partition flag 'colour': ignored (as OpenSM does)",
    ]
    assert p.members[0].membership == "full"  # "fu" is a prefix of full


def _guids(n: int, base: int = 0x0002C90300000000) -> list[str]:
    return [f"0x{base + i:016x}" for i in range(n)]


def test_generator_wraps_2000_members_below_opensm_line_limit():
    members = [MemberRecord(g, "full") for g in _guids(2000)]
    rec = PartitionRecord(name="pool_a", pkey=0x0123, ipoib=True, mtu=5, rate=17, sl=3, members=members)
    text = generate([rec])
    lines = text.splitlines()
    assert max(map(len, lines)) <= 100 < MAX_LINE
    assert lines[:4] == [
        "Default=0x7fff, ipoib :",
        "\tALL=full, SELF=full ;",
        "",
        "pool_a=0x0123, ipoib, mtu=5, rate=17, sl=3 :",
    ]
    assert lines[-1].endswith("=full ;") and text.count(";") == 2
    again = parse_partitions(text).by_pkey()[0x0123]
    assert [m.guid for m in again.members] == [m.guid for m in members]
    wide = generate([rec], width=10_000)  # the cap is OpenSM's limit, whatever is asked
    assert max(map(len, wide.splitlines())) <= MAX_LINE
    assert parse_partitions(wide).semantics() == parse_partitions(text).semantics()


def test_generator_keeps_a_given_default_and_refuses_bad_records():
    default = PartitionRecord(
        "Default", 0x7FFF, members=[MemberRecord("ALL", "limited"), MemberRecord("SELF", "full")]
    )
    text = generate([PartitionRecord("x", 0x2, members=[MemberRecord("0x1", "both")]), default])
    assert text.splitlines()[0] == "Default=0x7fff :" and "0x0000000000000001=both ;" in text
    for bad, msg in [
        ([PartitionRecord("a", None)], "not in 0x0001-0x7fff"),
        ([PartitionRecord("a", 0x8001)], "not in 0x0001-0x7fff"),
        ([PartitionRecord("a", 5), PartitionRecord("b", 5)], "given twice"),
        ([PartitionRecord("bad name", 5)], "partition name"),
        ([PartitionRecord("a", 5, members=[MemberRecord("0x1", "half")])], "membership"),
    ]:
        with pytest.raises(ValueError, match=msg):
            generate(bad)


def test_smpquery_pkeys_table():
    text = (
        "   0: 0xffff 0x8010 0x0010 0x0000 0x0000 0x0000 0x0000 0x0000\n"
        "   8: 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000 0x8123\n"
        "64 pkeys capacity for this port\n"
    )
    t = parse_smpquery_pkeys(text)
    assert (t.entries, t.capacity) == ([0xFFFF, 0x8010, 0x0010, 0x8123], 64)
    assert [t.membership(p) for p in (0x7FFF, 0x10, 0x123, 0x124)] == ["full", "both", "full", None]
    with pytest.raises(PartitionsParseError, match="not a P_Key table row"):
        parse_smpquery_pkeys("ibwarn: [123] mad_rpc: _do_madrpc failed; dport (Lid 4)\n")


def test_generator_writes_an_empty_partition_on_one_line_opensm_accepts():
    pop = PartitionRecord("pool_1", 0x0A04, members=[MemberRecord("0x1", "full")])
    empty = PartitionRecord("emptyp", 0x0A05, ipoib=True)
    groups = PartitionRecord("g", 0x0A06, mcast_groups=[McastGroupRecord("ff12:401b::1", "sl=1")])
    text = generate([empty, pop, groups])
    lines = text.splitlines()
    assert "emptyp=0x0a05, ipoib : ;" in lines
    assert "\tmgid=ff12:401b::1,sl=1 ;" in lines
    # no ';' opens a line (what OpenSM misreads), and the file reads back the same
    assert not [line for line in lines if line.strip().startswith(";")]
    conf = parse_partitions(text).by_pkey()
    assert (conf[0x0A05].name, conf[0x0A05].members, conf[0x0A05].ipoib) == ("emptyp", [], True)
    assert [m.guid for m in conf[0x0A04].members] == ["0x0000000000000001"]
    assert [(g.mgid, g.flags) for g in conf[0x0A06].mcast_groups] == [("ff12:401b::1", "sl=1")]


@pytest.mark.parametrize(
    "text, line, message",
    [
        # 0xffff is 0x7fff with the membership bit: OpenSM reads it as the default partition
        ("Default=0x7fff : ALL=full ;\nstorage=0xffff : 0x10=full ;\n", 2, "PKey 0xffff is the default"),
        # two names, one PKey: OpenSM merges the second into the first
        (
            "a=0x10 : 0x1=full ;\n\nb=0x0010 : 0x2=full ;\n",
            3,
            "PKey 0x0010 is already partition 'a' (line 1)",
        ),
        # a default that lists some ports only cuts the others off the management partition
        ("Default=0x7fff, ipoib :\n  0x10=full, SELF=full ;\n", 1, "must keep every port a member"),
        ("x=0x20 : ALL ;\nDefault=0x7fff : ALL_CAS=full ;\n", 2, "must keep every port a member"),
    ],
)
def test_strict_refuses_what_opensm_rewrites_silently_located(text, line, message):
    lenient = parse_partitions(text, source="site.conf")  # OpenSM itself accepts these files
    assert lenient.partitions
    with pytest.raises(PartitionsParseError) as err:
        parse_partitions(text, source="site.conf", strict=True)
    assert (err.value.source, err.value.line) == ("site.conf", line)
    assert message in err.value.message, err.value.message


def test_strict_takes_full_defaults_and_one_name_defined_twice():
    for default in ("ALL=full", "ALL=limited, SELF=full", "ALL_CAS=full, ALL_SWITCHES=full, SELF=full"):
        conf = parse_partitions(f"Default=0x7fff : {default} ;\nDefault=0x7fff, ipoib : ;\n", strict=True)
        assert [(p.pkey, p.ipoib) for p in conf.partitions] == [(0x7FFF, True)]
    conf = parse_partitions("a=0x8001 : 0x1=full ;\na=0x0001 : 0x2 ;\n", strict=True)
    assert [(p.name, p.pkey, len(p.members)) for p in conf.partitions] == [("a", 1, 2)]
