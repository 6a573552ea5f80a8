"""Natural keys of fabric objects (docs/design.md "Contracts"), the one definition (pure, no Django).

* node: its node GUID, ``"0x0002c90300a1b2c3"``;
* port: ``"<node guid>/<port number>"``, e.g. ``"0x0002c90300a1b2c3/7"``;
* link: ``"<guid>/<port>-<guid>/<port>"``, the lower end first.

Ends of a link are ``(node guid, port number)`` pairs; "lower" compares the GUIDs as 64-bit
numbers, then the port numbers. For canonical GUIDs (``fabric.guid.normalize_guid``: ``0x`` + 16
lowercase hex digits, as the parsers and the database hold them) that is also string order.
Parsers key links by :func:`link_ends`; events and alarms name objects by these strings.
"""

from __future__ import annotations

#: One end of a link: ``(node guid, port number)``.
End = tuple[str, int]
#: A link by its two ends, lower end first (see :func:`link_ends`).
LinkKey = tuple[End, End]


def port_key(node_guid: str, port_num: int) -> str:
    """Key of a port: ``"0x0002c90300a1b2c3/7"``."""
    return f"{node_guid}/{port_num}"


def port_name(node_name: str, port_num: int) -> str:
    """Display name of a port: ``"leaf-01 [7]"``, the node's display name (``str(node)``, or a
    parsed record's description, else its GUID), a space and the port number in brackets.

    The one format of port names on pages, in alarms, events and mails (``Port.__str__`` uses it).
    """
    return f"{node_name} [{port_num}]"


def link_name(a: tuple[str, int], b: tuple[str, int]) -> str:
    """Display name of a link from its two ends ``(node display name, port)``:
    ``"spine-01 [1] <-> leaf-01 [7]"`` (``Link.__str__``, link alarms and events, mails)."""
    return f"{port_name(*a)} <-> {port_name(*b)}"


def _order(end: End) -> tuple[int, int]:
    return int(end[0], 16), end[1]


def link_ends(guid_a: str, port_a: int, guid_b: str, port_b: int) -> LinkKey:
    """The two ends of the link between ``(guid_a, port_a)`` and ``(guid_b, port_b)``, lower first.

    Raises:
        ValueError: a GUID is not hexadecimal.
    """
    a, b = (guid_a, port_a), (guid_b, port_b)
    return (a, b) if _order(a) <= _order(b) else (b, a)


def link_key_str(ends: LinkKey) -> str:
    """Key of a link given as :func:`link_ends` (lower end first): ``"<guid>/<port>-<guid>/<port>"``."""
    (ga, pa), (gb, pb) = ends
    return f"{ga}/{pa}-{gb}/{pb}"


def link_key(a: End, b: End) -> str:
    """Key of the link between ports ``a`` and ``b`` (``(node guid, port)`` each), order-free.

    Raises:
        ValueError: a GUID is not hexadecimal.
    """
    return link_key_str(link_ends(*a, *b))


def split_port_key(key: str) -> End:
    """Inverse of :func:`port_key`.

    Raises:
        ValueError: ``key`` is not ``"<guid>/<port>"``.
    """
    guid, sep, num = key.rpartition("/")
    if not sep or not guid or not num.isdigit():
        raise ValueError(f"{key!r} is not a port key '<guid>/<port>'")
    return guid, int(num)


def split_link_key(key: str) -> LinkKey:
    """Inverse of :func:`link_key`: the two ``(node guid, port)`` ends.

    Raises:
        ValueError: ``key`` is not ``"<guid>/<port>-<guid>/<port>"``.
    """
    left, sep, right = key.partition("-")
    if not sep:
        raise ValueError(f"{key!r} is not a link key '<guid>/<port>-<guid>/<port>'")
    return split_port_key(left), split_port_key(right)
