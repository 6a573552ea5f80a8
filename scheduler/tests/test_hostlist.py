"""Slurm host lists: the expander on Slurm's documented forms and on the real topology.conf files,
and the folder's round trip ``expand(fold(S)) == S`` (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.hostlist import HostlistError, check_name, expand, fold


@pytest.mark.parametrize(
    "expr,names",
    [
        ("tux[0-3,12,18-20]", ["tux0", "tux1", "tux2", "tux3", "tux12", "tux18", "tux19", "tux20"]),
        ("s[0-2,4]", ["s0", "s1", "s2", "s4"]),
        ("node[08-10]", ["node08", "node09", "node10"]),
        ("node[8-10]", ["node8", "node9", "node10"]),
        ("node[098-100]", ["node098", "node099", "node100"]),
        ("login[01,2]", ["login01", "login2"]),
        ("gpu[001,01]", ["gpu001", "gpu01"]),
        ("a,b c\td", ["a", "b", "c", "d"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
        ("node[1-2]-ib", ["node1-ib", "node2-ib"]),
        ("abacusc-0-[0-3]", ["abacusc-0-0", "abacusc-0-1", "abacusc-0-2", "abacusc-0-3"]),
        ("x[5],x5", ["x5", "x5"]),
        ("", []),
        ("  ,, ", []),
    ],
)
def test_expand(expr, names):
    assert expand(expr) == names


@pytest.mark.parametrize(
    "expr,where",
    [("gpu[1-", 3), ("gpu[3-1]", 4), ("gpu[a]", 4), ("gpu[]", 4), ("gpu[1,,2]", 6), ("gpu[-1]", 4),
     ("gpu[1-70000]", 4), ("a,gpu[2", 5)],
)  # fmt: skip
def test_expand_refuses_with_a_position(expr, where):
    with pytest.raises(HostlistError) as err:
        expand(expr)
    assert err.value.position == where and f"character {where + 1}" in str(err.value)


@pytest.mark.parametrize(
    "names,text",
    [
        (["gpu001", "gpu002", "gpu003", "gpu004", "gpu007"], "gpu[001-004,007]"),
        (["login01", "login2"], "login[01,2]"),
        (["gpu001", "gpu01"], "gpu[01,001]"),
        (["n098", "n099", "n100"], "n[098-100]"),
        (["n8", "n9", "n10"], "n[8-10]"),
        (["rack1-node05", "rack1-node06", "rack2-node05"], "rack1-node[05-06],rack2-node05"),
        (["solo7"], "solo7"),
        (["a", "b10", "b9"], "a,b[9-10]"),
        (["node1-ib", "node2-ib"], "node1-ib,node2-ib"),
        (["42", "43"], "42,43"),
    ],
)
def test_fold(names, text):
    assert fold(names) == text
    assert sorted(expand(text)) == sorted(names)


def test_fold_with_suffix():
    assert fold(["node1-ib", "node2-ib", "node3"], suffix=True) == "node3,node[1-2]-ib"


@pytest.mark.parametrize("bad", ["a b", "x[1]", "c,d", "e=f", "g#h", "", "tab\there"])
def test_fold_refuses_names_a_host_list_cannot_hold(bad):
    assert check_name(bad)
    with pytest.raises(HostlistError):
        fold(["ok1", bad])


PREFIXES = ["gpu", "login", "rack1-node", "a1b", "n", "dgx-a100-", "x.y", "srv_"]
TAILS = ["", "-ib", "a"]


@st.composite
def host_names(draw):
    prefix = draw(st.sampled_from(PREFIXES))
    value = draw(st.integers(0, 1200))
    width = draw(st.integers(len(str(value)), len(str(value)) + 3))
    tail = draw(st.sampled_from(TAILS))
    literal = draw(st.sampled_from(["", "", "", "", "head", "ctl-b"]))
    return literal or f"{prefix}{str(value).zfill(width)}{tail}"


@settings(max_examples=400, deadline=None)
@given(st.sets(host_names(), max_size=60), st.booleans())
def test_round_trip(names, suffix):
    text = fold(names, suffix=suffix)
    again = expand(text)
    assert len(again) == len(names) and set(again) == names
    assert fold(again, suffix=suffix) == text


@settings(max_examples=100, deadline=None)
@given(st.sets(st.integers(0, 3000), min_size=1, max_size=200), st.integers(1, 5))
def test_round_trip_of_dense_padded_sets(values, width):
    names = {f"gpu{str(v).zfill(width)}" for v in values}
    text = fold(names)
    assert sorted(expand(text)) == sorted(names)
    if all(len(str(v)) <= width for v in values):
        assert text.count("[") <= 1  # one bracket for one prefix and one width
