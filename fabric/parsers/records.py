"""Plain records of a parsed topology (pure, no Django).

A :class:`Topology` is what every parser returns: nodes by GUID, ports by (node GUID, port number),
links by their canonical key, and the warnings met on the way. GUIDs are canonical
(``fabric.guid.normalize_guid``: ``0x`` + 16 lowercase hex digits); LIDs are ints or None when
unknown/unassigned; widths are ``"4x"``, speeds ``"HDR"`` (as ibnetdiscover prints them).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from core.errors import LocatedError
from fabric.keys import LinkKey

SWITCH = "switch"
CA = "ca"
ROUTER = "router"

#: PortInfo:PortState values (IBTA Vol 1, 14.2.5.6) used by the parsers.
STATE_UNKNOWN, STATE_DOWN, STATE_INIT, STATE_ARMED, STATE_ACTIVE = 0, 1, 2, 3, 4
#: PortInfo:PortPhysicalState LinkUp.
PHYS_UNKNOWN, PHYS_LINKUP = 0, 5


def nul_line(text: str) -> int:
    """The 1-based line of the first NUL character in ``text``, 0 when there is none. A tool's text
    output holds none: a NUL means binary data or another encoding (UTF-16 puts one after every
    ASCII character), and PostgreSQL refuses it in text and ``jsonb`` alike, so the tool parsers
    refuse such a file whole, located, rather than store its fields."""
    at = text.find("\x00")
    return 0 if at < 0 else text.count("\n", 0, at) + 1


NUL_WHY = "a NUL byte: binary data or not UTF-8 text (save the output as UTF-8 text)"


#: highest unicast LID (IBTA Vol 1, 4.1.3: 0x0001-0xBFFF unicast; 0 unassigned; 0xFFFF permissive).
MAX_UNICAST_LID = 0xBFFF


class TopologyParseError(LocatedError):
    """The text is not a topology (or not one this parser reads).

    ``str()`` is ``"<source>:<line>: <message>"``; ``line`` is 1-based (0 when not located).
    """


@dataclass(slots=True)
class ParseWarning:
    """A record skipped or kept with a value unset; ``line`` is 1-based in the parsed text."""

    line: int
    message: str

    def as_dict(self) -> dict:
        return {"line": self.line, "message": self.message}


@dataclass(slots=True)
class NodeRecord:
    """A node (IBTA NodeInfo + NodeDescription). ``lid``/``lmc``/``enhanced_port0``: switch port 0.

    ``description`` is the NodeDescription as the tool printed it (spaces kept); ``label`` is not
    parsed: ingest sets it to the name admins see (``fabric.services.names.label_topology``).
    """

    guid: str
    node_type: str
    description: str = ""
    num_ports: int = 0
    system_image_guid: str = ""
    vendor_id: int | None = None
    device_id: int | None = None
    lid: int | None = None
    lmc: int = 0
    enhanced_port0: bool = False
    name: str = ""  # the id the file used for it ("S-0002c9...", "Switch1")
    line: int = 0
    label: str = ""


@dataclass(slots=True)
class PortRecord:
    """A port with a link (parsers only list connected ports, except ``-p`` unconnected lines).

    ``state``/``phys_state`` are PortInfo values (0 = not reported); ``lid`` is the port's base LID
    (for switch ports, the switch's port-0 LID); ``label`` the external/split port label.
    """

    node_guid: str
    port_num: int
    port_guid: str = ""
    lid: int | None = None
    lmc: int = 0
    width: str = ""
    speed: str = ""
    label: str = ""
    state: int = STATE_UNKNOWN
    phys_state: int = PHYS_UNKNOWN
    line: int = 0


@dataclass(slots=True)
class LinkRecord:
    """A cable between ``a`` and ``b`` (``a`` = the lower (GUID, port)); width/speed as active."""

    a_guid: str
    a_port: int
    b_guid: str
    b_port: int
    width: str = ""
    speed: str = ""
    line: int = 0

    @property
    def key(self) -> LinkKey:
        return ((self.a_guid, self.a_port), (self.b_guid, self.b_port))


#: SMInfo:SMState names (IBTA Vol 1 14.2.5.13).
SM_STATES = {0: "NOT_ACTIVE", 1: "DISCOVERING", 2: "STANDBY", 3: "MASTER"}


@dataclass(slots=True)
class SMRecord:
    """A subnet manager (IBTA SMInfo, Vol 1 14.2.5.13): port GUID (``0x%016x``), LID (None when
    0/unknown), priority (0..15), SMState (0..3, :data:`SM_STATES`), ActCount; from a multi-host
    capture also the host that asked, and the 1-based line the record starts on."""

    guid: str
    lid: int | None = None
    priority: int = 0
    state: int = 0
    activity_count: int | None = None
    host: str = ""
    line: int = 0

    @property
    def is_master(self) -> bool:
        return self.state == 3

    @property
    def state_name(self) -> str:
        return SM_STATES.get(self.state, str(self.state))


@dataclass
class Topology:
    """A parsed fabric.

    ``nodes``: GUID → :class:`NodeRecord`; ``ports``: (GUID, port) → :class:`PortRecord`;
    ``links``: :data:`LinkKey` → :class:`LinkRecord`; ``sms``: subnet managers if the source
    reports them; ``partial``: the source says part of the fabric was not reached (live discovery
    with timeouts): ingest then removes nothing. ``format`` names the parser used.
    """

    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    ports: dict[tuple[str, int], PortRecord] = field(default_factory=dict)
    links: dict[LinkKey, LinkRecord] = field(default_factory=dict)
    warnings: list[ParseWarning] = field(default_factory=list)
    sms: list[SMRecord] = field(default_factory=list)
    partial: bool = False
    format: str = ""
    #: ``(line, reason)`` when the text looks cut short (ends mid-line, a last record without its
    #: lines, links to nodes never defined); None for a complete text. Imports refuse it.
    truncated: tuple[int, str] | None = None
    source: str = "<text>"

    def counts(self) -> dict[str, int]:
        """``{"switches", "cas", "routers", "links", "ports"}`` (links unique, loopbacks once)."""
        c = {"switches": 0, "cas": 0, "routers": 0}
        for n in self.nodes.values():
            c[{SWITCH: "switches", CA: "cas", ROUTER: "routers"}[n.node_type]] += 1
        c["links"] = len(self.links)
        c["ports"] = len(self.ports)
        return c

    def warn(self, line: int, message: str) -> None:
        self.warnings.append(ParseWarning(line, message))


def split_lines(text: str) -> list[str]:
    """Lines of a topology text: a leading BOM dropped, CR/LF/CRLF endings all accepted, and NUL
    bytes replaced by U+FFFD (PostgreSQL text cannot hold NUL; such an import failed with a
    traceback)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\x00", "\ufffd").splitlines()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector for a block that allocates many long-lived,
    acyclic objects (a parse: records, tuples, strings).

    Each collection the allocations trigger walks every object made so far, none of which is
    garbage; on the Selene fabric (56k lines) that was half the parse time. Reference counting
    still frees everything as usual. Re-enabled on exit only if it was enabled on entry.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
