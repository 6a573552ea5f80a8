"""The changes UFM's clients ask for, made through Weft's own writers.

* PKeys: every change goes through ``fabric.services.partitions`` (``save_partition``,
  ``delete_partition``, ``add_members``, ``remove_members``): audited there, in one transaction,
  and applied by OpenSM after commit (``queue_apply``: the fabric's partitions file is written,
  OpenSM re-reads it, ``smpquery pkeys`` verifies). Members added through this API have reason
  ``extra``: a pool's sync, which replaces only its ``pool`` members, leaves them; removing
  members here leaves a pool's (it would put them back).
* Host lists (the UFM Slurm plugin): expanded with ``scheduler.hostlist.expand`` (Slurm's rules),
  each name found as a ``fabric.Host`` (its name comes through the node-name map) or a CA
  ``Node.name``, and turned into the port GUIDs of its CAs.
* Port isolation: ``ufm.isolation``.

Errors: :class:`UfmUnavailable` (503: no fabric to serve, no topology yet), :class:`UfmNotFound`
(404), :class:`UfmRefused` (409: a change Weft will not make), ``ufm.inputs.UfmInputError``
(400, names the field).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from fabric.choices import MemberReason, NodeType, PartitionSource
from fabric.models import Fabric, Host, Node, Partition, Port
from fabric.services import partitions as partition_service
from fabric.services.partitions import PartitionError
from scheduler.hostlist import HostlistError, expand

from .inputs import (
    FULL,
    AddGuids,
    AddHosts,
    EmptyPKey,
    QosUpdate,
    RemoveGuids,
    UfmInputError,
    pkey_text,
    ufm_guid,
)

log = logging.getLogger(__name__)


class UfmUnavailable(Exception):
    """The API cannot answer now (no fabric configured, none discovered yet, the database is
    down): a 503, never an empty answer a client would act on."""


class UfmNotFound(Exception):
    """The object the request names does not exist (404)."""


class UfmRefused(Exception):
    """A change Weft will not make (409): the default partition, a pool's partition."""


# -- the fabric served ---------------------------------------------------------------------------


def served_fabric() -> Fabric:
    """The fabric the UFM API serves: ``WEFT_UFM_FABRIC`` by name, else the only fabric.

    Raises:
        UfmUnavailable: the setting names no fabric, there is none, or there are several and
            the setting is empty.
    """
    name = settings.WEFT_UFM_FABRIC
    if name:
        fabric = Fabric.objects.filter(name=name).first()
        if fabric is None:
            raise UfmUnavailable(f"WEFT_UFM_FABRIC names fabric {name!r}, which does not exist")
        return fabric
    fabrics = list(Fabric.objects.order_by("pk")[:2])
    if not fabrics:
        raise UfmUnavailable("no fabric yet: register or import one")
    if len(fabrics) > 1:
        raise UfmUnavailable("Weft has several fabrics: set WEFT_UFM_FABRIC to the one this API serves")
    return fabrics[0]


def require_topology(fabric: Fabric) -> None:
    """Refuse to describe a fabric Weft knows nothing about yet (no discovery or import stored
    a node): an answer then would be empty, and Volcano deletes every HyperNode it made when
    it gets no port.

    Raises:
        UfmUnavailable: no node stored for ``fabric``.
    """
    if not Node.objects.filter(fabric=fabric).exists():
        raise UfmUnavailable(f"fabric {fabric.name} has not been discovered yet")


# -- PKeys ---------------------------------------------------------------------------------------


def _apply_soon(fabric: Fabric) -> bool:
    """Have OpenSM apply the fabric's partitions after the caller's transaction commits
    (``fabric.services.partitions.queue_apply``: coalesced, verified). False when the fabric has
    no partitions file configured (the change then waits, ``pending``, for an Admin's apply)."""
    return partition_service.queue_apply(fabric.pk)


def _create(fabric: Fabric, pkey: int, *, name: str | None, index0: bool | None, ip_over_ib: bool | None,
            qos=None, user=None) -> Partition:  # fmt: skip
    """A new partition ``pkey`` (UFM's defaults: IPoIB on, index0 off, named ``api_pkey_0x<pkey>``)
    through the partitions service; the caller holds the fabric row lock."""
    part = Partition(
        fabric=fabric,
        pkey=pkey,
        name=name or f"api_pkey_{pkey_text(pkey)}",
        ipoib=True if ip_over_ib is None else ip_over_ib,
        indx0=bool(index0),
        source=PartitionSource.WEFT,
        description="made through the UFM-compatible API",
    )
    if qos is not None:
        part.mtu, part.sl, part.rate = qos.mtu, qos.sl, qos.rate
    try:
        return partition_service.save_partition(part, user=user, action="partition.create")
    except PartitionError as exc:
        raise UfmInputError("pkey", str(exc)) from None


def _partition_for_update(fabric: Fabric, pkey: int) -> Partition | None:
    """The partition ``pkey`` of ``fabric``, with the fabric row locked first so that two
    requests creating one PKey at once make one partition (the caller is in a transaction)."""
    Fabric.objects.select_for_update().filter(pk=fabric.pk).first()
    return Partition.objects.filter(fabric=fabric, pkey=pkey).first()


def _set_flags(part: Partition, *, index0: bool | None, ip_over_ib: bool | None, user=None) -> bool:
    """Change the partition's ``indx0``/``ipoib`` to what the request sent (None: not sent);
    True when one changed (saved through the partitions service, audited)."""
    changed = False
    if index0 is not None and part.indx0 != index0:
        part.indx0, changed = index0, True
    if ip_over_ib is not None and part.ipoib != ip_over_ib:
        part.ipoib, changed = ip_over_ib, True
    if changed:
        partition_service.save_partition(part, user=user)
    return changed


def add_guids(fabric: Fabric, req: AddGuids, *, user=None) -> dict:
    """Add ``req.members`` to PKey ``req.pkey`` (created when missing, with UFM's defaults), and
    set its ``index0``/``ip_over_ib`` when sent; one transaction; applied after commit.

    ``index0`` is a partition flag in OpenSM (``indx0``: the PKey goes to index 0 of every
    member's table), so a request that sends it sets it for the partition.

    Returns ``{"pkey", "created", "added", "changed", "kept", "applying"}``.

    Raises:
        UfmInputError: a member the partitions service refuses.
    """
    with transaction.atomic():
        part = _partition_for_update(fabric, req.pkey)
        created = part is None
        if created:
            part = _create(
                fabric, req.pkey, name=None, index0=req.index0, ip_over_ib=req.ip_over_ib, user=user
            )
        else:
            _set_flags(part, index0=req.index0, ip_over_ib=req.ip_over_ib, user=user)
        try:
            change = partition_service.add_members(part, req.members, reason=MemberReason.EXTRA, user=user)
        except PartitionError as exc:
            raise UfmInputError("guids", str(exc)) from None
        applying = _apply_soon(fabric)
    return {"pkey": pkey_text(req.pkey), "created": created, **change.as_dict(), "applying": applying}


def remove_guids(fabric: Fabric, req: RemoveGuids, *, user=None) -> dict:
    """Remove ``req.guids`` from PKey ``req.pkey`` (members added through this API, by an Admin
    or imported; a pool's members stay: its sync would put them back). GUIDs that are no
    members are nothing to do.

    Returns ``{"pkey", "removed", "kept", "applying"}`` (``kept``: held by a pool).

    Raises:
        UfmNotFound: no such PKey.
    """
    with transaction.atomic():
        part = _partition_for_update(fabric, req.pkey)
        if part is None:
            raise UfmNotFound(f"pkey {pkey_text(req.pkey)} does not exist")
        change = partition_service.remove_members(part, req.guids, user=user)
        applying = _apply_soon(fabric) if change.removed else False
    return {
        "pkey": pkey_text(req.pkey),
        "removed": len(change.removed),
        "kept": [ufm_guid(g) for g in change.kept],
        "applying": applying,
    }


def add_empty(fabric: Fabric, req: EmptyPKey, *, user=None) -> dict:
    """Create PKey ``req.pkey`` without members (``POST /resources/pkeys/add``).

    Raises:
        UfmInputError: the PKey exists already (UFM answers 400 too), or a bad name.
    """
    with transaction.atomic():
        if _partition_for_update(fabric, req.pkey) is not None:
            raise UfmInputError("pkey", f"{pkey_text(req.pkey)} already exists")
        _create(fabric, req.pkey, name=req.name, index0=req.index0, ip_over_ib=req.ip_over_ib, qos=req.qos,
                user=user)  # fmt: skip
        applying = _apply_soon(fabric)
    return {"pkey": pkey_text(req.pkey), "created": True, "applying": applying}


def update_qos(fabric: Fabric, req: QosUpdate, *, user=None) -> dict:
    """Set the QoS of PKey ``req.pkey`` (the values sent; the others stay).

    Raises:
        UfmNotFound: no such PKey.
    """
    with transaction.atomic():
        part = _partition_for_update(fabric, req.pkey)
        if part is None:
            raise UfmNotFound(f"pkey {pkey_text(req.pkey)} does not exist")
        changed = False
        for attr, value in (("mtu", req.qos.mtu), ("sl", req.qos.sl), ("rate", req.qos.rate)):
            if value is not None and getattr(part, attr) != value:
                setattr(part, attr, value)
                changed = True
        applying = False
        if changed:
            partition_service.save_partition(part, user=user)
            applying = _apply_soon(fabric)
    return {"pkey": pkey_text(req.pkey), "changed": changed, "applying": applying}


def delete_pkey(fabric: Fabric, pkey: int, *, user=None) -> dict:
    """Delete PKey ``pkey`` and its members.

    Raises:
        UfmNotFound: no such PKey.
        UfmRefused: the default partition, or one another part of Weft owns (a pool's PKey:
            change the pool instead).
    """
    with transaction.atomic():
        part = _partition_for_update(fabric, pkey)
        if part is None:
            raise UfmNotFound(f"pkey {pkey_text(pkey)} does not exist")
        try:
            partition_service.delete_partition(part, user=user)
        except PartitionError as exc:  # the default partition, or one a pool or job owns
            raise UfmRefused(str(exc)) from None
        applying = _apply_soon(fabric)
    return {"pkey": pkey_text(pkey), "deleted": True, "applying": applying}


# -- host lists (UFM Slurm plugin) ----------------------------------------------------------------


def host_guids(fabric: Fabric, hostlist: str, field: str = "hosts_names") -> tuple[list[str], list[str]]:
    """The CA port GUIDs of the hosts a Slurm host list names, and the names no host of
    ``fabric`` has. A name is a ``Host`` of the fabric (its CAs' ports) or the name of a CA node
    (its ports), both as the node-name map makes them.

    Raises:
        UfmInputError: a host list Slurm's parser would refuse, or one naming no known host.
    """
    try:
        names = list(dict.fromkeys(expand(hostlist)))
    except HostlistError as exc:
        raise UfmInputError(field, str(exc)) from None
    if not names:
        raise UfmInputError(field, "names no host")
    hosts = dict(Host.objects.filter(fabric=fabric, name__in=names).values_list("name", "pk"))
    by_node = set(
        Node.objects.filter(fabric=fabric, node_type=NodeType.CA, name__in=names).values_list(
            "name", flat=True
        )
    )
    unknown = [n for n in names if n not in hosts and n not in by_node]
    if len(unknown) == len(names):
        shown = ", ".join(unknown[:10]) + (" ..." if len(unknown) > 10 else "")
        raise UfmInputError(field, f"no host of fabric {fabric.name} is named {shown}")
    ports = Port.objects.filter(node__fabric=fabric, node__node_type=NodeType.CA).exclude(port_guid="")
    guids = sorted(
        set(ports.filter(node__host_id__in=hosts.values()).values_list("port_guid", flat=True))
        | set(ports.filter(node__name__in=by_node).values_list("port_guid", flat=True))
    )
    return guids, unknown


def add_hosts(fabric: Fabric, req: AddHosts, *, user=None) -> dict:
    """Add every CA port of the hosts ``req.hosts`` names to PKey ``req.pkey`` (full
    membership; created when missing), as :func:`add_guids`. Names no host has are reported in
    ``unknown_hosts`` and logged (a job's non-IB nodes); a list naming no known host is refused."""
    guids, unknown = host_guids(fabric, req.hosts)
    if unknown:
        log.warning(
            "UFM API: hosts %s are not on fabric %s (pkey %s)", unknown, fabric.name, pkey_text(req.pkey)
        )
    out = add_guids(
        fabric,
        AddGuids(
            pkey=req.pkey, members=[(g, FULL) for g in guids], index0=req.index0, ip_over_ib=req.ip_over_ib
        ),
        user=user,
    )
    return {**out, "guids": len(guids), "unknown_hosts": unknown}


def remove_hosts(fabric: Fabric, pkey: int, hostlist: str, *, user=None) -> dict:
    """Remove every CA port of the hosts ``hostlist`` names from PKey ``pkey``, as
    :func:`remove_guids` (unknown names reported, as :func:`add_hosts`)."""
    guids, unknown = host_guids(fabric, hostlist, field="hosts")
    out = remove_guids(fabric, RemoveGuids(pkey=pkey, guids=guids), user=user)
    return {**out, "guids": len(guids), "unknown_hosts": unknown}
