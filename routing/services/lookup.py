"""Which port LID a user's text names, for a trace (``fabric.lookup`` rules: LID, GUID, name)."""

from __future__ import annotations

from fabric.choices import NodeType
from fabric.lookup import lid_of_text, node_q
from fabric.models import Fabric, Node


class EndpointError(ValueError):
    """The text names no node, several, or a CA whose port must be given (message says which)."""


def endpoint_lid(fabric: Fabric, text: str, port: int | None = None) -> int:
    """The LID of the port ``text`` names on ``fabric``: a LID as is; a node (GUID, port GUID,
    name or description, exact) — a switch's LID, a CA's port LID (``port`` when it has several
    ports with a LID).

    Raises:
        EndpointError: empty text, no such node, several nodes, a CA with several LID ports and no
            ``port``, a port without a LID.
    """
    value = (text or "").strip()
    if not value:
        raise EndpointError("give a LID, a GUID or a node name")
    lid = lid_of_text(value)
    if lid is not None:  # decimal digits up to 0xFFFF: a LID (fabric.lookup's rule)
        return lid
    nodes = list(Node.objects.filter(node_q(value), fabric=fabric).order_by("pk")[:6])
    if not nodes:
        raise EndpointError(f"no node of {fabric.name} is {value!r}")
    if len(nodes) > 1:
        names = ", ".join(n.name or n.node_guid for n in nodes[:5])
        raise EndpointError(f"{value!r} names several nodes ({names}); give a GUID or a LID")
    node = nodes[0]
    if node.node_type == NodeType.SWITCH:
        if not node.lid:
            raise EndpointError(f"switch {node.name} has no LID")
        return node.lid
    ports = list(node.ports.filter(lid__gt=0).order_by("port_num").values_list("port_num", "lid"))
    if port is not None:
        for num, plid in ports:
            if num == port:
                return plid
        raise EndpointError(f"{node.name} has no port {port} with a LID")
    if len(ports) == 1:
        return ports[0][1]
    if not ports:
        raise EndpointError(f"{node.name} has no port with a LID")
    raise EndpointError(f"{node.name} has {len(ports)} ports with a LID: give the port")
