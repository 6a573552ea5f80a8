"""Model edits: create, change, delete partitions and their members (one audited transaction
each; the partition becomes ``pending``)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction

from accounts import audit

from ...choices import MemberReason, Membership
from ...models import Partition, PartitionMember
from ...parsers.partitions import (
    DEFAULT_PKEY,
    MAX_PKEY,
    MIN_PKEY,
    default_partition,
)
from .common import (
    OWNER_NAME_RE,
    PartitionError,
    check_member,
    mark_pending,
    notify_changed,
    ports_by_guid,
    refuse_if_owned,
    refuse_node_guids,
)

log = logging.getLogger(__name__)


# -- use cases: partitions and members ------------------------------------------------------------


def _check_name(partition: Partition, as_owner: bool) -> None:
    """Refuse a name another partition of the fabric has, or an owner's name given by another.

    Raises:
        PartitionError: (``field`` "name").
    """
    if not as_owner and OWNER_NAME_RE.match(partition.name or ""):
        raise PartitionError(
            f"name {partition.name!r}: pool_<n> and job_<n> are the names of the partitions Weft makes "
            "for pools and jobs; choose another",
            field="name",
        )
    default = default_partition()
    if partition.name == default.name and partition.pkey != DEFAULT_PKEY:
        raise PartitionError(
            f"name {default.name!r} is the default partition's (PKey 0x{DEFAULT_PKEY:04x}), which Weft "
            f"writes when none is stored: a second {default.name!r} would make a file Weft cannot "
            "import back; choose another",
            field="name",
        )
    same = Partition.objects.filter(fabric=partition.fabric_id, name=partition.name)
    if partition.pk:
        same = same.exclude(pk=partition.pk)
    other = same.first()
    if other is not None:
        raise PartitionError(
            f"name {partition.name!r} is already used on fabric {partition.fabric} by PKey {other.pkey_hex}",
            field="name",
        )


def save_partition(partition: Partition, *, user=None, action: str = "", as_owner: bool = False) -> Partition:
    """Create or update ``partition`` (a validated, unsaved or changed instance) in one audited
    transaction; its applied state becomes pending (the file must be applied again).

    ``as_owner``: the caller is the app owning the partition (:func:`partition_owner`; the pools
    app for pool and job partitions). Others may change an owned partition's flags and
    description, not its PKey, name or fabric.

    Raises:
        PartitionOwned: an owned partition's PKey, name or fabric changed by someone else.
        PartitionError: PKey outside 0x0001-0x7ffe (0x7fff only for the default partition) or
            already used by another partition of the fabric (``field`` "pkey"); the name already
            used by another partition of the fabric, or a ``pool_<n>``/``job_<n>`` name
            (:data:`OWNER_NAME_RE`) given by someone else than the owner (``field`` "name"); also
            when another transaction stored that PKey or name meanwhile (the database's unique
            constraints refused the write, in a savepoint: the caller's transaction stays usable).
    """
    if not MIN_PKEY <= partition.pkey <= DEFAULT_PKEY or (
        partition.pkey == DEFAULT_PKEY and not partition.is_default
    ):
        raise PartitionError(
            f"PKey 0x{partition.pkey:04x} is outside 0x{MIN_PKEY:04x}-0x{MAX_PKEY:04x} "
            "(0x7fff is the default partition's)"
        )
    try:
        with transaction.atomic():
            clash = Partition.objects.select_for_update().filter(
                fabric=partition.fabric_id, pkey=partition.pkey
            )
            if partition.pk:
                clash = clash.exclude(pk=partition.pk)
            if clash.exists():
                raise PartitionError(
                    f"PKey 0x{partition.pkey:04x} is already used on fabric {partition.fabric}"
                )
            created = partition.pk is None
            old = None if created else Partition.objects.select_for_update().get(pk=partition.pk)
            if created or old.name != partition.name:
                _check_name(partition, as_owner)
            if old is not None and (old.pkey, old.name, old.fabric_id) != (
                partition.pkey,
                partition.name,
                partition.fabric_id,
            ):
                refuse_if_owned(old, "its PKey and name change", as_owner)
            mark_pending(partition)
            partition.save()
            fields = ["name", "pkey", "description", "ipoib", "mtu", "rate", "sl", "scope"]
            changes = (
                {f: getattr(partition, f) for f in fields}
                if created
                else audit.model_changes(old, partition, fields)
            )
            audit.record(
                action or ("partition.create" if created else "partition.update"),
                partition,
                changes,
                user=user,
            )
            notify_changed(partition.fabric, [])
    except IntegrityError as exc:
        # another transaction stored the PKey or the name between the checks above and this write
        # (the database's unique (fabric, pkey) and (fabric, name) refused it): the checks' answer
        taken = _taken_meanwhile(partition)
        if taken is None:
            raise
        raise taken from exc
    return partition


def _taken_meanwhile(partition: Partition) -> PartitionError | None:
    """The :class:`PartitionError` :func:`save_partition`'s checks give when another partition of
    the fabric has ``partition``'s name (``field`` "name") or PKey (``field`` "pkey"); None when
    none has either (read after the failed write: what the other transaction committed)."""
    others = Partition.objects.filter(fabric=partition.fabric_id)
    if partition.pk:
        others = others.exclude(pk=partition.pk)
    holder = others.filter(name=partition.name).first()
    if holder is not None:
        return PartitionError(
            f"name {partition.name!r} is already used on fabric {partition.fabric} by PKey {holder.pkey_hex}",
            field="name",
        )
    if others.filter(pkey=partition.pkey).exists():
        return PartitionError(f"PKey 0x{partition.pkey:04x} is already used on fabric {partition.fabric}")
    return None


def delete_partition(partition: Partition, *, user=None, as_owner: bool = False) -> None:
    """Delete ``partition`` and its members (audited). Apply to take it off the ports.

    Raises:
        PartitionError: the default partition (OpenSM always has one).
        PartitionOwned: a partition another app owns (:func:`partition_owner`) and the caller,
            not ``as_owner``, is not that app (a pool's PKey is taken away through the pool).
    """
    if partition.is_default:
        raise PartitionError("the default partition (0x7fff) cannot be deleted")
    with transaction.atomic():
        refuse_if_owned(partition, "it is taken away", as_owner)
        audit.record(
            "partition.delete",
            partition,
            {"pkey": partition.pkey_hex, "members": partition.members.count()},
            user=user,
        )
        fabric = partition.fabric
        partition.delete()
        notify_changed(fabric, [])


@dataclass
class MemberChange:
    """What :func:`set_members` changed: GUIDs added, removed, whose membership changed, and those
    kept because another reason holds them."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {k: len(v) for k, v in self.__dict__.items()}


def _wanted_members(members: Iterable[tuple[str, str] | str | dict]) -> dict[str, str]:
    """``{canonical GUID or keyword: membership}`` of the members :func:`set_members` takes (the
    last one given wins for a GUID given twice).

    Raises:
        PartitionError: a member that is not a GUID or keyword, or a bad membership.
    """
    wanted: dict[str, str] = {}
    for item in members:
        if isinstance(item, str):
            guid, membership = item, Membership.FULL
        elif isinstance(item, dict):
            guid = item.get("guid") or item.get("port_guid") or ""
            membership = item.get("membership", Membership.FULL)
        else:
            guid, membership = item
        g, m = check_member(guid, membership)
        wanted[g] = m
    return wanted


def set_members(
    partition: Partition,
    members: Iterable[tuple[str, str] | str | dict],
    *,
    reason: str | None = None,
    user=None,
    as_owner: bool = False,
) -> MemberChange:
    """Make ``members`` the member set of ``partition`` (replace semantics), in one audited
    transaction with the partition row locked; its applied state becomes pending.

    ``members``: port GUIDs (full membership), ``(guid, membership)`` pairs or
    ``{"guid"|"port_guid", "membership"}`` dicts; keywords (``ALL``, ``SELF``...) allowed.
    ``reason`` (``extra``, ``pool``, ``imported``): replace only the members of that reason and
    record the new ones with it; members of other reasons stay (a GUID they hold is ``kept``).
    None replaces the whole set (new rows get ``extra``). Each member gets its fabric ``Port``
    when the topology knows the GUID. On a partition another app owns (:func:`partition_owner`)
    only that app (``as_owner``) replaces the ``pool`` members or the whole set; others may
    replace the ``extra`` and ``imported`` ones.

    Raises:
        PartitionOwned: the ``pool`` members or the whole set of an owned partition, not as owner.
        PartitionError: a member that is not a GUID or keyword, a bad membership, or a node GUID
            of the fabric instead of a port GUID (``field`` "members", naming the node's port
            GUIDs: :func:`~.common.refuse_node_guids`). A GUID the fabric does not know (an SR-IOV
            virtual function's) is taken; its state is reported as not verifiable.
    """
    wanted = _wanted_members(members)
    if reason is not None and reason not in MemberReason.values:
        raise PartitionError(f"reason {reason!r} is not one of {MemberReason.values}")
    change = MemberChange()
    with transaction.atomic():
        locked = Partition.objects.select_for_update().get(pk=partition.pk)
        refuse_node_guids(locked.fabric, wanted)
        if reason in (None, MemberReason.POOL):
            refuse_if_owned(locked, f"its {'pool ' if reason else ''}members change", as_owner)
        rows = {m.port_guid: m for m in locked.members.all()}
        mine = {g: m for g, m in rows.items() if reason is None or m.reason == reason}
        others = {g: m for g, m in rows.items() if g not in mine}
        ports = ports_by_guid(locked.fabric, wanted)
        gone = [m.pk for g, m in mine.items() if g not in wanted]
        change.removed = sorted(g for g in mine if g not in wanted)
        new_rows, updated = [], []
        for g, m in wanted.items():
            if g in others:
                change.kept.append(g)
            elif g in mine:
                row = mine[g]
                if row.membership != m:
                    row.membership = m
                    updated.append(row)
                    change.changed.append(g)
            else:
                new_rows.append(
                    PartitionMember(
                        partition=locked,
                        port_guid=g,
                        membership=m,
                        reason=reason or MemberReason.EXTRA,
                        port_id=ports.get(g),
                    )  # fmt: skip
                )
                change.added.append(g)
        for i in range(0, len(gone), 500):
            PartitionMember.objects.filter(pk__in=gone[i : i + 500]).delete()
        PartitionMember.objects.bulk_update(updated, ["membership"], batch_size=500)
        PartitionMember.objects.bulk_create(new_rows, batch_size=500)
        if change.added or change.removed or change.changed:
            mark_pending(locked)
            locked.save(update_fields=["applied_state", "drift", "updated"])
        partition.applied_state, partition.drift = locked.applied_state, locked.drift
        audit.record(
            "partition.set_members",
            locked,
            {"reason": reason or "all", **change.as_dict(), "sample_added": change.added[:20],
             "sample_removed": change.removed[:20]},
            user=user,
        )  # fmt: skip
        notify_changed(locked.fabric, [])
    return change


def add_members(
    partition: Partition,
    members: Iterable[tuple[str, str] | str | dict],
    *,
    reason: str = MemberReason.EXTRA,
    user=None,
) -> MemberChange:
    """Add ``members`` to ``partition`` and leave its other members as they are, in one audited
    transaction with the partition row locked; its applied state becomes pending when anything
    changed.

    ``members`` as for :func:`set_members`. A GUID that is already a member takes the membership
    given and ``reason`` (an explicit add claims the row: a pool sync, which replaces only the
    ``pool`` members, then no longer removes it when the pool lets the host go). Returns what
    changed: ``added`` (new rows), ``changed`` (membership or reason changed), ``kept`` (already
    a member as asked).

    Raises:
        PartitionOwned: ``reason`` ``pool`` on a partition another app owns.
        PartitionError: a member that is not a GUID or keyword, a bad membership, a node GUID
            instead of a port GUID (as :func:`set_members`), or an unknown ``reason``.
    """
    wanted = _wanted_members(members)
    if reason not in MemberReason.values:
        raise PartitionError(f"reason {reason!r} is not one of {MemberReason.values}")
    change = MemberChange()
    with transaction.atomic():
        locked = Partition.objects.select_for_update().get(pk=partition.pk)
        refuse_node_guids(locked.fabric, wanted)
        if reason == MemberReason.POOL:
            refuse_if_owned(locked, "its pool members change", False)
        rows = {m.port_guid: m for m in locked.members.filter(port_guid__in=list(wanted))}
        ports = ports_by_guid(locked.fabric, [g for g in wanted if g not in rows])
        new_rows, updated = [], []
        for g, m in wanted.items():
            row = rows.get(g)
            if row is None:
                new_rows.append(
                    PartitionMember(partition=locked, port_guid=g, membership=m, reason=reason,
                                    port_id=ports.get(g))
                )  # fmt: skip
                change.added.append(g)
            elif (row.membership, row.reason) != (m, reason):
                row.membership, row.reason = m, reason
                updated.append(row)
                change.changed.append(g)
            else:
                change.kept.append(g)
        PartitionMember.objects.bulk_update(updated, ["membership", "reason"], batch_size=500)
        PartitionMember.objects.bulk_create(new_rows, batch_size=500)
        _finish_member_change(locked, partition, change, "partition.add_members", reason, user)
    return change


def remove_members(
    partition: Partition,
    guids: Iterable[str],
    *,
    reasons: Iterable[str] = (MemberReason.EXTRA, MemberReason.IMPORTED),
    user=None,
) -> MemberChange:
    """Remove the members ``guids`` (port GUIDs or keywords) of ``partition`` that are there for
    one of ``reasons``, in one audited transaction with the partition row locked; its applied
    state becomes pending when one was removed.

    The default leaves the ``pool`` members: the pools app computes those from the hosts a pool
    holds and would put them back at its next sync (they are ``kept``). A GUID that is no member
    is not an error (nothing to remove) and is in no list of the result.

    Raises:
        PartitionOwned: ``reasons`` has ``pool`` on a partition another app owns.
        PartitionError: a GUID that is not a GUID or keyword, or an unknown reason.
    """
    wanted = _wanted_members(guids)
    reasons = list(reasons)
    bad = [r for r in reasons if r not in MemberReason.values]
    if bad:
        raise PartitionError(f"reason {bad[0]!r} is not one of {MemberReason.values}")
    change = MemberChange()
    with transaction.atomic():
        locked = Partition.objects.select_for_update().get(pk=partition.pk)
        if MemberReason.POOL in reasons:
            refuse_if_owned(locked, "its pool members change", False)
        gone = []
        for row in locked.members.filter(port_guid__in=list(wanted)):
            if row.reason in reasons:
                gone.append(row.pk)
                change.removed.append(row.port_guid)
            else:
                change.kept.append(row.port_guid)
        for i in range(0, len(gone), 500):
            PartitionMember.objects.filter(pk__in=gone[i : i + 500]).delete()
        change.removed.sort()
        change.kept.sort()
        _finish_member_change(locked, partition, change, "partition.remove_members", ",".join(reasons), user)
    return change


def _finish_member_change(
    locked: Partition, partition: Partition, change: MemberChange, action: str, reason: str, user
) -> None:
    """Inside the caller's transaction: mark ``locked`` pending when members changed (copied to the
    caller's ``partition``), audit ``action`` and notify on commit."""
    if change.added or change.removed or change.changed:
        mark_pending(locked)
        locked.save(update_fields=["applied_state", "drift", "updated"])
    partition.applied_state, partition.drift = locked.applied_state, locked.drift
    audit.record(
        action,
        locked,
        {"reason": reason, **change.as_dict(), "sample_added": change.added[:20],
         "sample_removed": change.removed[:20]},
        user=user,
    )  # fmt: skip
    notify_changed(locked.fabric, [])
