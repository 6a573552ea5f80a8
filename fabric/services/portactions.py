"""Admin actions on a switch port: disable, enable, reset (``ibportstate``) and counter reset
(``perfquery -R``), for Operators and Admins, confirmed and audited (``port.<action>``).

Refused (``PortActionRefused``, nothing sent) — the rule, checked before any MAD goes out:

1. **Not a switch port**: a CA's or router's port (a host's own HCA is not the fabric's to switch
   off: act on the switch port it is cabled to), or switch port 0 (the management port).
2. **The SM's own path**: every switch port whose loss would cut the master SM off the subnet,
   or cut Weft off the SM (so that nothing, not even this page's ``enable``, could reach the port
   again). These are

   * the switch port cabled to the master SM's port (``Fabric.master_sm_guid``);
   * the switch port cabled to the local HCA port the fabric's diags use (``ibaddr``): every
     MAD Weft sends, including the one that would enable the port again, leaves through it;
   * every switch port on the LID routes between that local port and the master SM, both ways
     (``ibtracert <local lid> <sm lid>`` and back, read from the switches' forwarding tables at
     the time of the request). Disable, enable and reset are MADs routed by LID like any other
     (``ibportstate`` uses LID routing), so a port on that route is also on Weft's way to the SM;
   * the port through which Weft's MADs reach the target switch itself (the last port of the
     route from the local port to the switch's LID): disabled, it would cut the switch off Weft,
     and the ``enable`` could never reach it.

   When the SM or the local port cannot be determined the action is refused too (fail closed).
   A counter reset changes no link state: only rule 1 applies to it.

After ``disable``/``enable``/``reset`` the state the port answered is stored through the one writer
of port states (``fabric.services.ingest.apply_port_states``: ``port.state_changed``,
``link.down``); a reset port comes back through the SM's sweep, its notice or the next discovery.
A disable is a deliberate isolation: it is recorded first through the one writer of isolated ports
(``fabric.services.isolation``: Info ``port.isolated``, listed at ``/fabric/isolated/``), so the
link's loss writes no Critical ``link.down`` and mails nobody; an enable clears it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction

from accounts import audit

from ..choices import NodeType, PhysState, PortState
from ..collectors.portstate import reset_port_counters, set_port_state
from ..collectors.route import local_port, route_ports
from ..collectors.tools import ToolError
from ..keys import port_key, port_name
from ..models import Port
from .ingest import PortObservation, apply_port_states
from .isolation import VIA, IsolationTarget, set_isolated

log = logging.getLogger(__name__)

#: action → what the confirmation and the audit call it
ACTIONS = {
    "disable": "Disable (PortPhysicalState Disabled: the link goes down)",
    "enable": "Enable (PortPhysicalState Polling: the link trains)",
    "reset": "Reset (LinkState Down: the SM brings the link up again)",
    "clear_counters": "Reset counters (perfquery -R)",
}
TOOL_TIMEOUT_S = 30.0


class PortActionRefused(ValueError):
    """The action is not allowed on this port; the message says why (the page/API answers 409)."""


class PortActionFailed(RuntimeError):
    """The tool failed (the message says how; the page/API answers 502). Nothing was stored."""


@dataclass(frozen=True)
class PortActionResult:
    """``action`` done on ``port``; ``state``/``phys_state`` as the port answered (None for a
    counter reset)."""

    action: str
    port: str
    state: int | None = None
    phys_state: int | None = None

    def as_dict(self) -> dict:
        return {
            "action": self.action,
            "port": self.port,
            "state": PortState(self.state).label if self.state is not None else None,
            "phys_state": PhysState(self.phys_state).label if self.phys_state is not None else None,
        }


def sm_path_ports(fabric) -> set[tuple[str, int]]:
    """The switch ports ``(switch GUID, port)`` of rule 2 (module docstring).

    Raises:
        PortActionRefused: the master SM is unknown, or the local port or the route cannot be read.
    """
    if not fabric.master_sm_guid or not fabric.master_sm_lid:
        raise PortActionRefused(
            f"the master SM of {fabric.name} is not known, so the SM's path cannot be checked: "
            "rediscover the fabric first"
        )
    try:
        local = local_port(fabric, timeout=TOOL_TIMEOUT_S)
        path = set(route_ports(fabric, local.lid, fabric.master_sm_lid, timeout=TOOL_TIMEOUT_S))
        path |= set(route_ports(fabric, fabric.master_sm_lid, local.lid, timeout=TOOL_TIMEOUT_S))
    except ToolError as exc:
        raise PortActionRefused(f"the SM's path cannot be checked: {exc}") from None
    ends = {fabric.master_sm_guid, local.port_guid}
    cabled = Port.objects.with_link().filter(node__fabric=fabric, port_guid__in=ends)
    for port in cabled:
        remote = port.remote
        if remote is not None and remote.node.node_type == NodeType.SWITCH:
            path.add((remote.node.node_guid, remote.port_num))
    return path


def check_port_action(port: Port, action: str) -> None:
    """Raise :class:`PortActionRefused` when ``action`` may not run on ``port`` (rules in the
    module docstring); ``ValueError`` for an unknown action. Runs ``ibaddr``/``ibtracert`` for
    the link-state actions."""
    if action not in ACTIONS:
        raise ValueError(f"action {action!r} is not one of {', '.join(ACTIONS)}")
    node = port.node
    shown = port_name(str(node), port.port_num)
    if node.node_type != NodeType.SWITCH:
        raise PortActionRefused(
            f"{shown} is a port of a {node.get_node_type_display()}: act on the switch port it is cabled to"
        )
    if port.port_num == 0:
        raise PortActionRefused(f"{shown} is the switch's management port 0, not a cable's")
    if not node.lid:
        raise PortActionRefused(f"switch {node} has no LID known: rediscover the fabric")
    if not node.fabric.has_live_access:
        raise PortActionRefused(f"fabric {node.fabric.name} has no live access from this host")
    if action == "clear_counters":
        return
    path = sm_path_ports(node.fabric)
    if (node.node_guid, port.port_num) in path or (port.port_guid, port.port_num) in path:
        raise PortActionRefused(
            f"{shown} is on the SM's own path: {_sm_path_why(port)}. Taking it down would cut the subnet "
            "manager or Weft off the fabric, and nothing could enable the port again"
        )
    try:
        local = local_port(node.fabric, timeout=TOOL_TIMEOUT_S)
        to_switch = route_ports(node.fabric, local.lid, node.lid, timeout=TOOL_TIMEOUT_S)
    except ToolError as exc:
        raise PortActionRefused(f"the route to {node} cannot be read: {exc}") from None
    if (
        to_switch
        and to_switch[-1][1] == port.port_num
        and to_switch[-1][0] in (node.node_guid, port.port_guid)
    ):
        raise PortActionRefused(
            f"{shown} is the port through which this host reaches {node}: disabled, the switch could not "
            "be reached again to enable it"
        )


def _sm_path_why(port: Port) -> str:
    """Why ``port`` (one of :func:`sm_path_ports`) is on the SM's path, in plain words: cabled to
    the HCA the master SM runs on, cabled to this host's HCA, or on the route between the two."""
    fabric = port.node.fabric
    peer = _peer(port)
    sm = (
        Port.objects.filter(node__fabric=fabric, port_guid=fabric.master_sm_guid)
        .select_related("node")
        .first()
        if fabric.master_sm_guid
        else None
    )
    if peer is not None and fabric.master_sm_guid in (peer.port_guid, peer.node.node_guid):
        return f"it is cabled to {peer.node}, the HCA the master subnet manager runs on"
    try:
        local = local_port(fabric, timeout=TOOL_TIMEOUT_S)
    except ToolError:
        local = None
    if peer is not None and local is not None and peer.port_guid == local.port_guid:
        return f"it is cabled to {peer.node}, this host's HCA: every MAD Weft sends (the enable too) leaves through it"
    between = f" ({sm.node})" if sm is not None else ""
    return (
        "it carries the SM's own route: the LID route between this host's HCA and the HCA the master "
        f"subnet manager runs on{between}"
    )


def _peer(port: Port) -> Port | None:
    """The port cabled to ``port`` (None when it has no stored link)."""
    linked = Port.objects.with_link().select_related("node").get(pk=port.pk)
    return linked.remote


def _isolation_target(port: Port, peer: Port | None) -> IsolationTarget:
    if peer is None:
        return IsolationTarget(port.node, port.port_num)
    return IsolationTarget(
        port.node, port.port_num, port_name(peer.node.name or peer.node.node_guid, peer.port_num),
        peer.node.node_guid, peer.port_num,
    )  # fmt: skip


def run_port_action(port: Port, action: str, *, user=None, via: str = "page") -> PortActionResult:
    """Check (:func:`check_port_action`), run the tool, store what the port answered, audit
    (``port.<action>``; refused and failed attempts too, with ``done: false`` and why).

    The one runner of a switch port's disable and enable, whoever asks: ``via`` ``"page"`` (the
    port page and ``POST /api/fabric/ports/<id>/action/``) or ``"ufm"`` (the UFM-compatible API's
    unhealthy ports, ``ufm.isolation``), as ``fabric.services.isolation.VIA`` names them; it is
    kept in the audit entry (``via``) and the isolation's event.

    Raises:
        PortActionRefused: refused (nothing sent).
        PortActionFailed: the tool failed (nothing stored; the failure is audited).
        ValueError: an unknown action, or ``via`` not one of ``fabric.services.isolation.VIA``.
    """
    if via not in VIA:
        raise ValueError(f"via {via!r} is not one of {', '.join(VIA)}")
    port = Port.objects.select_related("node__fabric").get(pk=port.pk)
    node, fabric = port.node, port.node.fabric
    key, shown = port_key(node.node_guid, port.port_num), port_name(str(node), port.port_num)
    try:
        check_port_action(port, action)
    except PortActionRefused as exc:  # a refused attempt is audited too (who tried what, and why not)
        with transaction.atomic():
            audit.record(
                f"port.{action}",
                port,
                {"port": key, "via": via, "done": False, "refused": str(exc)[:300]},
                user=user,
            )
        raise
    peer = _peer(port)  # read before the disable removes the link
    try:
        if action == "clear_counters":
            reset_port_counters(fabric, node.lid, port.port_num, timeout=TOOL_TIMEOUT_S)
            result = PortActionResult(action, shown)
        else:
            reading = set_port_state(fabric, node.lid, port.port_num, action, timeout=TOOL_TIMEOUT_S)
            result = PortActionResult(action, shown, reading.state, reading.phys_state)
    except (ToolError, ValueError) as exc:
        log.warning("port action %s on %s failed: %s", action, shown, exc)
        with transaction.atomic():
            audit.record(
                f"port.{action}",
                port,
                {"port": key, "via": via, "done": False, "error": str(exc)[:300]},
                user=user,
            )
        raise PortActionFailed(str(exc)) from None
    with transaction.atomic():  # the audit entry, the isolation and the state the port answered, together
        audit.record(
            f"port.{action}", port, {"port": key, "via": via, "done": True, **result.as_dict()}, user=user
        )
        if action in ("disable", "enable"):
            set_isolated(
                fabric, [_isolation_target(port, peer)], isolated=action == "disable", via=via, user=user
            )
        if result.state is not None:
            observed = {(node.node_guid, port.port_num): PortObservation(result.state, result.phys_state)}
            note = f"port {shown} {action} by {getattr(user, 'username', '') or 'Weft'}"
            apply_port_states(fabric, observed, note=note)
    return result


#: seconds the API waits for a port action run by the fabric's site worker (the route checks and
#: the tool, each within :data:`TOOL_TIMEOUT_S`, plus the queue)
SITE_WAIT_S = 4 * TOOL_TIMEOUT_S


def request_port_action(port: Port, action: str, *, user=None, via: str = "page") -> PortActionResult:
    """:func:`run_port_action` where the fabric can be reached (issue 25 §2): at once in this
    process when site checks are off (the embedded deployment reaches every fabric), else on a
    worker of the fabric's collector site (``fabric.tasks.port_action_task`` on its site queue),
    waiting up to :data:`SITE_WAIT_S` for its answer. ``via`` as :func:`run_port_action` (the
    port page and the UFM API's unhealthy ports both come here: one runner, one queue).

    Raises:
        core.sites.SiteDown: the site has no live worker (503; nothing sent).
        PortActionRefused, PortActionFailed: as :func:`run_port_action` (on the worker); also
            PortActionFailed when no answer came in time (the action may still run: the audit log
            and the port's state say what happened).
    """
    from core import enqueue
    from core.sites import checks_enabled, require_live

    if not checks_enabled():
        return run_port_action(port, action, user=user, via=via)
    port = Port.objects.select_related("node__fabric").get(pk=port.pk)
    fabric = port.node.fabric
    require_live(fabric.site, f"The port action {action} on fabric {fabric.name} was")
    handle = enqueue.send("fabric.port_action", fabric.pk, port.pk, action, getattr(user, "pk", None), via)
    try:
        answer = handle.get(timeout=SITE_WAIT_S, disable_sync_subtasks=False)
    except Exception as exc:  # celery.exceptions.TimeoutError, a lost result backend
        raise PortActionFailed(
            f"no answer from site {fabric.site}'s worker within {SITE_WAIT_S:g} s "
            f"({type(exc).__name__}); see the audit log for whether the action ran"
        ) from None
    if "refused" in answer:
        raise PortActionRefused(answer["refused"])
    if "failed" in answer:
        raise PortActionFailed(answer["failed"])
    return PortActionResult(**answer["done"])
