"""Template tags of the telemetry app: the raw counters table of a port."""

from __future__ import annotations

from django import template

from fabric.models import Port

from ..models import ERROR_COUNTERS, RAW_COUNTERS, PortCounters

register = template.Library()

#: IBTA attribute names (perfquery's) of the PortCounters fields
IBTA_NAMES = {
    "xmit_data": "PortXmitData (4-byte words)",
    "rcv_data": "PortRcvData (4-byte words)",
    "xmit_pkts": "PortXmitPkts",
    "rcv_pkts": "PortRcvPkts",
    "xmit_wait": "PortXmitWait (ticks)",
    "symbol_errors": "SymbolErrorCounter",
    "link_error_recovery": "LinkErrorRecoveryCounter",
    "link_downed": "LinkDownedCounter",
    "rcv_errors": "PortRcvErrors",
    "rcv_remote_phys_errors": "PortRcvRemotePhysicalErrors",
    "xmit_discards": "PortXmitDiscards",
    "local_link_integrity_errors": "LocalLinkIntegrityErrors",
    "excessive_buffer_overrun_errors": "ExcessiveBufferOverrunErrors",
    "vl15_dropped": "VL15Dropped",
    "xmit_constraint_errors": "PortXmitConstraintErrors",
    "rcv_constraint_errors": "PortRcvConstraintErrors",
}


@register.inclusion_tag("telemetry/_port_counters_table.html")
def port_counters_table(port: Port) -> dict:
    """``{"counters": PortCounters | None, "rows": [{"name", "label", "value", "delta", "error",
    "saturated"}]}``: the 16 raw counters as the last sweep read them (data in 4-byte words),
    with this interval's delta of the error counters that rose."""
    counters = PortCounters.objects.filter(port_id=port.pk).select_related("sweep").first()
    rows = []
    if counters is not None:
        deltas = counters.error_deltas or {}
        saturated = set(counters.saturated or [])
        for name in RAW_COUNTERS:
            rows.append({
                "name": name, "label": IBTA_NAMES.get(name, name), "value": getattr(counters, name),
                "delta": deltas.get(name), "error": name in ERROR_COUNTERS, "saturated": name in saturated,
            })  # fmt: skip
    return {"counters": counters, "rows": rows}
