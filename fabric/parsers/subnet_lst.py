"""Parser of OpenSM ``subnet.lst`` / ibdiagnet ``.lst`` link lists (pure, no Django).

Format (OpenSM ``osm_dump.c`` ``dump_topology``; ibdm ``Fabric.cpp`` reads the same): one link per
line, each end in braces::

    { SW Ports:08 SystemGUID:.. NodeGUID:.. PortGUID:.. VenID:000002C9 DevID:A87C0000 Rev:000000A0
      {MT43132 Mellanox Technologies} LID:0002 PN:05 } { CA Ports:02 ... LID:0001 PN:01 } PHY=4x LOG=ACT SPD=5

Numbers are hex (``Ports:18`` = 24 ports, ``LID:003E`` = 62, ``PN:0A`` = port 10); ``DevID`` holds
the device id in its upper 16 bits; ``PHY`` is the active width, ``LOG`` the logical port state
(``DWN``/``INI``/``ARM``/``ACT``) and ``SPD`` the lane signalling rate in Gb/s (2.5/5/10; absent
in old files, then speed is left unknown).
"""

from __future__ import annotations

import re

from fabric.guid import guid_to_int
from fabric.keys import link_ends

from .records import (
    CA,
    MAX_UNICAST_LID,
    PHYS_LINKUP,
    ROUTER,
    STATE_ACTIVE,
    STATE_ARMED,
    STATE_DOWN,
    STATE_INIT,
    SWITCH,
    LinkRecord,
    NodeRecord,
    PortRecord,
    Topology,
    TopologyParseError,
    split_lines,
)

_SIDE = (
    r"\{\s*(SW|CA|Rt|RT)(?:-SM)?\s+Ports:([0-9A-Fa-f]+)\s+SystemGUID:([0-9A-Fa-f]+)\s+NodeGUID:([0-9A-Fa-f]+)\s+"
    r"PortGUID:([0-9A-Fa-f]+)\s+VenID:([0-9A-Fa-f]+)\s+DevID:([0-9A-Fa-f]+)\s+Rev:([0-9A-Fa-f]+)\s+"
    r"\{(.*?)\}\s+LID:([0-9A-Fa-f]+)\s+PN:([0-9A-Fa-f]+)\s*\}"
)
_LINE = re.compile(r"^\s*" + _SIDE + r"\s*" + _SIDE + r"\s*(.*)$")
_TYPES = {"SW": SWITCH, "CA": CA, "RT": ROUTER}
_LOG = {"ACT": STATE_ACTIVE, "ARM": STATE_ARMED, "INI": STATE_INIT, "DWN": STATE_DOWN}
_SPD = {"2.5": "SDR", "5": "DDR", "10": "QDR", "14": "FDR", "25": "EDR", "50": "HDR", "100": "NDR"}


def parse_subnet_lst(text: str, source: str = "<text>") -> Topology:
    """Parse a ``subnet.lst`` into a :class:`~fabric.parsers.records.Topology` (see module doc).

    A line that is not a link is warned and skipped; a link reusing a port already linked is warned
    and skipped.

    Raises:
        TopologyParseError: no link line at all (pointing at the first line that is not one).
    """
    topo = Topology(format="subnet_lst", source=source)
    linked: dict[tuple[str, int], tuple[str, int]] = {}
    parsed = 0
    first_junk = 0
    for idx, raw in enumerate(split_lines(text), 1):
        line = raw.strip()
        if not line or line[0] == "#":
            continue
        m = _LINE.match(line)
        if not m:
            if not first_junk:
                first_junk = idx
            topo.warn(idx, f"not a subnet.lst link line, skipped: {line[:60]!r}")
            continue
        parsed += 1
        g = m.groups()
        a = _side(topo, g[0:11], idx)
        b = _side(topo, g[11:22], idx)
        tail = dict(kv.split("=", 1) for kv in g[22].split() if "=" in kv)
        width = tail.get("PHY", "").lower()
        speed = _SPD.get(tail.get("SPD", ""), "")
        state = _LOG.get(tail.get("LOG", "").upper(), 0)
        for port in (a, b):
            port.width, port.speed = width, speed
            port.state = state
            port.phys_state = PHYS_LINKUP
        key = link_ends(a.node_guid, a.port_num, b.node_guid, b.port_num)
        if key in topo.links:
            continue
        ends = [(a.node_guid, a.port_num), (b.node_guid, b.port_num)]
        if any(e in linked for e in ends):
            topo.warn(idx, f"port {ends[0][1]} of {ends[0][0]} or its peer is already linked; line skipped")
            continue
        linked[ends[0]], linked[ends[1]] = ends[1], ends[0]
        (ga, pa), (gb, pb) = key
        topo.links[key] = LinkRecord(ga, pa, gb, pb, width, speed, idx)
    if not parsed:
        raise TopologyParseError(
            "not a subnet.lst: no '{ SW Ports:.. } { .. }' link line", source, first_junk or 1
        )
    return topo


def _side(topo: Topology, g: tuple, idx: int) -> PortRecord:
    ntype, nports, sysimg, nguid, pguid, ven, dev, _rev, desc, lid, pn = g
    guid = f"0x{guid_to_int(nguid):016x}"
    node_type = _TYPES[ntype.upper()]
    lid_value = int(lid, 16)
    if lid_value > MAX_UNICAST_LID:
        topo.warn(idx, f"LID {lid_value} of {guid} is outside the unicast range; left unset")
        lid_value = 0
    node = topo.nodes.get(guid)
    if node is None:
        dev_value = int(dev, 16)
        if dev_value > 0xFFFF and not dev_value & 0xFFFF:
            dev_value >>= 16
        node = topo.nodes[guid] = NodeRecord(
            guid=guid,
            node_type=node_type,
            description=desc,
            num_ports=int(nports, 16),
            system_image_guid=f"0x{guid_to_int(sysimg):016x}",
            vendor_id=int(ven, 16),
            device_id=dev_value or None,
            lid=(lid_value or None) if node_type == SWITCH else None,
            name=guid,
            line=idx,
        )
    port_num = int(pn, 16)
    if port_num > 255 or int(nports, 16) > 255:
        raise TopologyParseError(
            f"port {pn[:24]} of {nports[:24]} is not a port number (0-255)", topo.source, idx
        )
    key = (guid, port_num)
    port = topo.ports.get(key)
    if port is None:
        port = topo.ports[key] = PortRecord(guid, port_num, line=idx)
        port.port_guid = f"0x{guid_to_int(pguid):016x}"
        port.lid = lid_value or None
    return port
