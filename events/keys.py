"""Natural keys of the objects events concern (docs/design.md "Contracts").

node = node GUID; port = ``"<node guid>/<port>"``; link = ``"<guid>/<port>-<guid>/<port>"`` with
the lower ``(guid, port)`` first. Pure functions, no Django import.
"""

from __future__ import annotations


def port_key(node_guid: str, port_num: int) -> str:
    """Key of a port: ``"0x0002c90300a1b2c3/7"``."""
    return f"{node_guid}/{port_num}"


def link_key(a: tuple[str, int], b: tuple[str, int]) -> str:
    """Key of the link between ports ``a`` and ``b`` (``(node guid, port)`` each), order-free."""
    lo, hi = sorted([a, b], key=lambda gp: (int(gp[0], 16), gp[1]))
    return f"{port_key(*lo)}-{port_key(*hi)}"


def split_port_key(key: str) -> tuple[str, int]:
    """Inverse of :func:`port_key`.

    Raises:
        ValueError: ``key`` is not ``"<guid>/<port>"``.
    """
    guid, sep, num = key.rpartition("/")
    if not sep or not guid or not num.isdigit():
        raise ValueError(f"{key!r} is not a port key '<guid>/<port>'")
    return guid, int(num)


def split_link_key(key: str) -> tuple[tuple[str, int], tuple[str, int]]:
    """Inverse of :func:`link_key`: the two ``(node guid, port)`` ends.

    Raises:
        ValueError: ``key`` is not ``"<guid>/<port>-<guid>/<port>"``.
    """
    left, sep, right = key.partition("-")
    if not sep:
        raise ValueError(f"{key!r} is not a link key '<guid>/<port>-<guid>/<port>'")
    return split_port_key(left), split_port_key(right)
