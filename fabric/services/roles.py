"""The one writer of switch roles (``Node.role``: compute, storage, management).

A role is a site's choice, not an IB attribute: the ingest never writes it, so it stays across
rediscoveries as long as the switch does. The scheduler's locality tree (``scheduler.topology``)
leaves storage and management switches out. A fabric's own role is an ordinary field of the
fabric (its API and admin, audited there).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from accounts import audit

from ..choices import FabricRole, NodeType
from ..lookup import node_q
from ..models import Fabric, Node


class RoleError(ValueError):
    """An unknown role, or a switch name that names no switch of the fabric."""


def set_switch_roles(fabric: Fabric, switches: Iterable[str], role: str, *, user=None) -> dict:
    """Give ``role`` to the switches of ``fabric`` named in ``switches`` (each a GUID, LID or
    exact name/description, ``fabric.lookup.node_q``), in one transaction, audited
    (``fabric.switch_roles``). Returns ``{"fabric", "role", "switches", "changed"}``.

    Raises :class:`RoleError`, changing nothing, for an unknown role or a text that names no
    switch of the fabric (all such texts listed).
    """
    if role not in FabricRole.values:
        raise RoleError(f"unknown role {role!r}; use {', '.join(FabricRole.values)}")
    texts = [t for t in (s.strip() for s in switches) if t]
    if not texts:
        raise RoleError("name at least one switch")
    base = Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH)
    ids: set[int] = set()
    unknown = []
    for text in texts:
        found = set(base.filter(node_q(text)).values_list("pk", flat=True))
        if not found:
            unknown.append(text)
        ids |= found
    if unknown:
        raise RoleError(
            f"no switch of fabric {fabric.name} is named {', '.join(repr(t) for t in unknown[:10])}"
        )
    with transaction.atomic():
        rows = list(Node.objects.select_for_update().filter(pk__in=ids).order_by("pk"))
        changed = [n for n in rows if n.role != role]
        Node.objects.filter(pk__in=[n.pk for n in changed]).update(role=role)
        audit.record(
            "fabric.switch_roles",
            fabric,
            {"role": role, "switches": sorted(n.node_guid for n in rows), "changed": len(changed)},
            user=user,
        )
    return {"fabric": fabric.name, "role": role, "switches": len(rows), "changed": len(changed)}
