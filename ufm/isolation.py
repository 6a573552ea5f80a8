"""UFM's "unhealthy ports" with action ``isolate``: ``PUT /app/unhealthy_ports``.

``ports_policy`` ``UNHEALTHY`` disables each named switch port in the fabric, ``HEALTHY`` enables
it again, through the one runner of a switch port's disable and enable that the port page uses
too (``fabric.services.portactions.request_port_action`` with ``via="ufm"``): on a worker of the
fabric's collector site (``fabric.tasks.port_action_task`` on the site's queue, ``core.sites``),
never in the web process, this request waiting for each port's answer (at most
``fabric.services.portactions.SITE_WAIT_S`` each); at once in this process when site checks are
off (the embedded deployment). That runner checks the port page's rules again (the SM's path, the
route Weft reaches the switch through: a port refused there is a failed port here), runs
``ibportstate <switch lid> <port> disable|enable``, marks the port isolated or not through the one
writer of isolated ports (``fabric.services.isolation``: a ``fabric.IsolatedPort`` row, the Info
alarm ``port.isolated``, cleared by ``port.isolation_cleared``), stores the state the port answered
through the topology's one writer of port states (``fabric.services.ingest.apply_port_states``:
the port is Down, its link is gone; no ``link.down``, the loss is expected) and audits it
(``port.disable``/``port.enable`` with ``via: "ufm"``). An enabled port polls and its link trains;
the SM brings it to Active, and a notice or the next discovery stores the link again.

Refused (400, nothing done): a port Weft does not know, a CA port (isolate the switch port it is
cabled to: a host's own HCA is not the fabric's to switch off), a port that is not a switch's
physical port, and the switch port cabled to the master SM's port (disabling it would cut the SM
off the subnet; ``Fabric.master_sm_guid``). Every port is checked before any is touched. 503
(``core.sites.SiteDown``, nothing sent) when the fabric's site has no live worker.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from accounts import audit
from core.sites import require_live
from fabric.choices import NodeType
from fabric.models import Fabric, Link, Node, Port
from fabric.services.portactions import PortActionFailed, PortActionRefused, request_port_action

from .inputs import HEALTHY, UNHEALTHY, DeviceHealth, UfmInputError, UnhealthyPorts, ufm_guid
from .models import UfmJob, UnhealthyPort

log = logging.getLogger(__name__)
#: seconds for one ibportstate run
TOOL_TIMEOUT_S = 30.0


@dataclass
class _Target:
    name: str  # UFM's "<guid>_<port>" as asked
    node: Node
    port: Port


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
        out.append(_Target(asked, node, port))
    return out


def set_port_health(fabric: Fabric, req: UnhealthyPorts, *, user=None) -> dict:
    """Isolate (``UNHEALTHY``) or re-enable (``HEALTHY``) the ports of ``req`` (see the module
    docstring), one after the other. Returns ``{"ports_policy", "ports": [{"port",
    "physical_state", "done"}]}`` (``physical_state`` as the port answered, e.g. ``Disabled``).

    Raises:
        UfmInputError: a port refused (nothing was done).
        core.sites.SiteDown: the fabric's site has no live worker (503; nothing was sent).
        IsolationFailed: some ports failed (``ibportstate`` failed, the port page's rules refused
            the port, or no answer from the site's worker in time); the others are done and
            recorded.
    """
    targets = _resolve(fabric, req.ports)
    action = "disable" if req.policy == UNHEALTHY else "enable"
    require_live(fabric.site, f"The UFM API's {action} of {len(targets)} port(s) of fabric {fabric.name} was")
    results = []
    for t in targets:
        try:
            if not t.node.lid:
                raise PortActionFailed(f"switch {t.node.name} has no LID known (rediscover the fabric)")
            done = request_port_action(t.port, action, user=user, via="ufm")
        except (PortActionFailed, PortActionRefused, ValueError) as exc:
            log.warning("UFM API: %s of %s failed: %s", action, t.name, exc)
            results.append({"port": t.name, "done": False, "error": str(exc)[:300]})
            continue
        results.append({"port": t.name, "done": True, "physical_state": done.as_dict()["phys_state"]})
    failed = [r for r in results if not r["done"]]
    if failed:
        raise IsolationFailed(
            f"ibportstate {action} failed for {len(failed)} of {len(results)} port(s)", results
        )
    return {"ports_policy": req.policy, "ports": results}


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
