"""Fabric health checks and the health report (on demand from the UI/API, and scheduled).

Checks, each giving ``Finding`` rows:

* ``duplicate_guid`` (Critical): one port GUID on ports of two different nodes (switch
  external ports share their switch's port-0 GUID, IBTA Vol 1 14.2.5.3, so a switch counts
  once);
* ``duplicate_lid`` (Critical): one base LID assigned to two endpoints (CA ports; a switch's
  port-0 LID); LIDs are unicast 0x0001..0xbfff (IBTA Vol 1 4.1.3); LMC ranges are not expanded;
* ``invalid_lid`` (Minor): an Active CA port, or a switch with an Active port, whose LID is 0 or
  65535 (0xffff, the permissive LID), i.e. the SM has not assigned one;
* ``link_below_capability`` (Minor): a link whose data rate is below both ends' best rate on
  their other ports, or below the usual rate of links between the same tiers (the stored
  topology keeps active width/speed only, not the supported ones); ends that disagree on
  width/speed are flagged too;
* ``port_errors`` (Minor): port error counters above the thresholds in
  :data:`ERROR_THRESHOLDS` (raw counter values since the last reset);
* ``unreachable_node`` (Warning): a node not seen by the latest live discovery, or whose
  ports were all stale in the latest counter sweep;
* ``sm_state`` (Critical/Warning): no master SM known, more than one master, no standby.

Apps above this one add checks with :func:`register_check` in their ``ready()`` (the routing
app's ``routing`` check), so this module imports none of them.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction

from fabric.choices import NodeType, PortState, SMState
from fabric.models import Link, Node, Port
from telemetry.models import PortCounters

from .keys import link_key, port_key
from .models import HealthReport

#: Raw error-counter values (since the last counter reset) above which a port is reported.
ERROR_THRESHOLDS: dict[str, int] = {
    "symbol_errors": 10,
    "link_error_recovery": 10,
    "link_downed": 10,
    "rcv_errors": 10,
    "rcv_remote_phys_errors": 100,
    "xmit_discards": 100,
    "local_link_integrity_errors": 10,
    "excessive_buffer_overrun_errors": 10,
    "vl15_dropped": 100,
}

SEVERITY_ORDER = ["ok", "info", "warning", "minor", "critical"]


@dataclass
class Finding:
    """One problem found by a check."""

    check: str
    severity: str
    object_type: str
    object_key: str
    object_repr: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def link_key_of(link) -> str:
    """The natural key of a ``fabric.Link`` (needs ``port_a__node``/``port_b__node`` loaded)."""
    return link_key(
        (link.port_a.node.node_guid, link.port_a.port_num), (link.port_b.node.node_guid, link.port_b.port_num)
    )


def topology_findings(fabric) -> list[Finding]:
    """Duplicate GUIDs, duplicate LIDs and Active ports without a valid LID (stored topology)."""

    findings: list[Finding] = []
    ports = list(
        Port.objects.filter(node__fabric=fabric)
        .select_related("node")
        .order_by("node__node_guid", "port_num")
    )
    by_guid: dict[str, dict[int, Any]] = defaultdict(dict)
    by_lid: dict[int, dict[tuple, Any]] = defaultdict(dict)
    flagged_switches: set[str] = set()
    for port in ports:
        node = port.node
        is_switch = node.node_type == NodeType.SWITCH
        if port.port_guid and (not is_switch or port.port_num == 0):
            by_guid[port.port_guid].setdefault(node.pk, port)
        lid = node.lid if is_switch else port.lid
        owner = (node.pk,) if is_switch else (node.pk, port.port_num)
        if lid and lid != 0xFFFF:
            by_lid[lid].setdefault(owner, port)
        if port.state == PortState.ACTIVE and lid in (0, 0xFFFF):
            # A switch has one LID (port 0): report the switch once, not each of its ports.
            if is_switch and node.node_guid in flagged_switches:
                continue
            if is_switch:
                flagged_switches.add(node.node_guid)
                key, what, kind = node.node_guid, f"switch {node}", "node"
            else:
                key, what, kind = port_key(node.node_guid, port.port_num), str(port), "port"
            text = f"{what} is Active with LID {lid} ({'0xffff' if lid == 0xFFFF else '0'})"
            findings.append(Finding("invalid_lid", "minor", kind, key, what, text, {"lid": lid}))
    for guid, owners in sorted(by_guid.items()):
        if len(owners) > 1:
            names = [str(p.node) for p in owners.values()]
            findings.append(
                Finding(
                    "duplicate_guid",
                    "critical",
                    "guid",
                    guid,
                    f"GUID {guid}",
                    f"Port GUID {guid} is used by {len(owners)} nodes: {', '.join(names)}",
                    {"nodes": names},
                )  # fmt: skip
            )
    for lid, owners in sorted(by_lid.items()):
        if len(owners) > 1:
            names = [str(p) if len(o) == 2 else str(p.node) for o, p in owners.items()]
            findings.append(
                Finding(
                    "duplicate_lid",
                    "critical",
                    "lid",
                    str(lid),
                    f"LID {lid}",
                    f"LID {lid} is assigned to {len(owners)} endpoints: {', '.join(names)}",
                    {"lid": lid, "endpoints": names},
                )  # fmt: skip
            )
    return findings


def links_below_capability(fabric) -> list[Finding]:
    """Links running below what they should (see module doc), as ``link_below_capability`` findings.

    The expected rate of a link is the higher of (a) the best rate both end nodes run on their
    other ports and (b) the usual rate of links between the same tiers (leaf-host, leaf-spine...):
    the most common rate of that group when the group has at least 4 links and that rate covers
    at least half of them; for a group too small or too mixed to have a usual rate, the best
    rate either end runs on its other ports. A link below its expected rate, or whose two ends
    report different width/speed, is reported.
    """

    best: dict[int, float] = defaultdict(float)
    for node_id, rate in Port.objects.filter(node__fabric=fabric, rate_gbps__isnull=False).values_list(
        "node_id", "rate_gbps"
    ):
        best[node_id] = max(best[node_id], rate)
    links = []
    groups: dict[tuple[int, int], Counter] = defaultdict(Counter)
    for link in Link.objects.filter(fabric=fabric).select_related("port_a__node", "port_b__node"):
        a, b = link.port_a, link.port_b
        rates = [r for r in (link.rate_gbps, a.rate_gbps, b.rate_gbps) if r]
        if not rates:
            continue
        rate = link.rate_gbps or min(rates)
        tiers = tuple(sorted((a.node.tier, b.node.tier)))
        groups[tiers][rate] += 1
        links.append((link, rate, tiers))
    usual: dict[tuple[int, int], float] = {}
    for tiers, counts in groups.items():
        total = sum(counts.values())
        rate, n = counts.most_common(1)[0]
        if total >= 4 and n * 2 >= total:
            usual[tiers] = rate
    findings = []
    for link, rate, tiers in links:
        a, b = link.port_a, link.port_b
        node_best = min(best.get(a.node_id, 0.0), best.get(b.node_id, 0.0))
        either_best = max(best.get(a.node_id, 0.0), best.get(b.node_id, 0.0))
        expected = max(node_best, usual.get(tiers, either_best))
        disagree = (a.width and b.width and a.width != b.width) or (
            a.speed and b.speed and a.speed != b.speed
        )
        if not (rate + 1e-6 < expected or disagree):
            continue
        what = f"{link.width or a.width} {link.speed or a.speed}".strip()
        if disagree:
            msg = f"Link {a} <-> {b}: ends disagree ({a.width} {a.speed} vs {b.width} {b.speed})"
        elif expected == node_best:
            msg = f"Link {a} <-> {b} runs at {rate:g} Gb/s ({what}); both ends run {expected:g} Gb/s on other ports"
        elif tiers not in usual:
            msg = (f"Link {a} <-> {b} runs at {rate:g} Gb/s ({what}); one end runs {expected:g} Gb/s on other "
                   f"ports (check the cable, the HCA and its firmware)")  # fmt: skip
        else:
            msg = (f"Link {a} <-> {b} runs at {rate:g} Gb/s ({what}); "
                   f"{groups[tiers][expected]} of {sum(groups[tiers].values())} similar links run {expected:g} Gb/s")  # fmt: skip
        findings.append(
            Finding(
                "link_below_capability",
                "minor",
                "link",
                link_key_of(link),
                f"{a} <-> {b}",
                msg,
                {"rate_gbps": rate, "expected_gbps": expected},
            )  # fmt: skip
        )
    return findings


def error_findings(fabric, thresholds: dict[str, int] | None = None) -> list[Finding]:
    """Ports whose raw error counters exceed ``thresholds`` (default :data:`ERROR_THRESHOLDS`,
    overridable by ``settings.WEFT_HEALTH_ERROR_THRESHOLDS``)."""

    limits = dict(ERROR_THRESHOLDS)
    limits.update(settings.WEFT_HEALTH_ERROR_THRESHOLDS)
    limits.update(thresholds or {})
    findings = []
    rows = PortCounters.objects.filter(port__node__fabric=fabric).select_related("port__node")
    for row in rows:
        over = {
            name: getattr(row, name)
            for name, limit in limits.items()
            if getattr(row, name, None) is not None and getattr(row, name) > limit
        }
        if over:
            port = row.port
            text = ", ".join(f"{k}={v}" for k, v in over.items())
            findings.append(
                Finding(
                    "port_errors",
                    "minor",
                    "port",
                    port_key(port.node.node_guid, port.port_num),
                    str(port),
                    f"{port}: error counters above threshold: {text}",
                    {"counters": over, "thresholds": {k: limits[k] for k in over}},
                )  # fmt: skip
            )
    return findings


def reachability_findings(fabric) -> list[Finding]:
    """Nodes the fabric's discoveries could not reach, or with every counter-read port stale.

    A node is unreached when a partial discovery kept it behind a failed MAD
    (``Node.unreachable_since``, ``fabric.services.ingest.Reach``); a complete discovery removes
    the nodes it missed and clears the mark of those it reached. (``last_seen`` is not the test:
    an unchanged node's row is not rewritten by a rediscovery, by design of the digests.)
    """

    findings = []
    for node in Node.objects.filter(fabric=fabric, unreachable_since__isnull=False):
        findings.append(
            Finding(
                "unreachable_node",
                "warning",
                "node",
                node.node_guid,
                str(node),
                f"{node} was not reached by the fabric's discoveries since {node.unreachable_since:%Y-%m-%d %H:%M}",
                {"unreachable_since": node.unreachable_since.isoformat()},
            )  # fmt: skip
        )
    seen = {f.object_key for f in findings}
    per_node: dict[int, list] = defaultdict(list)
    for row in PortCounters.objects.filter(port__node__fabric=fabric).select_related("port__node"):
        per_node[row.port.node_id].append(row)
    for rows in per_node.values():
        if rows and all(r.stale for r in rows):
            node = rows[0].port.node
            if node.node_guid not in seen:
                reason = rows[0].stale_reason or "counters could not be read"
                findings.append(
                    Finding(
                        "unreachable_node",
                        "warning",
                        "node",
                        node.node_guid,
                        str(node),
                        f"{node}: all {len(rows)} port(s) stale in the last sweep ({reason})",
                        {"stale_reason": reason},
                    )  # fmt: skip
                )
    return findings


def sm_findings(fabric) -> list[Finding]:
    """SM state: a master known, exactly one master, at least one standby."""

    findings = []
    sms = list(fabric.subnet_managers.all())
    masters = [s for s in sms if s.state == SMState.MASTER]
    if not fabric.master_sm_guid and not masters:
        findings.append(
            Finding(
                "sm_state",
                "critical",
                "sm",
                "",
                "subnet manager",
                f"No master SM known for fabric {fabric.name}",
            )  # fmt: skip
        )
    if len(masters) > 1:
        findings.append(
            Finding(
                "sm_state",
                "critical",
                "sm",
                "",
                "subnet manager",
                f"{len(masters)} SMs report MASTER: {', '.join(s.guid for s in masters)}",
                {"masters": [s.guid for s in masters]},
            )  # fmt: skip
        )
    if sms and not any(s.state == SMState.STANDBY for s in sms):
        findings.append(
            Finding(
                "sm_state",
                "warning",
                "sm",
                "",
                "subnet manager",
                "No standby SM: a failure of the master leaves the subnet unmanaged",
            )  # fmt: skip
        )
    return findings


#: Checks other apps registered: ``(code, function(fabric) -> list[Finding])``
_EXTRA_CHECKS: list[tuple[str, Any]] = []


def register_check(code: str, label: str, check) -> None:
    """Add a check of another app: ``check(fabric) -> list[Finding]`` whose findings use ``code``;
    ``label`` is what the pages call it. Registering a code twice replaces it (``ready()`` may run
    more than once in tests)."""
    global _EXTRA_CHECKS
    _EXTRA_CHECKS = [(c, f) for c, f in _EXTRA_CHECKS if c != code] + [(code, check)]
    if code not in CHECKS:
        CHECKS.append(code)
    CHECK_LABELS[code] = label


def check_fabric(fabric) -> list[Finding]:
    """Run every check on ``fabric`` and return the findings (worst first)."""
    findings = (
        topology_findings(fabric)
        + links_below_capability(fabric)
        + error_findings(fabric)
        + reachability_findings(fabric)
        + sm_findings(fabric)
    )
    for _code, check in _EXTRA_CHECKS:
        findings += check(fabric)
    findings.sort(key=lambda f: (-SEVERITY_ORDER.index(f.severity), f.check, f.object_repr))
    return findings


CHECKS = ["duplicate_guid", "duplicate_lid", "invalid_lid", "link_below_capability", "port_errors",
          "unreachable_node", "sm_state"]  # fmt: skip
#: What the pages call each check (the codes stay in the JSON and the API).
CHECK_LABELS = {
    "duplicate_guid": "Duplicate GUIDs",
    "duplicate_lid": "Duplicate LIDs",
    "invalid_lid": "Invalid LIDs",
    "link_below_capability": "Links below capability (width/speed)",
    "port_errors": "Ports with errors",
    "unreachable_node": "Unreachable nodes",
    "sm_state": "Subnet manager state",
}


def build_report(fabric, user=None, trigger: str = "manual"):
    """Run the checks on ``fabric`` and return an unsaved ``HealthReport`` (reads only).

    ``summary`` counts findings per check (every check listed, 0 when clean); ``status`` is the
    worst finding severity or ``ok``; ``duration_s`` is the time the checks took.
    """

    start = time.monotonic()
    findings = check_fabric(fabric)
    summary = {check: 0 for check in CHECKS}
    for f in findings:
        summary[f.check] = summary.get(f.check, 0) + 1
    status = max((f.severity for f in findings), key=SEVERITY_ORDER.index, default="ok")
    return HealthReport(
        fabric=fabric,
        created_by=user if getattr(user, "is_authenticated", False) else None,
        trigger=trigger,
        status=status,
        duration_s=round(time.monotonic() - start, 3),
        summary=summary,
        findings=[f.as_dict() for f in findings],
    )


def run_report(fabric, user=None, trigger: str = "manual"):
    """Run the checks and store a ``HealthReport`` (:func:`build_report`, saved in one transaction);
    returns it. A user's request goes through ``events.reports.run_health_report``, which audits it."""
    report = build_report(fabric, user=user, trigger=trigger)
    with transaction.atomic():
        report.save()
    return report


def report_json(report) -> dict[str, Any]:
    """The JSON export of a report."""
    return {
        "id": report.pk,
        "fabric": report.fabric.name,
        "created": report.created.isoformat(),
        "trigger": report.trigger,
        "created_by": report.created_by.username if report.created_by_id else None,
        "status": report.status,
        "duration_s": report.duration_s,
        "summary": report.summary,
        "findings": report.findings,
    }
