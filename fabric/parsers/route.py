"""``ibaddr`` and ``ibtracert`` output (pure, no Django): the local port and a LID route.

* ``ibaddr`` (no argument: the local port the diags use) prints
  ``GID fe80::1c34:da03:40:11 LID start 0x1 end 0x1``: the GID's low 64 bits are the port GUID
  (IBTA Vol 1 4.1.1: a port's default GID = subnet prefix + port GUID), the LIDs its base..top.
* ``ibtracert <src lid> <dst lid>`` prints the route the switches' linear forwarding tables give::

      From ca {0x1c34da0300400010} portnum 1 lid 1-1 "host001 mlx5_0"
      [1] -> switch port {0x0c42a10300a00100}[1] lid 3-3 "leaf-01"
      [5] -> switch port {0x0c42a10300a00000}[1] lid 2-2 "spine-01"
      To switch {0x0c42a10300a00000} portnum 0 lid 2-2 "spine-01"

  Each hop line is ``[out port of the previous node] -> <type> port {GUID}[in port]``: the
  switch ports a packet crosses are the in port of each switch and the out port of the next line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.errors import LocatedError

from ..guid import normalize_guid


class RouteParseError(LocatedError):
    """``ibaddr``/``ibtracert`` printed nothing this parser reads (``"<source>:<line>: <message>"``)."""


_IBADDR = re.compile(r"GID\s+([0-9a-fA-F:]+)\s+LID start\s+(0x[0-9a-fA-F]+|\d+)")
_FROM = re.compile(r"^From (ca|switch|router) \{(0x[0-9a-fA-F]+)\} portnum (\d+)")
_HOP = re.compile(r"^\[(\d+)\] -> (ca|switch|router) port \{(0x[0-9a-fA-F]+)\}\[(\d+)\]")


@dataclass(frozen=True)
class LocalPort:
    """The local port: ``port_guid`` (canonical), ``lid`` (base LID)."""

    port_guid: str
    lid: int


def parse_ibaddr(text: str, *, source: str = "ibaddr") -> LocalPort:
    """The port GUID and base LID in ``ibaddr`` output.

    Raises:
        RouteParseError: no ``GID ... LID start ...`` line.
    """
    for line in text.splitlines():
        if m := _IBADDR.search(line):
            groups = (
                m.group(1).split("::")[-1].split(":") if "::" in m.group(1) else m.group(1).split(":")[-4:]
            )
            iid = "".join(g.rjust(4, "0") for g in groups[-4:]).rjust(16, "0")
            lid = int(m.group(2), 0)
            return LocalPort(port_guid=normalize_guid("0x" + iid), lid=lid)
    raise RouteParseError("no 'GID ... LID start ...' line", source, 0)


def parse_ibtracert(text: str, *, source: str = "ibtracert") -> list[tuple[str, int]]:
    """The switch ports (``(switch GUID, port number)``, in route order, in and out of each
    switch) of the route in ``ibtracert`` output; ``[]`` for a route with no switch.

    Raises:
        RouteParseError: no ``From ...`` line (the tool printed an error instead of a route).
    """
    prev: tuple[str, str] | None = None  # (type, guid) of the node the next hop leaves
    out: list[tuple[str, int]] = []
    for line in text.splitlines():
        line = line.strip()
        if m := _FROM.match(line):
            prev = (m.group(1), normalize_guid(m.group(2)))
        elif (m := _HOP.match(line)) and prev is not None:
            if prev[0] == "switch":
                out.append((prev[1], int(m.group(1))))
            kind, guid = m.group(2), normalize_guid(m.group(3))
            if kind == "switch":
                out.append((guid, int(m.group(4))))
            prev = (kind, guid)
    if prev is None:
        raise RouteParseError("no 'From ...' line: no route printed", source, 0)
    return out
