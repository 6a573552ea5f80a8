"""Read an ibsim netfile (ibnetdiscover format or ibsim's hand-written format) into plain records.

Pure Python, no Django. The lab needs to know, before ibsim runs, which nodes a netfile declares
(to size ibsim's tables, to resolve a node description or GUID to ibsim's node id for console
commands, and to pick the CA OpenSM runs on). The rules mirror ibsim's own parser
(``ibsim/sim_net.c`` of linux-rdma/ibsim 0.10, ``parse_netconf``/``parse_switch``/``parse_endnode``):

- a node record starts with ``Switch N "id"``, ``Ca N "id"``/``Hca N "id"`` or ``Rt N "id"``; the
  node description is the first quoted string after ``#`` on the header line (else the id);
- port lines start with ``[`` (``[p] "remote"[rp]`` or ``[p](portguid) "remote"[rp]``); a line that
  starts with anything else ends the record;
- ``switchguid=``/``caguid=``/``hcaguids=``/``rtguid=`` set the next GUID of that node type
  (``=`` absolute, ``+`` relative to the last absolute base); without them ibsim numbers CAs from
  0x100000 (a CA reserves ``nports + 1`` GUIDs: node GUID, then one port GUID per port) and
  switches from 0x200000 (one GUID, shared by all switch ports);
- a port comment ``# ... lid N 4xHDR`` gives width and speed (SDR..HDR in ibsim 0.10; NDR from 0.11).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

SWITCH = "Switch"
CA = "Ca"
ROUTER = "Rt"

#: ibsim's GUID bases per node type (``absguids`` in sim_net.c).
_GUID_BASE = {CA: 0x100000, SWITCH: 0x200000, ROUTER: 0x200000}

_HEADER_RE = re.compile(r"^(Switch|Hca|Ca|Rt)\s*(\d+)\s*\"([^\"]*)\"(.*)$")
_PORT_RE = re.compile(r"^\[(\d+)\]\s*(?:\(([^)]*)\))?\s*\"([^\"]*)\"\s*(?:\[(\d+)\])?(.*)$")
_RATE_RE = re.compile(r"lid\s+\d+\s+(\d+)x([A-Za-z0-9]+)")


class NetfileError(ValueError):
    """A netfile the lab cannot use; the message names the file and line."""


@dataclass
class NetPort:
    """One connected port line: local port number, remote node id and port, and width/speed."""

    port: int
    remote_id: str
    remote_port: int
    width: str | None = None  # "4x"
    speed: str | None = None  # "HDR"


@dataclass
class NetNode:
    """One node record of a netfile.

    ``node_id`` is ibsim's id (the quoted string after the port count, used by console commands and
    ``SIM_HOST``), ``description`` the NodeDescription ibsim reports (the quoted ``# "..."`` comment,
    or the id when there is none), ``guid`` the node GUID ibsim gives it (an int).
    """

    kind: str  # SWITCH, CA or ROUTER
    node_id: str
    description: str
    nports: int
    guid: int
    line: int
    ports: dict[int, NetPort] = field(default_factory=dict)

    def port_guid(self, port: int) -> int:
        """GUID of ``port``: the node GUID for a switch, node GUID + port for a CA (ibsim's rule)."""
        return self.guid if self.kind == SWITCH else self.guid + port


@dataclass
class Netfile:
    """All node records of a netfile, with lookups by id, description and GUID."""

    nodes: list[NetNode]
    source: str = "<netfile>"
    max_lid: int = 0  # highest LID the netfile's comments mention (sizes ibsim's LID table)
    _linked: dict[str, set[int]] | None = field(default=None, repr=False, compare=False)

    @property
    def switches(self) -> list[NetNode]:
        return [n for n in self.nodes if n.kind == SWITCH]

    @property
    def cas(self) -> list[NetNode]:
        return [n for n in self.nodes if n.kind == CA]

    @property
    def links(self) -> set[tuple[tuple[str, int], tuple[str, int]]]:
        """Distinct links as sorted ``((id, port), (id, port))`` pairs (each appears on both ends)."""
        out = set()
        for node in self.nodes:
            for p in node.ports.values():
                a, b = (node.node_id, p.port), (p.remote_id, p.remote_port)
                out.add((a, b) if a <= b else (b, a))
        return out

    def linked_ports(self, node: NetNode) -> list[int]:
        """Port numbers of ``node`` that have a cable, whichever end of the link the netfile lists."""
        if self._linked is None:
            linked: dict[str, set[int]] = {}
            for other in self.nodes:
                for p in other.ports.values():
                    linked.setdefault(other.node_id, set()).add(p.port)
                    linked.setdefault(p.remote_id, set()).add(p.remote_port)
            self._linked = linked
        return sorted(self._linked.get(node.node_id, ()))

    @property
    def total_ports(self) -> int:
        """Port slots ibsim allocates: ``nports`` per node, plus port 0 of each switch."""
        return sum(n.nports + (1 if n.kind == SWITCH else 0) for n in self.nodes)

    def find(self, name: str) -> NetNode | None:
        """Resolve ``name``: an ibsim node id, a node description, or a node/port GUID (hex).

        Raises ``NetfileError`` when a description matches several nodes.
        """
        by_id = {n.node_id: n for n in self.nodes}
        if name in by_id:
            return by_id[name]
        matches = [n for n in self.nodes if n.description == name or n.description.strip() == name.strip()]
        if len(matches) > 1:
            raise NetfileError(
                f"{self.source}: node description {name!r} is ambiguous "
                f"({len(matches)} nodes, e.g. ids {matches[0].node_id!r}, {matches[1].node_id!r}); "
                "use the node id or GUID"
            )
        if matches:
            return matches[0]
        guid = _as_guid(name)
        if guid is not None:
            for n in self.nodes:
                if n.guid == guid or (n.kind != SWITCH and n.guid < guid <= n.guid + n.nports):
                    return n
        return None


def _as_guid(text: str) -> int | None:
    t = text.strip().lower()
    if t.startswith("0x"):
        t = t[2:]
    if not t or len(t) > 16 or not all(c in "0123456789abcdef" for c in t):
        return None
    return int(t, 16)


def _description(rest: str, node_id: str) -> str:
    """The node description from the text after the id on a header line (ibsim parse_node_desc)."""
    hash_at = rest.find("#")
    if hash_at < 0:
        return node_id
    s = rest[hash_at + 1 :].lstrip()
    if s.startswith('"'):
        end = s.find('"', 1)
        return s[1:end] if end > 0 else s[1:]
    for stop in (" enhanced port ", " base port ", " lid ", " lmc "):
        i = s.find(stop)
        if i >= 0:
            s = s[:i]
            break
    return s or node_id


def parse_netfile(text: str, source: str = "<netfile>") -> Netfile:
    """Parse netfile ``text`` into a :class:`Netfile`.

    Raises ``NetfileError("<source>:<line>: ...")`` on a malformed header/port line, a duplicate
    node id, a port number outside ``1..nports`` (``0..nports`` for switches), or a link to an
    undeclared node.
    """
    guids = dict(_GUID_BASE)
    absguids = dict(_GUID_BASE)
    nodes: list[NetNode] = []
    ids: set[str] = set()
    current: NetNode | None = None
    max_lid = 0
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\r\n")
        if current is not None and line.startswith("["):
            m = _PORT_RE.match(line)
            if not m:
                raise NetfileError(f"{source}:{lineno}: cannot parse port line {line!r}")
            port = int(m.group(1))
            low = 0 if current.kind == SWITCH else 1
            if not low <= port <= current.nports:
                raise NetfileError(
                    f"{source}:{lineno}: port {port} outside {low}..{current.nports} of {current.node_id!r}"
                )
            rate = _RATE_RE.search(m.group(5) or "")
            current.ports[port] = NetPort(
                port=port,
                remote_id=m.group(3),
                remote_port=int(m.group(4) or 1),
                width=f"{rate.group(1)}x" if rate else None,
                speed=rate.group(2) if rate else None,
            )
            for lid in re.findall(r"\blid\s+(\d+)", m.group(5) or ""):
                max_lid = max(max_lid, int(lid))
            continue
        if current is not None and line.startswith("#"):
            continue  # ibsim skips comment lines inside a record
        current = None
        if line.startswith(("Switch", "Hca", "Ca", "Rt")):
            m = _HEADER_RE.match(line)
            if not m:
                raise NetfileError(f"{source}:{lineno}: cannot parse node header {line!r}")
            kind = {"Switch": SWITCH, "Hca": CA, "Ca": CA, "Rt": ROUTER}[m.group(1)]
            nports, node_id = int(m.group(2)), m.group(3)
            if nports < 1 or nports > 255:
                raise NetfileError(f"{source}:{lineno}: {node_id!r} has {nports} ports (1..255 allowed)")
            if node_id in ids:
                raise NetfileError(f"{source}:{lineno}: duplicate node id {node_id!r}")
            if "#" in node_id or "@" in node_id:
                raise NetfileError(f"{source}:{lineno}: node id {node_id!r} contains '#' or '@' (reserved)")
            ids.add(node_id)
            current = NetNode(kind, node_id, _description(m.group(4), node_id), nports, guids[kind], lineno)
            guids[kind] += 1 if kind == SWITCH else nports + 1
            for lid in re.findall(r"\blid\s+(\d+)", m.group(4)):
                max_lid = max(max_lid, int(lid))
            nodes.append(current)
            continue
        for prefix, kind in (("switchguid", SWITCH), ("hcaguids", CA), ("caguid", CA), ("rtguid", ROUTER)):
            if line.startswith(prefix):
                m = re.search(r"([=+])\s*(0[xX][0-9a-fA-F]+|\d+)", line)
                if not m:
                    raise NetfileError(f"{source}:{lineno}: bad GUID assignment {line!r}")
                value = int(m.group(2), 0)
                if m.group(1) == "=":
                    absguids[kind] = value
                    guids[kind] = value
                else:
                    guids[kind] = absguids[kind] + value
                break
    known = {n.node_id for n in nodes}
    for node in nodes:
        for p in node.ports.values():
            if p.remote_id not in known:
                raise NetfileError(
                    f"{source}:{node.line}: {node.node_id!r} port {p.port} links to undeclared node {p.remote_id!r}"
                )
    if not nodes:
        raise NetfileError(f"{source}: no Switch/Ca/Hca node records found")
    return Netfile(nodes=nodes, source=source, max_lid=max_lid)


def read_netfile(path: str | Path) -> Netfile:
    """Parse the netfile at ``path`` (see :func:`parse_netfile`); ``OSError`` if unreadable."""
    p = Path(path)
    return parse_netfile(p.read_text(errors="replace"), source=str(p))
