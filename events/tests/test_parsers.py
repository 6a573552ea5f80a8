"""sminfo parser on real output ($WEFT_REALDATA/sminfo) and on bad input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabric.parsers.sminfo import SAQueryParseError, SMInfoParseError, parse_saquery_sm_ports, parse_sminfo


def test_real_cexec_capture_with_wrapped_lines(realdata):
    path = realdata / "sminfo" / "ompi_users_2008-11_7361_sminfo_cexec.txt"
    text = path.read_text()
    records = parse_sminfo(text, source=str(path))
    # One record per "--------- nXX---------" host block of the capture.
    hosts = [line.strip("- ").strip() for line in text.splitlines() if line.startswith("---------")]
    assert [r.host for r in records] == hosts
    assert len(records) == text.count("sminfo:")
    for r in records:
        assert r.guid == "0x0002c90200259201" and r.lid == 2 and r.is_master and r.state_name == "MASTER"
    counts = [r.activity_count for r in records]
    assert counts == sorted(counts) and len(set(counts)) == len(counts)


def test_single_line_as_the_tool_prints_it():
    (r,) = parse_sminfo(
        "sminfo: sm lid 1 sm guid 0xf452140300104a71, activity count 1234 priority 14 state 2 SMINFO_STANDBY\n"
    )
    assert (r.lid, r.guid, r.activity_count, r.priority, r.state, r.state_name) == (
        1,
        "0xf452140300104a71",
        1234,
        14,
        2,
        "STANDBY",
    )


@pytest.mark.parametrize(
    "text, where",
    [
        ("", ":1:"),
        ("ibwarn: no SM\n", ":1:"),
        ("hello\nsminfo: sm lid x sm guid 0x1, activity count 1 priority 0 state 3 SMINFO_MASTER\n", ":2:"),
        ("sminfo: sm lid 1 sm guid 0x1, activity count 1 priority 0 state 7 X\n", ":1:"),
        ("sminfo: sm lid 1 sm guid 0x1, activity count 1 priority 99 state 3 SMINFO_MASTER\n", ":1:"),
    ],
)
def test_bad_input_names_the_line(text, where):
    with pytest.raises(SMInfoParseError) as exc:
        parse_sminfo(text, source="f.txt")
    assert f"f.txt{where}" in str(exc.value)


@given(st.text(max_size=300))
def test_fuzz_never_crashes_otherwise(text):
    try:
        parse_sminfo(text)
    except SMInfoParseError:
        pass


def test_saquery_sm_ports_bad_input_names_the_line():
    with pytest.raises(SAQueryParseError, match=r"x:1: no 'IsSM ports'"):
        parse_saquery_sm_ports("PortInfoRecord dump:\n", source="x")
    with pytest.raises(SAQueryParseError, match=r"x:3: EndPortLid 'zz'"):
        parse_saquery_sm_ports(
            "IsSM ports\nPortInfoRecord dump:\n\t\tEndPortLid..............zz\n", source="x"
        )
