"""Topology parsers (pure functions, no Django): tool text → :class:`~fabric.parsers.records.Topology`.

:func:`detect_and_parse` picks the parser from the text: OpenSM/ibdiagnet ``subnet.lst``
(``{ SW Ports:.. } { .. } PHY=4x LOG=ACT``), ``ibnetdiscover -p`` (``SW  1719 10 0x.. 4x EDR - CA ..``)
or else the default ``ibnetdiscover`` format (which also covers ibsim netfiles).
"""

from __future__ import annotations

import re

from .ibnetdiscover import parse_ibnetdiscover, parse_ports
from .records import ParseWarning, Topology, TopologyParseError
from .subnet_lst import parse_subnet_lst

__all__ = [
    "ParseWarning",
    "Topology",
    "TopologyParseError",
    "detect_and_parse",
    "detect_format",
    "parse_ibnetdiscover",
    "parse_ports",
    "parse_subnet_lst",
]

_LST = re.compile(r"^\s*\{\s*(SW|CA|Rt|RT)(?:-SM)?\s+Ports:", re.MULTILINE)
_PORTS = re.compile(r"^\s*(CA|SW|RT)\s+\d+\s+\d+\s+0x[0-9a-fA-F]+\s+\d+x\s", re.MULTILINE)
_NETDISCOVER = re.compile(r'^\s*(Switch|Ca|Hca|Rt)\s*\d+\s*"', re.MULTILINE | re.IGNORECASE)


def detect_format(text: str) -> str:
    """``"subnet_lst"``, ``"ports"`` or ``"ibnetdiscover"`` (the default) for ``text``."""
    head = text[:200_000]
    if _NETDISCOVER.search(head):
        return "ibnetdiscover"
    if _LST.search(head):
        return "subnet_lst"
    if _PORTS.search(head):
        return "ports"
    return "ibnetdiscover"


def detect_and_parse(text: str, source: str = "<text>") -> Topology:
    """Parse ``text`` with the parser its format needs (see :func:`detect_format`).

    Raises:
        TopologyParseError: the text is not a topology in any supported format.
    """
    fmt = detect_format(text)
    if fmt == "subnet_lst":
        return parse_subnet_lst(text, source)
    if fmt == "ports":
        return parse_ports(text, source)
    return parse_ibnetdiscover(text, source)
