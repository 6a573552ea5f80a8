"""UFM's "unhealthy ports" with action ``isolate``: ``PUT /app/unhealthy_ports``.

``ports_policy`` ``UNHEALTHY`` disables each named switch port in the fabric
(``ibportstate <switch lid> <port> disable`` through the fabric's HCA port and tool environment,
``fabric.collectors.portstate``), marks it unhealthy in Weft (a ``ufm.UnhealthyPort`` row), raises
``port.isolated`` (an alarm on the port) and stores the state the port answered through the
topology's one writer of port states (``fabric.services.ingest.apply_port_states``: the port is
Down, its link is gone, ``link.down``). ``HEALTHY`` enables it again (``ibportstate ... enable``:
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

from accounts import audit
from events.services import EventSpec, record_events
from fabric.choices import NodeType, PhysState
from fabric.collectors.portstate import set_port_state
from fabric.collectors.tools import ToolError
from fabric.keys import port_key, port_name
from fabric.models import Fabric, Node, Port
from fabric.services.ingest import PortObservation, apply_port_states

from .inputs import HEALTHY, UNHEALTHY, UfmInputError, UnhealthyPorts, ufm_guid
from .models import UnhealthyPort

log = logging.getLogger(__name__)
#: seconds for one ibportstate run
TOOL_TIMEOUT_S = 30.0


@dataclass
class _Target:
    name: str  # UFM's "<guid>_<port>" as asked
    node: Node
    port_num: int
    peer: str


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
        out.append(_Target(asked, node, num, peer))
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
    """Store what was done in one transaction: the unhealthy rows, the events, the audit."""
    if not done:
        return
    specs = []
    with transaction.atomic():
        for t in done:
            key = port_key(t.node.node_guid, t.port_num)
            shown = port_name(t.node.name or t.node.node_guid, t.port_num)
            if policy == UNHEALTHY:
                row, created = UnhealthyPort.objects.get_or_create(
                    fabric=fabric, node_guid=t.node.node_guid, port_num=t.port_num,
                    defaults={"node_name": t.node.name, "peer": t.peer, "by": user},
                )  # fmt: skip
                audit.record(
                    "ufm.port_isolate", row, {"port": key, "peer": t.peer, "new": created}, user=user
                )
                if created:
                    specs.append(EventSpec(
                        code="port.isolated", message=f"port {shown} isolated (disabled) through the UFM API"
                        + (f"; its link to {t.peer} is down" if t.peer else ""),
                        object_type="port", object_key=key, object_repr=shown, node_id=t.node.pk,
                        details={"peer": t.peer},
                    ))  # fmt: skip
            else:
                gone, _ = UnhealthyPort.objects.filter(
                    fabric=fabric, node_guid=t.node.node_guid, port_num=t.port_num
                ).delete()
                audit.record("ufm.port_healthy", fabric, {"port": key, "was_isolated": bool(gone)}, user=user)
                if gone:
                    specs.append(EventSpec(
                        code="port.isolation_cleared", message=f"port {shown} enabled again through the UFM API",
                        object_type="port", object_key=key, object_repr=shown, node_id=t.node.pk,
                    ))  # fmt: skip
        if specs:
            record_events(fabric, specs)


def unhealthy_ports(fabric: Fabric) -> list[dict]:
    """The ports isolated through this API: ``[{"port", "guid", "port_num", "node", "peer",
    "since", "ports_policy"}]``."""
    return [
        {
            "port": f"{ufm_guid(u.node_guid)}_{u.port_num}",
            "guid": ufm_guid(u.node_guid),
            "port_num": u.port_num,
            "node": u.node_name,
            "peer": u.peer,
            "since": u.since.isoformat(),
            "ports_policy": UNHEALTHY,
            "action": "isolate",
        }
        for u in UnhealthyPort.objects.filter(fabric=fabric)
    ]


__all__ = ["HEALTHY", "UNHEALTHY", "IsolationFailed", "set_port_health", "unhealthy_ports"]
