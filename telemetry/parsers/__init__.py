"""Pure parsers of the infiniband-diags counter tools (no Django import).

``perfquery`` (``-x``, ``-E``, ``-D``, plain, old OFED 1.x names) and ``ibqueryerrors``
(``--data``, ``--details``, ``--counters``, ``port ALL`` lines). Counter names are mapped to the
model field names of ``telemetry.models.PortCounters`` by :data:`COUNTER_NAMES`.
"""

from __future__ import annotations

import re


class ParseError(ValueError):
    """Malformed tool output; the message names the source and line number."""

    def __init__(self, message: str, *, source: str = "<text>", line: int | None = None) -> None:
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {message}")
        self.source = source
        self.line = line


# Tool counter name (current rdma-core names and the OFED 1.x short names) -> canonical field.
COUNTER_NAMES: dict[str, str] = {
    # data and packets (PortCounters, PortCountersExtended)
    "PortXmitData": "xmit_data",
    "XmtData": "xmit_data",
    "PortRcvData": "rcv_data",
    "RcvData": "rcv_data",
    "PortXmitPkts": "xmit_pkts",
    "XmtPkts": "xmit_pkts",
    "PortRcvPkts": "rcv_pkts",
    "RcvPkts": "rcv_pkts",
    "PortUnicastXmitPkts": "unicast_xmit_pkts",
    "XmtUPkts": "unicast_xmit_pkts",
    "PortUnicastRcvPkts": "unicast_rcv_pkts",
    "RcvUPkts": "unicast_rcv_pkts",
    "PortMulticastXmitPkts": "multicast_xmit_pkts",
    "XmtMPkts": "multicast_xmit_pkts",
    "PortMulticastRcvPkts": "multicast_rcv_pkts",
    "RcvMPkts": "multicast_rcv_pkts",
    "PortXmitWait": "xmit_wait",
    "XmtWait": "xmit_wait",
    # errors (IBTA Table 247 order)
    "SymbolErrorCounter": "symbol_errors",
    "SymbolErrors": "symbol_errors",
    "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkRecovers": "link_error_recovery",
    "LinkDownedCounter": "link_downed",
    "LinkDowned": "link_downed",
    "PortRcvErrors": "rcv_errors",
    "RcvErrors": "rcv_errors",
    "PortRcvRemotePhysicalErrors": "rcv_remote_phys_errors",
    "RcvRemotePhysErrors": "rcv_remote_phys_errors",
    "PortRcvSwitchRelayErrors": "rcv_switch_relay_errors",
    "RcvSwRelayErrors": "rcv_switch_relay_errors",
    "PortXmitDiscards": "xmit_discards",
    "XmtDiscards": "xmit_discards",
    "PortXmitConstraintErrors": "xmit_constraint_errors",
    "XmtConstraintErrors": "xmit_constraint_errors",
    "PortRcvConstraintErrors": "rcv_constraint_errors",
    "RcvConstraintErrors": "rcv_constraint_errors",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "LinkIntegrityErrors": "local_link_integrity_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors",
    "ExcBufOverrunErrors": "excessive_buffer_overrun_errors",
    "VL15Dropped": "vl15_dropped",
    "QP1Dropped": "qp1_dropped",
    # PortRcvErrorDetails (perfquery -E)
    "PortLocalPhysicalErrors": "local_physical_errors",
    "PortMalformedPktErrors": "malformed_pkt_errors",
    "PortBufferOverrunErrors": "buffer_overrun_errors",
    "PortDLIDMappingErrors": "dlid_mapping_errors",
    "PortVLMappingErrors": "vl_mapping_errors",
    "PortLoopingErrors": "looping_errors",
    # PortXmitDiscardDetails (perfquery -D)
    "PortInactiveDiscards": "inactive_discards",
    "PortNeighborMTUDiscards": "neighbor_mtu_discards",
    "PortSwLifetimeLimitDiscards": "sw_lifetime_limit_discards",
    "PortSwHOQLifetimeLimitDiscards": "sw_hoq_lifetime_limit_discards",
}

RCV_ERROR_DETAILS: tuple[str, ...] = (
    "local_physical_errors",
    "malformed_pkt_errors",
    "buffer_overrun_errors",
    "dlid_mapping_errors",
    "vl_mapping_errors",
    "looping_errors",
)
"""PortRcvErrorDetails counters in attribute order (IBTA Vol 1, 16.1.4.2)."""

XMIT_DISCARD_DETAILS: tuple[str, ...] = (
    "inactive_discards",
    "neighbor_mtu_discards",
    "sw_lifetime_limit_discards",
    "sw_hoq_lifetime_limit_discards",
)
"""PortXmitDiscardDetails counters in attribute order (IBTA Vol 1, 16.1.4.3)."""

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def canonical_counter(name: str) -> str:
    """Map a tool counter name to its field name; unknown names become snake_case."""
    known = COUNTER_NAMES.get(name)
    if known:
        return known
    return _CAMEL.sub("_", name).lower()
