"""The routes of one fabric as plain arrays (pure, no Django): what every path computation reads.

A :class:`RouteTables` is built once per routing snapshot (``routing.services.current_routes``
caches it by the snapshot's digest) from three things:

* the switches' unicast LinearForwardingTables (IBTA Vol 1 14.2.5.10): ``lfts[s][dlid]`` is the
  port switch ``s`` forwards a packet for destination LID ``dlid`` to (0: the switch itself,
  255 or beyond the table: dropped, no route);
* the links of the stored topology: which switch port leads to which switch port or CA port;
* the CA ports' LIDs (base LID and LMC: a port answers ``2**lmc`` LIDs, IBTA Vol 1 7.11.1).

Indices: switches are ``0..len(switch_guids)-1``, CA ports (endpoints) ``0..len(ca_guids)-1``.
A *directed port* (the egress of a link) is an int: ``s * 256 + p`` for port ``p`` of switch
``s`` (:func:`RouteTables.switch_port`), and ``-1 - e`` for the port of CA endpoint ``e`` (its
one uplink). :meth:`RouteTables.port_key` turns either into ``(node GUID, port number)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .parsers import UNASSIGNED

#: Peer kinds in :attr:`RouteTables.peer`
NONE, SWITCH, CA = 0, 1, 2


@dataclass
class RouteTables:
    """Forwarding tables + the links they forward over (see the module docstring).

    ``switch_guids``/``switch_names``/``switch_lids``: per switch index. ``lfts``: per switch, the
    LFT as bytes (index = destination LID). ``peer``: per switch, a list indexed by port number of
    ``(kind, index, port)``: ``(SWITCH, s2, p2)``, ``(CA, e, port)`` or ``(NONE, -1, 0)``.
    ``ca_guids``/``ca_ports``/``ca_names``/``ca_lids``/``ca_lmc``: per CA endpoint (node GUID, port
    number, node name, base LID, LMC); ``ca_attach[e]`` = ``(switch index, switch port)`` of the
    switch the endpoint is cabled to, or None (unlinked, or cabled to another CA).
    ``lid_owner``: LID -> ``(SWITCH, s)`` or ``(CA, e)`` for every LID of an endpoint or switch.
    """

    switch_guids: list[str]
    switch_names: list[str]
    switch_lids: list[int | None]
    lfts: list[bytes]
    peer: list[list[tuple[int, int, int]]]
    ca_guids: list[str]
    ca_ports: list[int]
    ca_names: list[str]
    ca_lids: list[int]
    ca_lmc: list[int]
    ca_attach: list[tuple[int, int] | None]
    lid_owner: dict[int, tuple[int, int]] = field(default_factory=dict)
    switch_index: dict[str, int] = field(default_factory=dict)
    #: per switch, ``next_switch[s][p]`` = the switch index port ``p`` leads to, -1 otherwise
    next_switch: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.switch_index = {g: i for i, g in enumerate(self.switch_guids)}
        if not self.lid_owner:
            for s, lid in enumerate(self.switch_lids):
                if lid:
                    self.lid_owner[lid] = (SWITCH, s)
            for e, (lid, lmc) in enumerate(zip(self.ca_lids, self.ca_lmc, strict=True)):
                if lid:
                    for k in range(1 << lmc):
                        self.lid_owner[lid + k] = (CA, e)
        self.next_switch = [[idx if kind == SWITCH else -1 for kind, idx, _p in ports] for ports in self.peer]

    @staticmethod
    def switch_port(s: int, p: int) -> int:
        """The directed-port id of port ``p`` of switch ``s``."""
        return s * 256 + p

    def port_key(self, code: int) -> tuple[str, int]:
        """``(node GUID, port number)`` of a directed-port id (switch port or CA endpoint)."""
        if code < 0:
            e = -1 - code
            return self.ca_guids[e], self.ca_ports[e]
        return self.switch_guids[code >> 8], code & 0xFF

    def out_port(self, s: int, dlid: int) -> int:
        """The port switch ``s`` forwards ``dlid`` to (255 when unassigned or beyond its table)."""
        lft = self.lfts[s]
        return lft[dlid] if dlid < len(lft) else UNASSIGNED

    def ca_lid_list(self) -> list[int]:
        """The base LID of every CA endpoint that has one, in endpoint order."""
        return [lid for lid in self.ca_lids if lid]


def build_tables(
    switches: list[tuple[str, str, int | None, bytes, int]],
    cas: list[tuple[str, int, str, int | None, int]],
    links: list[tuple[str, int, str, int]],
) -> RouteTables:
    """Build :class:`RouteTables` from plain rows.

    ``switches``: ``(node GUID, name, LID, LFT bytes, number of ports)``; ``cas``: ``(node GUID,
    port number, name, base LID or None, LMC)``; ``links``: ``(GUID a, port a, GUID b, port b)``
    (either order). A link to a node not in ``switches``/``cas`` is ignored.
    """
    sidx = {g: i for i, (g, *_r) in enumerate(switches)}
    eidx = {(g, p): i for i, (g, p, *_r) in enumerate(cas)}
    peer: list[list[tuple[int, int, int]]] = [
        [(NONE, -1, 0)] * (max(n, 1) + 1) for (_g, _n, _l, _t, n) in switches
    ]
    attach: list[tuple[int, int] | None] = [None] * len(cas)

    def end(guid: str, port: int) -> tuple[int, int, int] | None:
        if guid in sidx:
            return (SWITCH, sidx[guid], port)
        if (guid, port) in eidx:
            return (CA, eidx[guid, port], port)
        return None

    for ga, pa, gb, pb in links:
        a, b = end(ga, pa), end(gb, pb)
        if a is None or b is None:
            continue
        for x, y in ((a, b), (b, a)):
            if x[0] == SWITCH:
                ports = peer[x[1]]
                if x[2] >= len(ports):
                    ports.extend([(NONE, -1, 0)] * (x[2] + 1 - len(ports)))
                ports[x[2]] = y
            elif y[0] == SWITCH:
                attach[x[1]] = (y[1], y[2])
    return RouteTables(
        switch_guids=[s[0] for s in switches],
        switch_names=[s[1] for s in switches],
        switch_lids=[s[2] for s in switches],
        lfts=[s[3] for s in switches],
        peer=peer,
        ca_guids=[c[0] for c in cas],
        ca_ports=[c[1] for c in cas],
        ca_names=[c[2] for c in cas],
        ca_lids=[c[3] or 0 for c in cas],
        ca_lmc=[c[4] or 0 for c in cas],
        ca_attach=attach,
    )
