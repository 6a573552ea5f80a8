"""Parser of ``perfquery(8)`` output (plain, ``-x``, ``-E``, ``-D``, ``-a``, ``-l``), pure.

Each block starts with a header comment, e.g.::

    # Port counters: Lid 936 port 1
    # Port counters: Lid 1 port 1 (CapMask: 0x1300)
    # Port extended counters: Lid 2052 port 1 (CapMask: 0x5300 CapMask2: 0x0000002)
    # PortRcvErrorDetails counters: Lid 2052 port 1

followed by ``Name:.....value`` lines. Both the rdma-core names (``PortXmitData``) and the OFED 1.x
short names (``XmtData``, ``LinkRecovers``) are accepted and mapped to model field names. ``port 255``
is the AllPortSelect aggregate of a switch. Data counters are in 4-byte words (perfquery(8)).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import ParseError, canonical_counter

_HEADER = re.compile(
    r"^#\s*(?P<kind>[A-Za-z ]+?)\s+counters:\s+Lid\s+(?P<lid>\d+)\s+port\s+(?P<port>\d+)"
    r"(?:\s*\(CapMask:\s*(?P<cap>0x[0-9a-fA-F]+)(?:\s+CapMask2:\s*(?P<cap2>0x[0-9a-fA-F]+))?\))?\s*$"
)
_VALUE = re.compile(r"^(?P<name>[A-Za-z0-9_]+):\.*(?P<value>\S+)\s*$")

KINDS = {
    "Port": "counters",
    "Port extended": "extended",
    "PortRcvErrorDetails": "rcv_error_details",
    "PortXmitDiscardDetails": "xmit_discard_details",
    "PortOpRcvCounters": "op_rcv",
    "PortFlowCtlCounters": "flow_ctl",
    "PortVLOpPackets": "vl_op_packets",
    "PortVLOpData": "vl_op_data",
    "PortVLXmitFlowCtlUpdateErrors": "vl_xmit_flow_ctl_update_errors",
    "PortVLXmitWaitCounters": "vl_xmit_wait",
    "SwPortVLCongestion": "sw_port_vl_congestion",
    "PortRcvConCtrl": "rcv_con_ctrl",
    "PortSLRcvFECN": "sl_rcv_fecn",
    "PortSLRcvBECN": "sl_rcv_becn",
    "PortXmitConCtrl": "xmit_con_ctrl",
    "PortVLXmitTimeCong": "vl_xmit_time_cong",
}


@dataclass
class PerfBlock:
    """One perfquery block.

    ``kind``: ``counters`` (PortCounters), ``extended`` (PortCountersExtended), ``rcv_error_details``,
    ``xmit_discard_details`` or another snake_case name; ``values`` maps field names (see
    ``telemetry.parsers.COUNTER_NAMES``) to ints; ``raw`` keeps the tool's own names; ``capmask``/
    ``capmask2`` are the PerfMgt ClassPortInfo masks when printed; ``line`` the header line number.
    """

    kind: str
    lid: int
    port: int
    capmask: int | None = None
    capmask2: int | None = None
    values: dict[str, int] = field(default_factory=dict)
    raw: dict[str, int] = field(default_factory=dict)
    line: int = 0

    @property
    def all_ports(self) -> bool:
        """True for the AllPortSelect (port 255) aggregate."""
        return self.port == 255


_SKIP = {"PortSelect", "CounterSelect", "CounterSelect2"}


def parse_perfquery(text: str, *, source: str = "<perfquery>") -> list[PerfBlock]:
    """Parse perfquery output into blocks, in order.

    Raises:
        ParseError: a value line before any header, a non-integer value, or a line that is neither
            (with the source name and line number). ``ibwarn:`` lines and blank lines are ignored.
    """
    blocks: list[PerfBlock] = []
    current: PerfBlock | None = None
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("ibwarn:"):
            continue
        if stripped.startswith("#"):
            m = _HEADER.match(stripped)
            if not m:
                raise ParseError(f"unrecognised perfquery header {stripped!r}", source=source, line=n)
            kind_text = m.group("kind").strip()
            kind = KINDS.get(kind_text) or canonical_counter(kind_text.replace(" ", ""))
            current = PerfBlock(
                kind=kind,
                lid=int(m.group("lid")),
                port=int(m.group("port")),
                capmask=int(m.group("cap"), 16) if m.group("cap") else None,
                capmask2=int(m.group("cap2"), 16) if m.group("cap2") else None,
                line=n,
            )
            blocks.append(current)
            continue
        m = _VALUE.match(stripped)
        if not m:
            raise ParseError(f"unrecognised perfquery line {stripped!r}", source=source, line=n)
        if current is None:
            raise ParseError("counter line before any '# ... counters:' header", source=source, line=n)
        name, value_text = m.group("name"), m.group("value")
        try:
            value = int(value_text, 0)
        except ValueError:
            raise ParseError(f"{name}: {value_text!r} is not an integer", source=source, line=n)
        if name in _SKIP:
            if name == "PortSelect" and value != current.port and not (current.port == 255 and value == 255):
                raise ParseError(
                    f"PortSelect {value} does not match header port {current.port}", source=source, line=n
                )
            continue
        current.raw[name] = value
        current.values[canonical_counter(name)] = value
    return blocks


#: PerfMgt ClassPortInfo CapabilityMask2 bit 1, IsAddlPortCountersExtendedSupported (IBTA Vol 1
#: 16.1.2, rdma-core ``IB_PM_IS_ADDL_PORT_CTRS_EXT_SUP``): PortCountersExtended also carries the
#: error counters, PortXmitWait and QP1Dropped.
CAP2_ADDL_PORT_COUNTERS_EXT = 1 << 1

#: What a PortCountersExtended block carries on every device (IBTA 16.1.4.11): 64-bit data and
#: packet counters. The rest of a ``perfquery -x`` block is only real with
#: :data:`CAP2_ADDL_PORT_COUNTERS_EXT`.
EXTENDED_BASE_FIELDS = frozenset(
    {
        "xmit_data",
        "rcv_data",
        "xmit_pkts",
        "rcv_pkts",
        "unicast_xmit_pkts",
        "unicast_rcv_pkts",
        "multicast_xmit_pkts",
        "multicast_rcv_pkts",
    }
)


def merge_port_counters(blocks: list[PerfBlock]) -> dict[tuple[int, int], dict]:
    """Merge ``counters`` and ``extended`` blocks per (lid, port).

    Returns ``{(lid, port): {"values": {...}, "extended": bool, "capmask": int | None}}``, where the
    64-bit data/packet counters of an extended block win over the 32-bit ones. The error counters,
    PortXmitWait and QP1Dropped of an extended block are taken only when its CapMask2 has
    AddlPortCountersExtended (:data:`CAP2_ADDL_PORT_COUNTERS_EXT`): older infiniband-diags print
    that block as all zeros on a port whose CapMask2 is 0 (real output in ``$WEFT_REALDATA/perfquery``,
    ``CapMask2: 0x0000000``), which must not overwrite (or stand in for) the 32-bit counters.
    """
    out: dict[tuple[int, int], dict] = {}
    for b in blocks:
        if b.kind not in ("counters", "extended"):
            continue
        rec = out.setdefault((b.lid, b.port), {"values": {}, "extended": False, "capmask": None})
        if b.capmask is not None:
            rec["capmask"] = b.capmask
        if b.kind == "extended":
            rec["extended"] = True
            if b.capmask2 is not None and b.capmask2 & CAP2_ADDL_PORT_COUNTERS_EXT:
                rec["values"].update(b.values)
            else:
                rec["values"].update((k, v) for k, v in b.values.items() if k in EXTENDED_BASE_FIELDS)
        else:
            for k, v in b.values.items():
                if rec["extended"] and k in ("xmit_data", "rcv_data", "xmit_pkts", "rcv_pkts"):
                    continue
                rec["values"][k] = v
    return out
