"""The routing check of the fabric health report (registered with ``events.health.register_check``).

Findings from the latest snapshot's report (``routing.report``):

* a credit loop (a cycle in the channel-dependency graph): Critical — a deadlock can stop the
  fabric under load;
* CA pairs without a path (an unassigned LFT entry, a forward to a dead port): Critical;
* a switch whose ports are unbalanced by ``check_lft_balance``'s rule: Warning, one per switch;
* no snapshot of a live fabric's routes yet: Info.
"""

from __future__ import annotations

from events.health import Finding
from fabric.collectors.tools import is_live

from .current import routing_report_for


def routing_findings(fabric) -> list[Finding]:
    """The routing findings of ``fabric`` (see the module docstring)."""
    got = routing_report_for(fabric)
    if got is None:
        if is_live(fabric):
            return [Finding("routing", "info", "fabric", fabric.name, fabric.name,
                            "The switches' forwarding tables have not been read yet")]  # fmt: skip
        return []
    snap, rep = got
    out: list[Finding] = []
    loops = rep["credit_loops"]
    if loops["found"]:
        cyc = " -> ".join(f"{g}/{p}" for g, p in loops["cycle"])
        out.append(Finding("routing", "critical", "fabric", fabric.name, fabric.name,
                           f"Credit loop in the routes (channel-dependency cycle of {len(loops['cycle'])} "
                           f"channels): {cyc}", {"cycle": loops["cycle"], "snapshot": snap.pk}))  # fmt: skip
    if rep["unrouted"]["pairs"]:
        out.append(Finding("routing", "critical", "fabric", fabric.name, fabric.name,
                           f"{rep['unrouted']['pairs']} CA pairs have no route",
                           {"first": rep["unrouted"]["first"], "snapshot": snap.pk}))  # fmt: skip
    for b in rep["balance"]:
        if b["unbalanced"]:
            out.append(Finding("routing", "warning", "node", b["guid"], b["switch"] or b["guid"],
                               f"{b['switch'] or b['guid']}: unbalanced routes (CA LIDs per port "
                               f"{b['min']}..{b['max']})", {"ports": b["ports"]}))  # fmt: skip
    return out
