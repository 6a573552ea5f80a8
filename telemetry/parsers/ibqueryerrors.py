"""Parser of ``ibqueryerrors(8)`` output (rdma-core), pure.

Facts of the tool this parser encodes (rdma-core ``infiniband-diags/ibqueryerrors.c``):

* A node is printed only when one of its ports is over threshold (``Errors for ...``), or with
  ``--counters`` (``Data Counters for ...``). Silence for a node means clean, not missing;
  ``--data`` only adds the data counters to ports that already have errors.
* Switch headers carry the port-0 GUID (``Errors for 0x... "desc"``), CA headers only the
  description. Port lines are ``GUID 0x... port N: [Name == V] ...``; ``port ALL`` is the switch's
  AllPortSelect aggregate. GUIDs are printed unpadded (compare them as 64-bit numbers).
* With ``--data`` the data counters carry a human-readable value in parentheses
  (``conv_cnt_human_readable``): ``(24.412MB)`` is value × 4 bytes in binary units (the data
  counters count 4-byte words); packet counts are divided by 1024 too (``(13.632K)``, ``(29.000)``).
* It exits 1 when it found ports over threshold: that is a result, not a tool failure.
* ``--details``: rdma-core queries PortXmitDiscardDetails after ``PortXmitDiscards`` but decodes and
  names it with the PortRcvErrorDetails field names, and vice versa after ``PortRcvErrors``
  (``query_and_dump`` gets the two field ranges crossed). The values are the right attribute's,
  the names are wrong: this parser renames them by position (``swapped_details`` counts the fixes).
  Reproduce in the lab against ``perfquery -D``/``-E``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import RCV_ERROR_DETAILS, XMIT_DISCARD_DETAILS, ParseError, canonical_counter

_NODE = re.compile(r'^(?P<what>Errors|Data Counters) for (?:(?P<guid>0x[0-9a-fA-F]+)\s+)?"(?P<name>.*)"\s*$')
_PORT = re.compile(r"^GUID\s+(?P<guid>0x[0-9a-fA-F]+)\s+port\s+(?P<port>\d+|ALL):(?P<rest>.*)$")
_ITEM = re.compile(r"\[(?P<name>[A-Za-z0-9_]+)\s*==\s*(?P<value>\d+)(?:\s*\((?P<human>[^)]*)\))?\]")
_SUMMARY1 = re.compile(r"^##\s*Summary:\s*(\d+)\s+nodes checked,\s*(\d+)\s+bad nodes found")
_SUMMARY2 = re.compile(r"^##\s*(\d+)\s+ports checked,\s*(\d+)\s+ports have errors beyond threshold")
_PMA_FAIL = re.compile(r"^##\s*(\d+)\s+PMA query failures")

# Counter widths of PortCounters (IBTA Vol 1, Table 247): a value at its maximum has saturated.
COUNTER_MAX: dict[str, int] = {
    "symbol_errors": 0xFFFF,
    "link_error_recovery": 0xFF,
    "link_downed": 0xFF,
    "rcv_errors": 0xFFFF,
    "rcv_remote_phys_errors": 0xFFFF,
    "rcv_switch_relay_errors": 0xFFFF,
    "xmit_discards": 0xFFFF,
    "xmit_constraint_errors": 0xFF,
    "rcv_constraint_errors": 0xFF,
    "local_link_integrity_errors": 0xF,
    "excessive_buffer_overrun_errors": 0xF,
    "vl15_dropped": 0xFFFF,
    "qp1_dropped": 0xFFFF,
    "xmit_data": 0xFFFFFFFF,
    "rcv_data": 0xFFFFFFFF,
    "xmit_pkts": 0xFFFFFFFF,
    "rcv_pkts": 0xFFFFFFFF,
    "xmit_wait": 0xFFFFFFFF,
}


@dataclass
class IqePort:
    """One ``GUID ... port N:`` line. ``port`` is None for ``port ALL``.

    ``values``: field name -> int (details under their corrected names); ``human``: the tool's
    human-readable strings; ``saturated``: fields at their 32-bit (or narrower) maximum;
    ``link_info``: the ``--report-port`` line that followed, if any.
    """

    guid: int
    port: int | None
    values: dict[str, int] = field(default_factory=dict)
    human: dict[str, str] = field(default_factory=dict)
    saturated: list[str] = field(default_factory=list)
    swapped_details: int = 0
    link_info: str = ""
    line: int = 0


@dataclass
class IqeNode:
    """A node block: ``kind`` ``errors`` or ``data``; ``guid`` (switches only) and description."""

    kind: str
    guid: int | None
    name: str
    ports: list[IqePort] = field(default_factory=list)
    line: int = 0


@dataclass
class IqeReport:
    """The whole output: nodes printed, and the summary (None where not printed)."""

    nodes: list[IqeNode] = field(default_factory=list)
    nodes_checked: int | None = None
    bad_nodes: int | None = None
    ports_checked: int | None = None
    bad_ports: int | None = None
    pma_query_failures: int = 0
    thresholds: str = ""
    suppressed: list[str] = field(default_factory=list)

    def port_values(self) -> dict[tuple[int, int | None], dict[str, int]]:
        """``{(guid as int, port or None for ALL): values}`` over all nodes."""
        return {(p.guid, p.port): p.values for n in self.nodes for p in n.ports}


def _parse_items(rest: str, port: IqePort, source: str, n: int) -> None:
    context = ""
    pos = 0
    for m in _ITEM.finditer(rest):
        gap = rest[pos : m.start()].strip()
        if gap:
            raise ParseError(f"unexpected text {gap!r} in counter list", source=source, line=n)
        pos = m.end()
        raw_name, value = m.group("name"), int(m.group("value"))
        name = canonical_counter(raw_name)
        if context == "xmit_discards" and name in RCV_ERROR_DETAILS:
            idx = RCV_ERROR_DETAILS.index(name)
            name = (
                XMIT_DISCARD_DETAILS[idx] if idx < len(XMIT_DISCARD_DETAILS) else f"xmit_discard_detail_{idx}"
            )
            port.swapped_details += 1
        elif context == "rcv_errors" and name in XMIT_DISCARD_DETAILS:
            name = RCV_ERROR_DETAILS[XMIT_DISCARD_DETAILS.index(name)]
            port.swapped_details += 1
        elif name not in RCV_ERROR_DETAILS and name not in XMIT_DISCARD_DETAILS:
            context = name
        port.values[name] = value
        if m.group("human"):
            port.human[name] = m.group("human").strip()
        limit = COUNTER_MAX.get(name)
        if limit is not None and value == limit:
            port.saturated.append(name)
    tail = rest[pos:].strip()
    if tail:
        raise ParseError(f"unexpected text {tail!r} after counters", source=source, line=n)


def parse_ibqueryerrors(text: str, *, source: str = "<ibqueryerrors>") -> IqeReport:
    """Parse ibqueryerrors output.

    Raises:
        ParseError: a port line outside a node block, or an unparseable line (source:line).
    """
    report = IqeReport()
    node: IqeNode | None = None
    last_port: IqePort | None = None
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("ibwarn:"):
            continue
        if s.startswith("##"):
            if m := _SUMMARY1.match(s):
                report.nodes_checked, report.bad_nodes = int(m.group(1)), int(m.group(2))
            elif m := _SUMMARY2.match(s):
                report.ports_checked, report.bad_ports = int(m.group(1)), int(m.group(2))
            elif m := _PMA_FAIL.match(s):
                report.pma_query_failures = int(m.group(1))
            elif s.startswith("## Thresholds:"):
                report.thresholds = s[len("## Thresholds:") :].strip()
            elif s.startswith("## Suppressed:"):
                report.suppressed = s[len("## Suppressed:") :].split()
            continue
        if m := _NODE.match(s):
            node = IqeNode(
                kind="errors" if m.group("what") == "Errors" else "data",
                guid=int(m.group("guid"), 16) if m.group("guid") else None,
                name=m.group("name"),
                line=n,
            )
            report.nodes.append(node)
            last_port = None
            continue
        if m := _PORT.match(s):
            if node is None:
                raise ParseError("port line before any 'Errors for' header", source=source, line=n)
            port_text = m.group("port")
            last_port = IqePort(
                guid=int(m.group("guid"), 16), port=None if port_text == "ALL" else int(port_text), line=n
            )
            _parse_items(m.group("rest"), last_port, source, n)
            node.ports.append(last_port)
            continue
        if s.startswith("Link info:") and last_port is not None:
            last_port.link_info = s[len("Link info:") :].strip()
            continue
        raise ParseError(f"unrecognised ibqueryerrors line {s!r}", source=source, line=n)
    return report
