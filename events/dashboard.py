"""The dashboard's numbers: fabric summary, open alarms by severity, top congested/erroring ports."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q

from fabric.models import Fabric, Link, Node
from telemetry.models import PortCounters

from .models import Alarm
from .payloads import alarm_payload
from .scoping import scope_alarms

ERROR_COUNTERS = ("symbol_errors", "link_error_recovery", "link_downed", "rcv_errors", "rcv_remote_phys_errors",
                  "xmit_discards", "local_link_integrity_errors", "excessive_buffer_overrun_errors",
                  "vl15_dropped")  # fmt: skip


def _port_row(row) -> dict[str, Any]:
    port = row.port
    return {
        "port_id": port.pk,
        "node_id": port.node_id,
        "port": str(port),
        "fabric": port.node.fabric_id,
        "fabric_name": port.node.fabric.name,
        "url": port.get_absolute_url(),
        "congestion": row.congestion,
        "utilisation": row.utilisation,
        "xmit_wait_per_s": row.xmit_wait_per_s,
        "error_deltas": row.error_deltas or {},
        "errors_last_sweep": sum(int(v or 0) for v in (row.error_deltas or {}).values()),
        "errors_total": sum(int(getattr(row, c) or 0) for c in ERROR_COUNTERS),
        "sampled_at": row.sampled_at.isoformat() if row.sampled_at else None,
    }


#: Open alarms in the dashboard's "Latest open alarms" table (most recently seen first).
RECENT_ALARMS = 10


def summary(fabric_id: int | None = None, top: int = 10, user=None) -> dict[str, Any]:
    """Dashboard data for one fabric (or all).

    Returns ``{"fabrics": [{id, name, switches, cas, links, master_sm_guid, master_sm,
    subnet_managers, live (has live access: False for an imported snapshot), last_discovery}], "alarms": {severity: open count}, "alarms_total",
    "unacknowledged", "top_congested": [port rows], "top_errors": [port rows], "recent_alarms":
    [events.payloads.alarm_payload, the ``RECENT_ALARMS`` latest open]}``; port rows carry
    the congestion index (0..1), utilisation (0..1), PortXmitWait ticks/s, the last sweep's error
    deltas and their sum, and the raw error counter total.
    """

    fabrics = Fabric.objects.all()
    if fabric_id:
        fabrics = fabrics.filter(pk=fabric_id)
    fabrics = fabrics.select_related("last_discovery")
    # Counted per table, not by annotating nodes and links on one query: that join is
    # nodes x links rows per fabric (minutes on a 600-node fabric).
    node_counts: dict[tuple[int, str], int] = {
        (row["fabric_id"], row["node_type"]): row["n"]
        for row in Node.objects.filter(fabric__in=fabrics)
        .values("fabric_id", "node_type")
        .annotate(n=Count("id"))
    }
    link_counts = dict(
        Link.objects.filter(fabric__in=fabrics)
        .values("fabric_id")
        .annotate(n=Count("id"))
        .values_list("fabric_id", "n")
    )
    rows = []
    for f in fabrics:
        f.switches = node_counts.get((f.pk, "switch"), 0)
        f.cas = node_counts.get((f.pk, "ca"), 0)
        f.nlinks = link_counts.get(f.pk, 0)
        master = None
        if f.master_sm_guid:
            node = (
                Node.objects.filter(fabric=f, ports__port_guid=f.master_sm_guid).first()
                or Node.objects.filter(fabric=f, node_guid=f.master_sm_guid).first()
            )
            master = str(node) if node else None
        rows.append({
            "id": f.pk, "name": f.name, "switches": f.switches, "cas": f.cas, "links": f.nlinks,
            "master_sm_guid": f.master_sm_guid or None, "master_sm_lid": f.master_sm_lid, "master_sm": master,
            "subnet_managers": f.subnet_managers.count(), "live": f.has_live_access,
            "last_discovery": f.last_discovery.started.isoformat() if f.last_discovery_id else None,
            "last_discovery_display": (
                f"{f.last_discovery.started:%Y-%m-%d %H:%M:%S} ({f.last_discovery.get_status_display()})"
                if f.last_discovery_id else None
            ),
            "url": f.get_absolute_url(),
        })  # fmt: skip
    alarms = Alarm.objects.open()
    if user is not None:  # a tenant member: not another tenant's alarms (events.scoping)
        alarms = scope_alarms(alarms, user)
    counters = PortCounters.objects.select_related("port__node__fabric").filter(stale=False)
    if fabric_id:
        alarms = alarms.filter(fabric_id=fabric_id)
        counters = counters.filter(port__node__fabric_id=fabric_id)
    by_severity = alarms.counts_by_severity()
    congested = [_port_row(r) for r in counters.filter(congestion__gt=0).order_by("-congestion")[:top]]
    candidates = [_port_row(r) for r in counters.filter(
        Q(symbol_errors__gt=0) | Q(rcv_errors__gt=0) | Q(link_downed__gt=0) | Q(link_error_recovery__gt=0)
        | Q(rcv_remote_phys_errors__gt=0) | Q(xmit_discards__gt=0) | Q(local_link_integrity_errors__gt=0)
        | Q(excessive_buffer_overrun_errors__gt=0) | Q(vl15_dropped__gt=0)
    )[:5000]]  # fmt: skip
    candidates.sort(key=lambda r: (r["errors_last_sweep"], r["errors_total"]), reverse=True)
    return {
        "fabrics": rows,
        "alarms": by_severity,
        "alarms_total": sum(by_severity.values()),
        "unacknowledged": alarms.filter(state="active").count(),
        "top_congested": congested,
        "top_errors": candidates[:top],
        "recent_alarms": [
            alarm_payload(a)
            for a in alarms.select_related("fabric", "acknowledged_by", "cleared_by")[:RECENT_ALARMS]
        ],
    }
