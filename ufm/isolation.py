"""UFM's "unhealthy ports" with action ``isolate``: ``PUT /app/unhealthy_ports``.

``ports_policy`` ``UNHEALTHY`` disables each named switch port in the fabric
(``ibportstate <switch lid> <port> disable`` through the fabric's HCA port and tool environment,
``fabric.collectors.portstate``), marks it isolated through the one writer of isolated ports
(``fabric.services.isolation``: a ``fabric.IsolatedPort`` row, the Info alarm ``port.isolated``) and
stores the state the port answered through the topology's one writer of port states
(``fabric.services.ingest.apply_port_states``: the port is Down, its link is gone; no
``link.down``, the loss is expected). ``HEALTHY`` enables it again (``ibportstate ... enable``:
the port polls and its link trains; the SM brings it to Active, and a notice or the next
discovery stores the link again), deletes the row and writes ``port.isolation_cleared``, which
clears the alarm. Both are audited (``ufm.port_isolate``, ``ufm.port_healthy``).

Refused (400, nothing done): a port Weft does not know, a CA port (isolate the switch port it is
cabled to: a host's own HCA is not the fabric's to switch off), a port that is not a switch's
physical port, and the switch port cabled to the master SM's port (disabling it would cut the SM
off the subnet; ``Fabric.master_sm_guid``). Every port is checked before any is touched.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from accounts import audit
from fabric.choices import NodeType, PhysState
from fabric.collectors.portstate import set_port_state
from fabric.collectors.tools import ToolError
from fabric.keys import port_key, port_name
from fabric.models import Fabric, Link, Node, Port
from fabric.services.ingest import PortObservation, apply_port_states
from fabric.services.isolation import IsolationTarget, set_isolated

from .inputs import HEALTHY, UNHEALTHY, DeviceHealth, UfmInputError, UnhealthyPorts, ufm_guid
from .models import UfmJob, UnhealthyPort

log = logging.getLogger(__name__)
#: seconds for one ibportstate run
TOOL_TIMEOUT_S = 30.0


@dataclass
class _Target:
    name: str  # UFM's "<guid>_<port>" as asked
    node: Node
    port_num: int
    peer: str
    peer_guid: str = ""
    peer_port_num: int | None = None


class IsolationFailed(RuntimeError):
    """``ibportstate`` failed for some ports (``results`` says which); the others were done and
    recorded. The view answers 502."""

    def __init__(self, message: str, results: list[dict]):
        super().__init__(message)
        self.results = results


def _resolve(fabric: Fabric, ports: list[tuple[str, int]]) -> list[_Target]:
    """The switch ports ``ports`` names (by the switch's node GUID, or a port GUID of it), checked.

    Raises:
        UfmInputError: an unknown port, a CA port, or the SM's own link (see the module docstring).
    """
    sm_guid = fabric.master_sm_guid or ""
    out = []
    for guid, num in ports:
        asked = f"{ufm_guid(guid)}_{num}"
        node = (
            Node.objects.filter(fabric=fabric, node_guid=guid).first()
            or Node.objects.filter(fabric=fabric, ports__port_guid=guid).first()
        )
        if node is None:
            raise UfmInputError(
                "ports", f"{asked}: no node of fabric {fabric.name} has GUID {ufm_guid(guid)}"
            )
        if node.node_type != NodeType.SWITCH:
            raise UfmInputError(
                "ports",
                f"{asked} is a port of {node.name or 'a CA'}: isolate the switch port it is cabled to",
            )
        port = Port.objects.with_link().filter(node=node, port_num=num).first()
        if port is None or num == 0:
            raise UfmInputError("ports", f"{asked}: switch {node.name} has no physical port {num}")
        remote = port.remote
        if remote is not None and sm_guid and sm_guid in (remote.port_guid, remote.node.node_guid):
            raise UfmInputError(
                "ports",
                f"{asked} is cabled to the master SM ({remote.node.name}): disabling it would cut the SM off",
            )
        peer = port_name(remote.node.name or remote.node.node_guid, remote.port_num) if remote else ""
        out.append(
            _Target(
                asked,
                node,
                num,
                peer,
                remote.node.node_guid if remote else "",
                remote.port_num if remote else None,
            )
        )
    return out


def set_port_health(fabric: Fabric, req: UnhealthyPorts, *, user=None) -> dict:
    """Isolate (``UNHEALTHY``) or re-enable (``HEALTHY``) the ports of ``req`` (see the module
    docstring). Returns ``{"ports_policy", "ports": [{"port", "physical_state", "done"}]}``.

    Raises:
        UfmInputError: a port refused (nothing was done).
        IsolationFailed: ``ibportstate`` failed for some ports (the others are done and recorded).
    """
    targets = _resolve(fabric, req.ports)
    action = "disable" if req.policy == UNHEALTHY else "enable"
    results, observed, done = [], {}, []
    for t in targets:
        lid = t.node.lid
        try:
            if not lid:
                raise ToolError(f"switch {t.node.name} has no LID known (rediscover the fabric)")
            reading = set_port_state(fabric, lid, t.port_num, action, timeout=TOOL_TIMEOUT_S)
        except (ToolError, ValueError) as exc:
            log.warning("UFM API: %s of %s failed: %s", action, t.name, exc)
            results.append({"port": t.name, "done": False, "error": str(exc)[:300]})
            continue
        results.append({"port": t.name, "done": True, "physical_state": PhysState(reading.phys_state).label})
        observed[(t.node.node_guid, t.port_num)] = PortObservation(reading.state, reading.phys_state)
        done.append(t)
    _record(fabric, req.policy, done, user)
    if observed:
        apply_port_states(fabric, observed, note=f"UFM API: ports {action}d ({req.policy.lower()})")
    failed = [r for r in results if not r["done"]]
    if failed:
        raise IsolationFailed(
            f"ibportstate {action} failed for {len(failed)} of {len(results)} port(s)", results
        )
    return {"ports_policy": req.policy, "ports": results}


def _record(fabric: Fabric, policy: str, done: list[_Target], user) -> None:
    """Store what was done in one transaction: the isolated ports through their one writer
    (``fabric.services.isolation``: rows, ``port.isolated``/``port.isolation_cleared``), the audit."""
    if not done:
        return
    isolate = policy == UNHEALTHY
    targets = [
        IsolationTarget(t.node, t.port_num, t.peer, t.peer_guid, t.peer_port_num) if isolate
        else IsolationTarget(t.node, t.port_num)
        for t in done
    ]  # fmt: skip
    with transaction.atomic():
        changed = set_isolated(fabric, targets, isolated=isolate, via="ufm", user=user)
        for t, new in zip(done, changed, strict=True):
            key = port_key(t.node.node_guid, t.port_num)
            if isolate:
                row = UnhealthyPort.objects.get(
                    fabric=fabric, node_guid=t.node.node_guid, port_num=t.port_num
                )
                audit.record("ufm.port_isolate", row, {"port": key, "peer": t.peer, "new": new}, user=user)
            else:
                audit.record("ufm.port_healthy", fabric, {"port": key, "was_isolated": new}, user=user)


def _sm_entry_ports(fabric: Fabric) -> dict[int, int]:
    """``{switch node id: port number}``: for each switch, the port a shortest path over the
    stored links from the master SM's node enters it through (breadth-first; the SM's own switch
    is entered through the SM's cable). Isolating a whole switch keeps that port up, so the SM
    (and Weft's ``ibportstate``) still reach the switch to enable its ports again. Empty when no
    master SM is known."""
    sm = fabric.master_sm_guid or ""
    if not sm:
        return {}
    start = (
        Node.objects.filter(fabric=fabric, node_guid=sm).values_list("pk", flat=True).first()
        or Port.objects.filter(node__fabric=fabric, port_guid=sm).values_list("node_id", flat=True).first()
    )
    if start is None:
        return {}
    adjacent: dict[int, list[tuple[int, int]]] = {}
    links = Link.objects.filter(fabric=fabric).values_list(
        "port_a__node_id", "port_a__port_num", "port_b__node_id", "port_b__port_num"
    )
    for a, a_num, b, b_num in links:
        adjacent.setdefault(a, []).append((b, b_num))
        adjacent.setdefault(b, []).append((a, a_num))
    entry: dict[int, int] = {}
    seen, frontier = {start}, [start]
    while frontier:
        nxt = []
        for node in frontier:
            for other, other_port in sorted(adjacent.get(node, [])):
                if other not in seen:
                    seen.add(other)
                    entry[other] = other_port
                    nxt.append(other)
        frontier = nxt
    return entry


def set_device_health(fabric: Fabric, req: DeviceHealth, *, user=None) -> UfmJob:
    """UFM's ``mark_device_unhealthy`` / ``mark_device_healthy`` with ``isolate`` for switches
    (``POST /actions``): a device is unhealthy when its ports are (UFM's "Unhealthy Devices"), so
    ``UNHEALTHY`` isolates every linked physical port of each switch through
    :func:`set_port_health` — except the master SM's own cable and the port the SM reaches the
    switch through (:func:`_sm_entry_ports`; disabling it would cut the switch off, so nothing
    could enable its ports again: listed as ``kept``) — and ``HEALTHY`` re-enables the ports of
    the switch isolated through this API. Returns the finished :class:`UfmJob` (``Completed``, or
    ``Completed With Errors`` when ``ibportstate`` failed for some ports: ``summary["ports"]``).

    Raises:
        UfmInputError: a GUID of no node of the fabric, or of a CA or router (isolate the switch
            port it is cabled to); nothing was done.
    """
    switches = []
    for guid in req.guids:
        node = (
            Node.objects.filter(fabric=fabric, node_guid=guid).first()
            or Node.objects.filter(fabric=fabric, ports__port_guid=guid).first()
        )
        if node is None:
            raise UfmInputError(
                "object_ids", f"{ufm_guid(guid)}: no node of fabric {fabric.name} has this GUID"
            )
        if node.node_type != NodeType.SWITCH:
            raise UfmInputError(
                "object_ids",
                f"{ufm_guid(guid)} is {node.name or 'a CA'}, not a switch: isolate the switch port it is cabled to",
            )
        switches.append(node)
    ports, kept = [], []
    if req.policy == UNHEALTHY:
        entry = _sm_entry_ports(fabric)
        sm = fabric.master_sm_guid or ""
        for node in switches:
            for port in Port.objects.with_link().filter(node=node, port_num__gt=0).order_by("port_num"):
                remote = port.remote
                if remote is None:
                    continue
                if entry.get(node.pk) == port.port_num or (
                    sm and sm in (remote.port_guid, remote.node.node_guid)
                ):
                    kept.append(f"{ufm_guid(node.node_guid)}_{port.port_num}")
                    continue
                ports.append((node.node_guid, port.port_num))
    else:
        for node in switches:
            ports += [
                (node.node_guid, num)
                for num in UnhealthyPort.objects.filter(fabric=fabric, node_guid=node.node_guid)
                .order_by("port_num")
                .values_list("port_num", flat=True)
            ]
    summary = {"object_ids": [ufm_guid(n.node_guid) for n in switches], "kept": kept, "ports": []}
    status = UfmJob.COMPLETED
    if ports:
        try:
            summary["ports"] = set_port_health(
                fabric, UnhealthyPorts(ports=ports, policy=req.policy), user=user
            )["ports"]
        except IsolationFailed as exc:
            summary["ports"], status = exc.results, UfmJob.COMPLETED_WITH_ERRORS
    with transaction.atomic():
        job = UfmJob.objects.create(operation=req.action, status=status, summary=summary, by=user)
        audit.record("ufm.device_health", job, {"action": req.action, **summary}, user=user)
    return job


def job_payload(job: UfmJob) -> dict:
    """A job as UFM's ``GET /jobs/<id>`` answers it: ``{"ID", "Status", "Operation",
    "Progress", "Created", "LastUpdated", "Summary", "Description"}``."""
    done = sum(1 for p in job.summary.get("ports", []) if p.get("done"))
    failed = len(job.summary.get("ports", [])) - done
    return {
        "ID": str(job.pk),
        "Status": job.status,
        "Operation": job.operation,
        "Progress": 100,
        "Created": _status_time(job.created),
        "LastUpdated": _status_time(job.created),
        "Summary": f"{done} port(s) done, {failed} failed, {len(job.summary.get('kept', []))} kept up",
        "Description": job.summary,
    }


def _status_time(at) -> str:
    """UFM's ``StatusTime``: ``Wed Apr 29 00:05:32 2020`` in Weft's time zone."""
    return timezone.localtime(at).strftime("%a %b %d %H:%M:%S %Y")


def unhealthy_ports(fabric: Fabric) -> list[dict]:
    """The ports isolated through this API as UFM's unhealthy-port objects (UFM Enterprise REST
    API guide, "Unhealthy Ports REST API": ``PeerGUID``, ``PeerPortNumber``, ``PeerPortDname``,
    ``PeerNode``, ``PeerPort``, ``PeerLID``, ``UnhealthyGUID``, ``UnhealthyNode``,
    ``UnhealthyPort``, ``UnhealthyPortNumber``, ``UnhealthyPortDname``, ``Condition``, ``State``,
    ``StatusTime``). As in UFM's example, the switch port where the isolation acts is the
    ``Peer`` (Weft disables that switch port: its GUID and number are what a client puts back with
    ``PUT ... HEALTHY``, ``"<PeerGUID>_<PeerPortDname>"``, as ``batch_isolate_devices.py`` does) and
    the port cut off behind it is the ``Unhealthy`` one (``"Unknown"`` when it had no link)."""
    lids = dict(Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH).values_list("node_guid", "lid"))
    names = {}
    peers = {u.peer_guid for u in UnhealthyPort.objects.filter(fabric=fabric).exclude(peer_guid="")}
    if peers:
        names = dict(Node.objects.filter(fabric=fabric, node_guid__in=peers).values_list("node_guid", "name"))
    out = []
    for u in UnhealthyPort.objects.filter(fabric=fabric):
        switch = u.node_name or ufm_guid(u.node_guid)
        far = names.get(u.peer_guid) or (u.peer.rsplit(" ", 1)[0] if u.peer else "Unknown")
        far_num = u.peer_port_num
        out.append(
            {
                "PeerGUID": ufm_guid(u.node_guid),
                "PeerNode": switch,
                "PeerNodeType": "switch",
                "PeerPort": f"{switch}/{u.port_num}",
                "PeerPortNumber": u.port_num,
                "PeerPortDname": str(u.port_num),
                "PeerLID": str(lids.get(u.node_guid) or ""),
                "UnhealthyGUID": ufm_guid(u.peer_guid) if u.peer_guid else "Unknown",
                "UnhealthyNode": far,
                "UnhealthyPort": f"{far}/{far_num}" if far_num is not None else "Unknown",
                "UnhealthyPortNumber": far_num,
                "UnhealthyPortDname": str(far_num) if far_num is not None else "Unknown",
                "Condition": "MANUAL",
                "State": "Info",
                "StatusTime": _status_time(u.since),
            }
        )
    return out


__all__ = [
    "HEALTHY",
    "UNHEALTHY",
    "IsolationFailed",
    "job_payload",
    "set_device_health",
    "set_port_health",
    "unhealthy_ports",
]
