"""Natural keys (``fabric.keys``): one definition for the parsers, ingest and events."""

from __future__ import annotations

import pytest

from fabric import keys
from fabric.parsers import detect_and_parse

A = "0x0002c90300000010"
B = "0x0002c903000000ff"


def test_port_key_and_its_inverse():
    assert keys.port_key(A, 7) == "0x0002c90300000010/7"
    assert keys.split_port_key("0x0002c90300000010/7") == (A, 7)


@pytest.mark.parametrize("bad", ["", "0x1", "0x1/", "/3", "0x1/x"])
def test_split_port_key_rejects(bad):
    with pytest.raises(ValueError, match="is not a port key"):
        keys.split_port_key(bad)


def test_link_ends_put_the_lower_guid_then_port_first():
    assert keys.link_ends(B, 1, A, 9) == ((A, 9), (B, 1))
    assert keys.link_ends(A, 9, B, 1) == ((A, 9), (B, 1))
    assert keys.link_ends(A, 9, A, 2) == ((A, 2), (A, 9))  # a loop on one switch: by port
    # GUIDs compare as numbers (unpadded input too): 0xff < 0x100, although "0xff" > "0x100" as text
    assert keys.link_ends("0xff", 1, "0x100", 1) == (("0xff", 1), ("0x100", 1))


def test_link_key_is_order_free_and_splits_back():
    key = keys.link_key((B, 1), (A, 9))
    assert key == keys.link_key((A, 9), (B, 1)) == f"{A}/9-{B}/1"
    assert keys.split_link_key(key) == ((A, 9), (B, 1))
    assert keys.link_key_str(keys.link_ends(B, 1, A, 9)) == key
    with pytest.raises(ValueError, match="is not a link key"):
        keys.split_link_key(f"{A}/9")


def test_events_use_the_same_functions():
    from events import keys as event_keys

    assert (event_keys.port_key, event_keys.link_key, event_keys.split_link_key) == (
        keys.port_key,
        keys.link_key,
        keys.split_link_key,
    )


def test_parsed_links_are_keyed_by_link_ends():
    text = (
        'Switch 2 "S-0002c903000000ff" # "leaf" base port 0 lid 3 lmc 0\n'
        '[1] "H-0002c90300000010"[1](2c90300000011) # "host mlx5_0" lid 5 4xHDR\n'
        "\n"
        'Ca 1 "H-0002c90300000010" # "host mlx5_0"\n'
        '[1](2c90300000011) "S-0002c903000000ff"[1] # lid 5 lmc 0 "leaf" lid 3 4xHDR\n'
    )
    topo = detect_and_parse(text, source="t.topo")
    assert list(topo.links) == [((A, 1), (B, 1))]
    assert keys.link_key_str(next(iter(topo.links))) == f"{A}/1-{B}/1"
