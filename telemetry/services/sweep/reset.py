"""Clearing port counters on the fabric (PerfMgt Set), audited: only on an operator's request."""

from __future__ import annotations

from fabric.choices import NodeType
from fabric.models import Fabric, Port

from ...collectors.counters import reset_counters
from .targets import Target


def reset_ports(ports: list[Port], *, user=None, timeout: float = 60.0) -> dict:
    """Clear the counters of ``ports`` on the fabric (PerfMgt Set, all counters), audited as
    ``telemetry.reset_counters`` per fabric. Returns ``{"ports": n, "failed": n}``.

    Other tools and users read these counters too: only for an explicit operator request (the
    Admin action, ``poll_counters --reset``). The next sweep flags those ports ``reset``.
    """
    from accounts.audit import record
    from fabric.collectors.tools import fabric_ca_args, fabric_env

    by_fabric: dict[int, list[Port]] = {}
    for p in ports:
        by_fabric.setdefault(p.node.fabric_id, []).append(p)
    total = failed = 0
    for fabric_id, group in by_fabric.items():
        fabric = Fabric.objects.get(pk=fabric_id)
        addr = []
        for p in group:
            lid = p.node.lid if p.node.node_type == NodeType.SWITCH else p.lid
            if lid:
                addr.append((lid, p.port_num))
        bad = reset_counters(addr, env=fabric_env(fabric), ca_args=fabric_ca_args(fabric), timeout=timeout)
        total += len(addr)
        failed += len(bad) + len(group) - len(addr)
        record(
            "telemetry.reset_counters",
            fabric,
            {"ports": len(addr), "failed": len(bad), "port_ids": [p.pk for p in group][:500]},
            user=user,
            object_repr=f"counters of {len(addr)} ports of {fabric.name}",
        )
    return {"ports": total, "failed": failed}


def reset_targets(fabric: Fabric, targets: list[Target], env, ca_args, timeout: float, user) -> None:
    from accounts.audit import record

    addr = [(t.lid, t.port_num) for t in targets if t.lid]
    failed = reset_counters(addr, env=env, ca_args=ca_args, timeout=timeout)
    record(
        "telemetry.reset_counters",
        fabric,
        {"ports": len(addr), "failed": len(failed)},
        user=user,
        object_repr=f"counters of {len(addr)} ports of {fabric.name}",
    )
