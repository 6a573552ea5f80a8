"""Isolated ports: switch ports disabled on purpose, the one writer of ``fabric.IsolatedPort``.

Two callers isolate a port, each after ``ibportstate <lid> <port> disable`` succeeded
(``fabric.collectors.portstate.set_port_state``): the port page's Disable
(``fabric.services.portactions``, ``via="page"``) and the UFM-compatible API's unhealthy ports
(``ufm.isolation``: ``PUT /app/unhealthy_ports`` ``UNHEALTHY``, ``mark_device_unhealthy``,
``via="ufm"``). Both call :func:`set_isolated` inside their own transaction, with their audit
entry, before the state the port answered goes to ``fabric.services.ingest.apply_port_states``.

While a row exists the port's link is expected to be down: the ingest writes no ``link.down``
for a link with an isolated end (neither after the disable nor when a later discovery no longer
sees the link; :func:`isolated_keys`), so nothing Critical is raised and nothing is mailed. The
isolation itself is the Info alarm ``port.isolated`` on the port, cleared by
``port.isolation_cleared`` when the port is enabled again (page Enable, UFM ``HEALTHY``), which
deletes the row, or when a discovery finds its link up again (:func:`clear_seen_linked`: it was
enabled outside Weft, and a later failure of that link must be a ``link.down`` again).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from events.services import EventSpec, record_events

from ..keys import port_key, port_name
from ..models import Fabric, IsolatedPort, Node
from ..signals import ports_enabled

#: ``via`` → how the event message names the place it was done
VIA = {"page": "from the port page", "ufm": "through the UFM API"}
#: the message of an isolation that ended because its link was seen up again
SEEN_LINKED = "its link is up again (enabled outside Weft)"


@dataclass(frozen=True)
class IsolationTarget:
    """A switch port (``node``, ``port_num``) and, when isolating, its peer when it was cabled:
    ``peer`` ``"<name> <port>"``, ``peer_guid`` (node GUID), ``peer_port_num``."""

    node: Node
    port_num: int
    peer: str = ""
    peer_guid: str = ""
    peer_port_num: int | None = None


def set_isolated(
    fabric: Fabric, targets: list[IsolationTarget], *, isolated: bool, via: str, user=None
) -> list[bool]:
    """Record ``targets`` as isolated (a row each, ``port.isolated``) or no longer isolated (rows
    deleted, ``port.isolation_cleared``), in one transaction (joins the caller's). ``via`` is
    ``"page"`` or ``"ufm"`` (:data:`VIA`); ``user`` is who did it (kept as ``IsolatedPort.by``).

    Enabling (``isolated=False``: the tool enabled the ports) sends ``fabric.signals.ports_enabled``
    for every target on commit, isolated before or not.

    Returns, per target, whether it changed anything (a port isolated twice keeps its first
    row, who and when; enabling a port that was not isolated writes no event).

    Raises:
        ValueError: ``via`` is not one of :data:`VIA`.
    """
    if via not in VIA:
        raise ValueError(f"via {via!r} is not one of {', '.join(VIA)}")
    changed, specs = [], []
    with transaction.atomic():
        for t in targets:
            key = port_key(t.node.node_guid, t.port_num)
            shown = port_name(t.node.name or t.node.node_guid, t.port_num)
            if isolated:
                _row, created = IsolatedPort.objects.get_or_create(
                    fabric=fabric, node_guid=t.node.node_guid, port_num=t.port_num,
                    defaults={"node_name": t.node.name, "peer": t.peer, "peer_guid": t.peer_guid,
                              "peer_port_num": t.peer_port_num, "by": user, "via": via},
                )  # fmt: skip
                changed.append(created)
                if created:
                    who = getattr(user, "username", "") or "Weft"
                    specs.append(EventSpec(
                        code="port.isolated",
                        message=f"port {shown} isolated (disabled) by {who} {VIA[via]}"
                        + (f"; its link to {t.peer} is down until it is enabled" if t.peer else ""),
                        object_type="port", object_key=key, object_repr=shown, node_id=t.node.pk,
                        details={"peer": t.peer, "by": who, "via": via},
                    ))  # fmt: skip
            else:
                gone, _ = IsolatedPort.objects.filter(
                    fabric=fabric, node_guid=t.node.node_guid, port_num=t.port_num
                ).delete()
                changed.append(bool(gone))
                if gone:
                    specs.append(EventSpec(
                        code="port.isolation_cleared", message=f"port {shown} enabled again {VIA[via]}",
                        object_type="port", object_key=key, object_repr=shown, node_id=t.node.pk,
                    ))  # fmt: skip
        if specs:
            record_events(fabric, specs)
        if not isolated and targets:
            ports = [(t.node.node_guid, t.port_num) for t in targets]
            transaction.on_commit(lambda: ports_enabled.send(sender=Fabric, fabric_id=fabric.pk, ports=ports))
    return changed


def clear_seen_linked(fabric: Fabric, ends: set[tuple[str, int]]) -> list[tuple[str, int]]:
    """End the isolation of the isolated ports among ``ends`` (``{(node GUID, port)}``: the ends of
    links a discovery found up), in the caller's transaction: their rows are deleted and each gets
    the Info ``port.isolation_cleared`` ("its link is up again"), which clears ``port.isolated``.

    An isolated port is disabled, so its link can only come back when someone enabled it outside
    Weft (``ibportstate`` by hand, the switch's own CLI, a lab's ``relink``); kept isolated, the
    port would stay listed as isolated while carrying traffic, and its next failure would write
    no ``link.down``. Sends no ``ports_enabled``: the link is up already (a lab retrain of it would
    pull it once more). Returns the ports whose isolation ended, sorted."""
    rows = [
        r
        for r in IsolatedPort.objects.filter(fabric=fabric).values_list(
            "pk", "node_guid", "port_num", "node_name"
        )
        if (r[1], r[2]) in ends
    ]
    if not rows:
        return []
    node_ids = dict(
        Node.objects.filter(fabric=fabric, node_guid__in={r[1] for r in rows}).values_list("node_guid", "pk")
    )
    IsolatedPort.objects.filter(pk__in=[r[0] for r in rows]).delete()
    specs = []
    for _pk, guid, num, name in rows:
        shown = port_name(name or guid, num)
        specs.append(EventSpec(
            code="port.isolation_cleared", message=f"port {shown}: {SEEN_LINKED}",
            object_type="port", object_key=port_key(guid, num), object_repr=shown, node_id=node_ids.get(guid),
            details={"via": "discovery"},
        ))  # fmt: skip
    record_events(fabric, specs)
    return sorted((guid, num) for _pk, guid, num, _name in rows)


def isolated_keys(fabric: Fabric) -> set[tuple[str, int]]:
    """The isolated ports of ``fabric`` as ``{(node GUID, port)}`` (and their peers when they
    were cabled: the cable's other end is down because of the isolation too)."""
    out: set[tuple[str, int]] = set()
    for guid, num, pguid, pnum in IsolatedPort.objects.filter(fabric=fabric).values_list(
        "node_guid", "port_num", "peer_guid", "peer_port_num"
    ):
        out.add((guid, num))
        if pguid and pnum is not None:
            out.add((pguid, pnum))
    return out
