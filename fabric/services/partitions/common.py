"""Errors, owners and the small helpers every partitions module shares (one place each)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

from django.db import transaction

from accounts.scoping import row_tenants, tenant_of_rows
from events.services import EventSpec

from ...choices import ApplyState, Membership
from ...guid import normalize_guid
from ...models import Fabric, Node, Partition, Port
from ...parsers.partitions import (
    KEYWORDS,
)
from ...signals import partitions_changed

log = logging.getLogger(__name__)


class PartitionError(ValueError):
    """A change the service refuses (a PKey out of range or taken, a name taken, a bad member GUID,
    a partitions file without a PKey for a partition); nothing was written. ``field``: the
    partition field at fault (``pkey``, ``name``), for a 400 naming it."""

    def __init__(self, message: str, field: str = "pkey"):
        super().__init__(message)
        self.field = field


#: names the pools app gives the partitions it owns (``pool_<id>``, ``job_<id>``): only it uses them
OWNER_NAME_RE = re.compile(r"^(pool|job)_[0-9]+$")


class PartitionOwned(PartitionError):
    """A change of a partition another part of Weft owns (a pool's PKey, a job's isolation
    partition: a one-to-one relation to ``Partition`` declared by that app) asked by someone else
    than the owner: its PKey, name or fabric, its owner-computed (``pool``) members, or deleting it.
    The API answers 409. ``owner`` names the holder (``"pool vision"``, ``"job 5 train"``);
    nothing was written."""

    def __init__(self, partition: Partition, owner: str, kind: str, what: str):
        self.owner, self.kind = owner, kind
        ValueError.__init__(
            self,
            f"partition {partition.name} (0x{partition.pkey:04x}) belongs to {owner}: {what} "
            f"only through the {kind} (the partition follows its {kind})",
        )
        self.field = "detail"


def partition_owner(partition: Partition) -> tuple[str, str] | None:
    """``(owner, kind)`` of what else holds ``partition`` through a one-to-one relation another
    app declares (``pools.Pool.partition`` → ``("pool vision", "pool")``, ``scheduler.Job.partition``
    → ``("job 5 train", "job")``), or None. Read from ``Partition``'s related objects, so this app
    names none of those apps."""
    if partition.pk is None:
        return None
    return partition_owners([partition.pk]).get(partition.pk)


def partition_owners(partition_ids: Iterable[int]) -> dict[int, tuple[str, str]]:
    """:func:`partition_owner` of many partitions at once: ``{partition id: (owner, kind)}`` for
    those that have an owner (one query per owning relation and 500 ids, not per partition)."""
    ids = sorted(set(partition_ids))
    out: dict[int, tuple[str, str]] = {}
    for rel in Partition._meta.related_objects:
        if not rel.one_to_one:
            continue
        kind = str(rel.related_model._meta.verbose_name)
        name = rel.field.name
        for i in range(0, len(ids), 500):
            holders = rel.related_model._default_manager.filter(**{f"{name}__in": ids[i : i + 500]})
            for holder in holders.order_by("pk"):
                text = str(holder)
                out.setdefault(
                    getattr(holder, rel.field.attname),
                    ((text if text.startswith(f"{kind} ") else f"{kind} {text}"), kind),
                )
    return out


def refuse_if_owned(partition: Partition, what: str, as_owner: bool) -> None:
    """Raise :class:`PartitionOwned` when ``partition`` has an owner and the caller is not it."""
    if as_owner:
        return
    owned = partition_owner(partition)
    if owned is not None:
        raise PartitionOwned(partition, owned[0], owned[1], what)


class ApplyError(RuntimeError):
    """The partitions could not be applied (no path or signal configured, the file could not be
    written, OpenSM could not be signalled); recorded as ``partition.apply_failed``."""


def ports_by_guid(fabric: Fabric, guids: Iterable[str]) -> dict[str, int]:
    """``{port GUID: port id}`` of the GUIDs of ``guids`` that are ports of ``fabric`` (keywords
    skipped; 500 GUIDs a query)."""
    wanted = [g for g in set(guids) if g not in KEYWORDS]
    out: dict[str, int] = {}
    for i in range(0, len(wanted), 500):
        chunk = wanted[i : i + 500]
        out.update(
            Port.objects.filter(node__fabric=fabric, port_guid__in=chunk).values_list("port_guid", "pk")
        )
    return out


def node_guids_among(fabric: Fabric, guids: Iterable[str]) -> dict[str, tuple[str, list[str]]]:
    """The GUIDs of ``guids`` that are no port GUID of ``fabric`` but a node's GUID: ``{guid:
    (node name, [its port GUIDs])}``. A switch's node GUID is its port 0's GUID (a port, not
    here); a CA's node GUID is not a port's (IBTA Vol 1 14.2.5.3 NodeInfo: NodeGUID and
    PortGUID are distinct EUI-64s for a channel adapter). Keywords are skipped."""
    wanted = [g for g in set(guids) if g not in KEYWORDS]
    ports = set(ports_by_guid(fabric, wanted))
    rest = [g for g in wanted if g not in ports]
    out: dict[str, tuple[str, list[str]]] = {}
    for i in range(0, len(rest), 500):
        for node in Node.objects.filter(fabric=fabric, node_guid__in=rest[i : i + 500]).order_by("node_guid"):
            port_guids = sorted(
                Port.objects.filter(node=node).exclude(port_guid="").values_list("port_guid", flat=True)
            )
            out[node.node_guid] = (str(node), port_guids)
    return out


def refuse_node_guids(fabric: Fabric, guids: Iterable[str]) -> None:
    """Refuse members that are a node's GUID, not a port's: OpenSM takes only port GUIDs as
    partition members (``man opensm``, "PARTITION CONFIGURATION": ``PortGUID``) and would put no
    port in the partition. UFM documents ``guids`` as "List of port GUIDs" (UFM Enterprise REST
    API, "PKey GUIDs REST API") and translates nothing, so neither does Weft: the error names the
    node and the port GUIDs it has, for the caller to choose.

    Raises:
        PartitionError: (``field`` "members") the first node GUID among ``guids``.
    """
    hits = node_guids_among(fabric, guids)
    if hits:
        guid = sorted(hits)[0]
        name, ports = hits[guid]
        more = f" (and {len(hits) - 1} other node GUID(s))" if len(hits) > 1 else ""
        raise PartitionError(
            f"member {guid} is the node GUID of {name}, not a port GUID{more}: a partition takes port "
            f"GUIDs; its port GUID(s): {', '.join(ports) or 'none known'}",
            field="members",
        )


def check_member(guid: str, membership: str) -> tuple[str, str]:
    """``(canonical GUID or keyword, membership)`` of a member as given.

    Raises:
        PartitionError: the GUID is malformed or 0, or the membership is not full/limited/both.
    """
    g = str(guid).strip()
    if g not in KEYWORDS:
        try:
            g = normalize_guid(g)
        except ValueError as exc:
            raise PartitionError(f"member {guid!r}: {exc}") from None
        if g == "0x0000000000000000":
            raise PartitionError("member 0x0: a port GUID is never 0")
    if membership not in Membership.values:
        raise PartitionError(f"member {guid}: membership {membership!r} is not one of {Membership.values}")
    return g, membership


def notify_changed(fabric: Fabric, events: list[str], applied: bool = False) -> None:
    """Send ``fabric.signals.partitions_changed`` for ``fabric`` when the transaction commits
    (``events``: the codes written; ``applied``: an apply wrote them)."""
    fabric_id = fabric.pk
    transaction.on_commit(
        lambda: partitions_changed.send(Partition, fabric_id=fabric_id, events=events, applied=applied)
    )


def mark_pending(partition: Partition) -> None:
    """Mark ``partition`` as changed since its last apply (``applied_state`` pending, no drift); the
    caller saves it."""
    partition.applied_state = ApplyState.PENDING
    partition.drift = []


def partition_tenants(parts) -> dict[int, int | None]:
    """``{partition pk: tenant id or None}`` of ``parts`` (a tenant's pool's or a job's partition
    is that tenant's: ``accounts.scoping.row_tenants``, registered by pools)."""
    return row_tenants("fabric.Partition", [p.pk for p in parts])


def named_in(parts, rows: list[dict]) -> list:
    """The partitions of ``parts`` that rows of a verification (``{"partition": name, "pkey"…}``)
    name."""
    names = {r.get("partition") for r in rows}
    return [p for p in parts if p.name in names]


def fabric_event(fabric: Fabric, code: str, message: str, details: dict, parts=()) -> EventSpec:
    """A fabric-wide partitions event whose message and details name ``parts``: its ``tenant_id``
    is theirs (``accounts.scoping.tenant_of_rows``: fabric-wide, one tenant's, or staff only when
    several tenants' partitions meet in it; issue 22: tenant users read other tenants' partition
    names in these events)."""
    tenant_id = tenant_of_rows(partition_tenants(parts).values())
    return EventSpec(code=code, message=message, object_type="fabric", object_key=fabric.name,
                     object_repr=fabric.name, details=details, tenant_id=tenant_id)  # fmt: skip
