"""Partitions (PKeys) of a fabric and their application by OpenSM: the one writer of
``Partition``/``PartitionMember`` rows, their ``applied_*`` state and the ``partition.*`` events.

* :func:`import_partitions`: a ``partitions.conf`` (``fabric.parsers.partitions``) into the
  fabric's partitions, ``merge`` (default: the file's partitions are created or replaced whole,
  matched by PKey; partitions not in the file stay) or ``replace`` (partitions not in the file
  are deleted too). A pool's or a job's partition is never changed or deleted by an import.
  One transaction, audited; a bad or refused file changes nothing.
* :func:`save_partition`, :func:`delete_partition`, :func:`set_members` (replace semantics,
  optionally only the members of one ``reason``: the pools app calls
  ``set_members(partition, guids_of_its_hosts, reason="pool")`` and keeps the ``extra`` ones),
  :func:`add_members` and :func:`remove_members` (add or take away some members, the others
  untouched: the UFM-compatible API, whose clients add and remove GUIDs one job at a time).
* :func:`generate_conf`: the fabric's ``partitions.conf`` text (default partition kept, long
  member lists wrapped below OpenSM's 4,094-character line limit).
* :func:`apply`: write that file atomically to the fabric's path, make OpenSM re-read it (SIGHUP
  to the pid in its pid file, or the fabric's reload command run with a timeout in its own
  process group), then verify with ``smpquery pkeys`` on a sample of members and non-members of
  each partition, within a bounded wait, and record applied/drift/failed with events.

* :func:`queue_apply` / :func:`apply_pending` (task ``fabric.tasks.apply_partitions_task``):
  apply on a worker after a change, coalesced: one apply per fabric at a time (lock
  ``fabric.partitions_apply.<id>``), and the holder applies again until what it last wrote is
  what is stored, so a burst of changes (200 allocations of a pool with a PKey) ends in a few
  applies, none lost. The pools app queues one after each change of a pool's members.

After commit ``fabric.signals.partitions_changed`` is sent (the events app applies the events).
Semantics of the file: ``man opensm`` "PARTITION CONFIGURATION".
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts import audit
from core import enqueue, procs
from core.locks import single_instance
from events.services import EventSpec, record_events

from ..choices import ApplyState, MemberReason, Membership, NodeType, PartitionSource
from ..collectors.pkeys import read_pkeys
from ..collectors.tools import ToolAborted, ToolError, fabric_env, run_process
from ..guid import normalize_guid
from ..models import Fabric, Partition, PartitionMember, Port
from ..parsers.partitions import (
    DEFAULT_PKEY,
    KEYWORDS,
    MAX_PKEY,
    MIN_PKEY,
    McastGroupRecord,
    MemberRecord,
    PartitionRecord,
    PartitionsConf,
    PartitionsParseError,
    generate,
    parse_partitions,
)
from ..signals import partitions_changed

log = logging.getLogger(__name__)

MERGE, REPLACE = "merge", "replace"


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


def _refuse_if_owned(partition: Partition, what: str, as_owner: bool) -> None:
    """Raise :class:`PartitionOwned` when ``partition`` has an owner and the caller is not it."""
    if as_owner:
        return
    owned = partition_owner(partition)
    if owned is not None:
        raise PartitionOwned(partition, owned[0], owned[1], what)


class ApplyError(RuntimeError):
    """The partitions could not be applied (no path or signal configured, the file could not be
    written, OpenSM could not be signalled); recorded as ``partition.apply_failed``."""


# -- records <-> rows -----------------------------------------------------------------------------


def to_record(partition: Partition, members: Iterable[PartitionMember] | None = None) -> PartitionRecord:
    """The parser/generator record of ``partition`` (members from ``members`` or the database)."""
    rows = list(partition.members.all()) if members is None else list(members)
    return PartitionRecord(
        name=partition.name,
        pkey=partition.pkey,
        ipoib=partition.ipoib,
        indx0=partition.indx0,
        mtu=partition.mtu,
        rate=partition.rate,
        sl=partition.sl,
        scope=list(partition.scope or []),
        q_key=partition.q_key,
        tclass=partition.tclass,
        flow_label=partition.flow_label,
        members=[MemberRecord(m.port_guid, m.membership) for m in rows],
        mcast_groups=[McastGroupRecord(g["mgid"], g.get("flags", "")) for g in partition.mcast_groups or []],
    )


def _fields_of(rec: PartitionRecord) -> dict:
    return {
        "name": rec.name or f"pkey_0x{rec.pkey:04x}",
        "ipoib": rec.ipoib,
        "indx0": rec.indx0,
        "mtu": rec.mtu,
        "rate": rec.rate,
        "sl": rec.sl,
        "scope": list(rec.scope),
        "q_key": rec.q_key,
        "tclass": rec.tclass,
        "flow_label": rec.flow_label,
        "mcast_groups": [{"mgid": g.mgid, "flags": g.flags} for g in rec.mcast_groups],
        "is_default": rec.pkey == DEFAULT_PKEY,
    }


def _ports_by_guid(fabric: Fabric, guids: Iterable[str]) -> dict[str, int]:
    wanted = [g for g in set(guids) if g not in KEYWORDS]
    out: dict[str, int] = {}
    for i in range(0, len(wanted), 500):
        chunk = wanted[i : i + 500]
        out.update(
            Port.objects.filter(node__fabric=fabric, port_guid__in=chunk).values_list("port_guid", "pk")
        )
    return out


def _check_member(guid: str, membership: str) -> tuple[str, str]:
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


def _notify(fabric: Fabric, events: list[str], applied: bool = False) -> None:
    fabric_id = fabric.pk
    transaction.on_commit(
        lambda: partitions_changed.send(Partition, fabric_id=fabric_id, events=events, applied=applied)
    )


def _mark_pending(partition: Partition) -> None:
    partition.applied_state = ApplyState.PENDING
    partition.drift = []


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
                _refuse_if_owned(old, "its PKey and name change", as_owner)
            _mark_pending(partition)
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
            _notify(partition.fabric, [])
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
        _refuse_if_owned(partition, "it is taken away", as_owner)
        audit.record(
            "partition.delete",
            partition,
            {"pkey": partition.pkey_hex, "members": partition.members.count()},
            user=user,
        )
        fabric = partition.fabric
        partition.delete()
        _notify(fabric, [])


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
        g, m = _check_member(guid, membership)
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
        PartitionError: a member that is not a GUID or keyword, or a bad membership.
    """
    wanted = _wanted_members(members)
    if reason is not None and reason not in MemberReason.values:
        raise PartitionError(f"reason {reason!r} is not one of {MemberReason.values}")
    change = MemberChange()
    with transaction.atomic():
        locked = Partition.objects.select_for_update().get(pk=partition.pk)
        if reason in (None, MemberReason.POOL):
            _refuse_if_owned(locked, f"its {'pool ' if reason else ''}members change", as_owner)
        rows = {m.port_guid: m for m in locked.members.all()}
        mine = {g: m for g, m in rows.items() if reason is None or m.reason == reason}
        others = {g: m for g, m in rows.items() if g not in mine}
        ports = _ports_by_guid(locked.fabric, wanted)
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
            _mark_pending(locked)
            locked.save(update_fields=["applied_state", "drift", "updated"])
        partition.applied_state, partition.drift = locked.applied_state, locked.drift
        audit.record(
            "partition.set_members",
            locked,
            {"reason": reason or "all", **change.as_dict(), "sample_added": change.added[:20],
             "sample_removed": change.removed[:20]},
            user=user,
        )  # fmt: skip
        _notify(locked.fabric, [])
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
        PartitionError: a member that is not a GUID or keyword, a bad membership, or an unknown
            ``reason``.
    """
    wanted = _wanted_members(members)
    if reason not in MemberReason.values:
        raise PartitionError(f"reason {reason!r} is not one of {MemberReason.values}")
    change = MemberChange()
    with transaction.atomic():
        locked = Partition.objects.select_for_update().get(pk=partition.pk)
        if reason == MemberReason.POOL:
            _refuse_if_owned(locked, "its pool members change", False)
        rows = {m.port_guid: m for m in locked.members.filter(port_guid__in=list(wanted))}
        ports = _ports_by_guid(locked.fabric, [g for g in wanted if g not in rows])
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
            _refuse_if_owned(locked, "its pool members change", False)
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
        _mark_pending(locked)
        locked.save(update_fields=["applied_state", "drift", "updated"])
    partition.applied_state, partition.drift = locked.applied_state, locked.drift
    audit.record(
        action,
        locked,
        {"reason": reason, **change.as_dict(), "sample_added": change.added[:20],
         "sample_removed": change.removed[:20]},
        user=user,
    )  # fmt: skip
    _notify(locked.fabric, [])


# -- import / export ------------------------------------------------------------------------------


@dataclass
class ImportSummary:
    """What :func:`import_partitions` did (the ``import_partitions`` command's JSON line, the API's
    answer): PKeys (``"0x0a01"``) ``created``, ``updated`` (replaced whole), ``deleted``
    (``replace``), and ``kept``: partitions a pool or a job owns (:func:`partition_owner`) that
    the import left as they are (absent from the file in ``replace`` mode, or given by the file
    exactly as stored). ``partitions``: definitions in the file; ``members``: member rows written."""

    fabric: str
    source: str
    mode: str
    partitions: int = 0
    members: int = 0
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    warnings: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _check_import_names(conf: PartitionsConf, staying: Iterable[Partition], source: str) -> None:
    """Partition names are unique per fabric: refuse a file giving one name to two PKeys, or the
    name of a stored partition of another PKey that stays (``staying``: not in the file, and not
    deleted by the import: every other one in ``merge`` mode, the default and owned ones in
    ``replace`` mode).

    Raises:
        PartitionsParseError: located at the later definition.
    """
    names: dict[str, PartitionRecord] = {p.name: PartitionRecord(p.name, p.pkey) for p in staying if p.name}
    for rec in conf.partitions:
        if not rec.name:
            continue
        first = names.setdefault(rec.name, rec)
        if first is not rec:
            where = f"line {first.line}" if first.line else "a stored partition that stays"
            raise PartitionsParseError(
                f"partition name {rec.name!r} is already PKey 0x{first.pkey:04x}'s ({where}): names are "
                "unique per fabric",
                source,
                rec.line,
            )


def _as_written(partition: Partition) -> dict:
    """What OpenSM reads of ``partition`` as :func:`generate_conf` writes it (its record through
    the generator and back through the parser): :meth:`PartitionRecord.semantics`, compared with
    a file's entry to tell an owned partition given back unchanged."""
    text = generate([to_record(partition)], ensure_default=False)
    return parse_partitions(text, source="<stored>").partitions[0].semantics()


def _refuse_owned_entries(
    conf: PartitionsConf,
    stored: dict[int, Partition],
    owners: dict[int, tuple[str, str]],
    source: str,
) -> set[int]:
    """The PKeys of the file's entries for owned partitions that equal what is stored (left
    untouched); any other entry with an owned partition's PKey, or with an owner-reserved name
    (:data:`OWNER_NAME_RE`), is refused.

    Raises:
        PartitionsParseError: located at the entry, naming the owner when there is one.
    """
    by_name = {p.name: p for p in stored.values()}
    same: set[int] = set()
    for rec in conf.partitions:
        row = stored.get(rec.pkey)
        owned = owners.get(row.pk) if row is not None else None
        if owned is not None:
            if rec.semantics() == _as_written(row):
                same.add(rec.pkey)
                continue
            raise PartitionsParseError(
                f"PKey 0x{rec.pkey:04x} belongs to {owned[0]}: change it through the {owned[1]} "
                f"(an import may give it back only as stored: {row.name}, its flags and members)",
                source,
                rec.line,
            )
        if rec.name and OWNER_NAME_RE.match(rec.name):
            holder = by_name.get(rec.name)
            owned = owners.get(holder.pk) if holder is not None else None
            if owned is not None:
                message = (
                    f"partition name {rec.name!r} belongs to {owned[0]} (PKey {holder.pkey_hex}): "
                    f"change it through the {owned[1]}"
                )
            else:
                message = (
                    f"partition name {rec.name!r}: pool_<n> and job_<n> are the names of the partitions "
                    "Weft makes for pools and jobs; choose another"
                )
            raise PartitionsParseError(message, source, rec.line)
    return same


def import_partitions(
    fabric: Fabric, text: str, *, source: str = "<text>", mode: str = MERGE, user=None
) -> ImportSummary:
    """Import an OpenSM ``partitions.conf`` into ``fabric`` (one transaction, audited).

    Rule: each partition of the file (definitions with one PKey merged, as OpenSM does) replaces
    the stored partition with that PKey whole (flags and members; ``source`` becomes
    ``imported``, members get reason ``imported``) or is created. ``mode="merge"`` keeps stored
    partitions the file does not name; ``mode="replace"`` deletes them (the default partition
    is never deleted). A partition a pool or a job owns (:func:`partition_owner`) is never
    changed or deleted by an import: absent from the file it stays (``replace`` too), and the
    file may name it only exactly as stored (name, flags, members and their membership, as
    :func:`generate_conf` writes it: an exported file imports back), which leaves it untouched;
    both are in the summary's ``kept``. Nothing is written when the file is bad or refused.

    Raises:
        PartitionsParseError: the file is one OpenSM would reject (``source:line: message``), a
            partition has no PKey (Weft needs explicit PKeys; OpenSM would make one up), a name
            given to two PKeys or taken by a partition that stays, an entry that changes a pool's
            or a job's partition (naming the owner: change it through the pool), or an entry
            named ``pool_<n>``/``job_<n>`` (:data:`OWNER_NAME_RE`) that is not that partition
            given back as stored.
        PartitionError: ``mode`` is not merge or replace; another transaction stored one of the
            file's PKeys or names while it was imported (the database refused the write; the API
            answers 409).
    """
    if mode not in (MERGE, REPLACE):
        raise PartitionError(f"mode {mode!r} is not merge or replace")
    conf: PartitionsConf = parse_partitions(text, source=source)
    for rec in conf.partitions:
        if rec.pkey is None:
            raise PartitionsParseError(
                f"partition {rec.name!r} has no PKey: Weft needs explicit PKeys (OpenSM would generate one)",
                source,
                rec.line,
            )
    summary = ImportSummary(fabric=fabric.name, source=source, mode=mode,
                            warnings=[w.as_dict() for w in conf.warnings])  # fmt: skip
    try:
        with transaction.atomic():
            stored = {p.pkey: p for p in Partition.objects.select_for_update().filter(fabric=fabric)}
            owners = partition_owners(p.pk for p in stored.values())
            untouched = _refuse_owned_entries(conf, stored, owners, source)
            in_file = {rec.pkey for rec in conf.partitions}
            gone = [
                row
                for pkey, row in stored.items()
                if mode == REPLACE and pkey not in in_file and not row.is_default and row.pk not in owners
            ]
            gone_ids = {row.pk for row in gone}
            staying = [row for pkey, row in stored.items() if pkey not in in_file and row.pk not in gone_ids]
            _check_import_names(conf, staying, source)
            summary.kept = sorted(
                row.pkey_hex
                for pkey, row in stored.items()
                if row.pk in owners and (pkey in untouched or pkey not in in_file)
            )
            # before any write: the rows deleted first and the renamed ones under a name no stored
            # partition can have (names start with a letter or "_"), so that no intermediate state
            # breaks the unique (fabric, name) constraint (a file swapping two names, or taking the
            # name of a partition it deletes)
            for row in gone:
                summary.deleted.append(row.pkey_hex)
                row.delete()
            renamed = [
                stored[rec.pkey].pk
                for rec in conf.partitions
                if rec.pkey in stored
                and rec.pkey not in untouched
                and stored[rec.pkey].name != _fields_of(rec)["name"]
            ]
            for pk in renamed:
                Partition.objects.filter(pk=pk).update(name=f"~import-{pk}")
            ports = _ports_by_guid(fabric, (m.guid for rec in conf.partitions for m in rec.members))
            for rec in conf.partitions:
                if rec.pkey in untouched:
                    continue
                values = _fields_of(rec)
                row = stored.get(rec.pkey)
                if row is None:
                    row = Partition(fabric=fabric, pkey=rec.pkey, source=PartitionSource.IMPORTED, **values)
                    summary.created.append(f"0x{rec.pkey:04x}")
                else:
                    for k, v in values.items():
                        setattr(row, k, v)
                    row.source = PartitionSource.IMPORTED
                    row.members.all().delete()
                    summary.updated.append(f"0x{rec.pkey:04x}")
                _mark_pending(row)
                try:
                    row.full_clean(exclude=["fabric"], validate_unique=False, validate_constraints=False)
                except ValidationError as exc:
                    what = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
                    raise PartitionsParseError(
                        f"partition {rec.name!r} cannot be stored: {what}", source, rec.line
                    ) from None
                row.save()
                PartitionMember.objects.bulk_create(
                    [
                        PartitionMember(
                            partition=row,
                            port_guid=m.guid,
                            membership=m.membership,
                            reason=MemberReason.IMPORTED,
                            port_id=ports.get(m.guid),
                        )  # fmt: skip
                        for m in rec.members
                    ],
                    batch_size=500,
                )
                summary.members += len(rec.members)
            summary.partitions = len(conf.partitions)
            audit.record(
                "partition.import",
                fabric,
                {k: v for k, v in summary.as_dict().items() if k != "warnings"}
                | {"warnings": len(conf.warnings)},
                user=user,
            )
            _notify(fabric, [])
    except IntegrityError as exc:
        # another change stored a partition with a PKey or a name of the file after the rows were
        # locked (a create is not blocked by those locks): nothing of the import was written
        raise PartitionError(
            f"the partitions of fabric {fabric.name} changed while the file was imported (another change "
            "stored one of its PKeys or names); nothing was imported: retry",
            field="detail",
        ) from exc
    return summary


def _comment(fabric: Fabric) -> str:
    return f"OpenSM partitions of fabric {fabric.name}, written by Weft: edit in Weft, not here"


def generate_conf(fabric: Fabric, *, width: int = 100) -> str:
    """The ``partitions.conf`` text for the stored partitions of ``fabric`` (the default partition
    first, written as ``Default=0x7fff, ipoib : ALL=full, SELF=full ;`` when none is stored)."""
    parts = Partition.objects.filter(fabric=fabric).prefetch_related("members").order_by("pkey")
    return generate([to_record(p) for p in parts], width=width, comment=_comment(fabric))


# -- apply ----------------------------------------------------------------------------------------


def partitions_path(fabric: Fabric) -> str:
    """Where the partitions file of ``fabric`` goes (``Fabric.partitions_path``, else
    ``WEFT_PARTITIONS_PATH``); "" when neither is set."""
    return fabric.partitions_path or settings.WEFT_PARTITIONS_PATH


def write_atomically(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old file or the new one, never a part:
    a temporary file in the same directory, fsynced, renamed over it (``os.replace``), the
    directory fsynced. Keeps the old file's mode (default 0644).

    Raises:
        OSError: the directory does not exist or is not writable.
    """
    path = Path(path)
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def signal_opensm(fabric: Fabric, *, timeout: float = 30.0) -> str:
    """Make OpenSM re-read its partitions file: run ``Fabric.sm_reload_command`` (argv, with the
    fabric's tool environment, ``timeout`` seconds, its own process group) when set, else send
    SIGHUP to the pid in ``Fabric.sm_pid_file`` (or ``WEFT_SM_PID_FILE``): OpenSM then runs a
    heavy sweep, which re-reads the file and sets the ports' P_Key tables. Returns what was done.

    Raises:
        ApplyError: nothing configured, an unreadable pid file, no such process or only a zombie
            (an OpenSM that exited and was not reaped: ``core.procs.is_running``), a command that
            failed or timed out.
    """
    command = fabric.sm_reload_command or []
    if command:
        argv = [str(a) for a in command]
        try:
            proc = run_process(argv, env=fabric_env(fabric), timeout=timeout, text=True)
        except subprocess.TimeoutExpired:
            raise ApplyError(
                f"reload command {argv[0]} did not finish within {timeout:g} s (killed)"
            ) from None
        except OSError as exc:
            raise ApplyError(f"reload command {argv[0]} could not run: {exc}") from None
        if proc.returncode != 0:
            said = (proc.stderr or proc.stdout).strip()[-300:]
            raise ApplyError(f"reload command {argv[0]} failed (exit {proc.returncode}): {said}")
        return f"ran {' '.join(argv)}"
    pid_file = fabric.sm_pid_file or settings.WEFT_SM_PID_FILE
    if not pid_file:
        raise ApplyError(
            f"fabric {fabric.name}: no way to make OpenSM re-read its partitions (set sm_pid_file, "
            "WEFT_SM_PID_FILE or sm_reload_command)"
        )
    try:
        pid = int(Path(pid_file).read_text().split()[0])
    except (OSError, ValueError, IndexError) as exc:
        raise ApplyError(f"OpenSM pid file {pid_file}: {exc or 'empty'}") from None
    if pid <= 1:
        raise ApplyError(f"OpenSM pid file {pid_file}: pid {pid} is not a process to signal")
    if not procs.is_running(pid):  # gone, or a zombie: SIGHUP to a zombie "succeeds" and does nothing
        what = "has exited, not yet reaped by its parent" if procs.state(pid) else "no such process"
        raise ApplyError(
            f"SIGHUP to OpenSM pid {pid} (from {pid_file}) not sent: OpenSM is not running ({what})"
        )
    try:
        os.kill(pid, signal.SIGHUP)
    except OSError as exc:
        raise ApplyError(f"SIGHUP to OpenSM pid {pid} (from {pid_file}): {exc.strerror}") from None
    return f"SIGHUP to pid {pid}"


def _spread(items: list, n: int) -> list:
    """At most ``n`` items evenly spread over ``items`` (deterministic)."""
    if len(items) <= n:
        return list(items)
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


@dataclass
class _Check:
    partition_id: int
    guid: str
    expected: str | None  # membership, or None: must not carry the PKey


def _plan_checks(fabric: Fabric, parts: list[Partition], sample: int) -> list[_Check]:
    """Ports to verify per partition: up to ``sample`` members the topology knows (GUID members
    only; keyword members say nothing checkable per port) and up to ``sample`` CA ports that are
    not members (skipped when a keyword member covers all ports)."""
    ca_ports = list(
        Port.objects.filter(node__fabric=fabric, node__node_type=NodeType.CA)
        .exclude(port_guid="")
        .order_by("port_guid")
        .values_list("port_guid", flat=True)
    )
    known = set(ca_ports) | set(
        Port.objects.filter(node__fabric=fabric).exclude(port_guid="").values_list("port_guid", flat=True)
    )
    checks: list[_Check] = []
    for p in parts:
        if p.is_default:
            continue
        members = {m.port_guid: m.membership for m in p.members.all()}
        on_fabric = sorted(g for g in members if g in known)
        checks += [_Check(p.pk, g, members[g]) for g in _spread(on_fabric, sample)]
        if not any(g in KEYWORDS for g in members):
            outside = [g for g in ca_ports if g not in members]
            checks += [_Check(p.pk, g, None) for g in _spread(outside, sample)]
    return checks


def _matches(expected: str | None, seen: str | None) -> bool:
    if expected == Membership.BOTH:
        return seen in (Membership.BOTH, Membership.FULL)
    return expected == seen


@dataclass
class ApplyResult:
    """What :func:`apply` did (the ``partitions --apply`` command's JSON line)."""

    fabric: str
    path: str = ""
    ok: bool = False
    state: str = ApplyState.FAILED
    signalled: str = ""
    sha256: str = ""
    bytes: int = 0
    lines: int = 0
    longest_line: int = 0
    partitions: int = 0
    members: int = 0
    checked_ports: int = 0
    drift: list[dict] = field(default_factory=list)
    #: port checks that could not be read (``_verify``): with no drift, the apply is ``failed``
    unverified: list[dict] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def apply(
    fabric: Fabric,
    *,
    user=None,
    timeout: float | None = None,
    sample: int | None = None,
    signal_timeout: float = 30.0,
) -> ApplyResult:
    """Apply the stored partitions of ``fabric`` on its OpenSM and verify them.

    Steps: :func:`generate_conf` → :func:`write_atomically` to :func:`partitions_path` →
    :func:`signal_opensm` → read ``smpquery pkeys`` of the planned ports (up to ``sample``
    members and ``sample`` non-members per partition; default ``WEFT_PARTITIONS_VERIFY_SAMPLE``)
    again until each carries its partition's PKey as configured (members: full/limited bit;
    non-members: absent) or ``timeout`` seconds (default ``WEFT_PARTITIONS_VERIFY_TIMEOUT_S``)
    pass. Then, in one transaction: each partition's ``applied_state`` (``applied`` or
    ``drift`` with the disagreeing ports in ``drift``), ``applied_at``, ``applied_hash``; events
    ``partition.applied`` (clears drift/failure alarms) or one ``partition.drift`` per drifting
    partition; an audit entry. A failure before verification (nothing to write to, OpenSM not
    signalled) records ``failed`` and ``partition.apply_failed`` and returns ``ok`` False with
    ``error``; it never raises for those. Verification that could not read the sampled ports
    (``smpquery`` failing or hung: ``unverified``, no port disagreeing) records ``failed`` and
    ``partition.apply_failed`` too, with the ports in the event, not drift. A worker shutdown in
    the middle (the tools refused by ``abort_all``) records nothing and returns state
    ``pending`` (:func:`_interrupted`) at once, instead of waiting out the verification
    ``timeout`` and reporting every port as drift.
    """
    t0 = time.monotonic()
    timeout = settings.WEFT_PARTITIONS_VERIFY_TIMEOUT_S if timeout is None else timeout
    sample = settings.WEFT_PARTITIONS_VERIFY_SAMPLE if sample is None else sample
    result = ApplyResult(fabric=fabric.name)
    parts: list[Partition] = []
    try:
        # one apply per fabric at a time writes and signals (PostgreSQL row lock; the partitions
        # read inside it are the ones written)
        with transaction.atomic():
            Fabric.objects.select_for_update().filter(pk=fabric.pk).first()
            parts = list(Partition.objects.filter(fabric=fabric).prefetch_related("members").order_by("pkey"))
            try:
                text = generate([to_record(p) for p in parts], comment=_comment(fabric))
            except ValueError as exc:  # a stored row the file cannot say (set outside the services)
                raise ApplyError(f"cannot generate the partitions file: {exc}") from None
            lines = text.splitlines()
            result.sha256 = hashlib.sha256(text.encode()).hexdigest()
            result.bytes, result.lines = len(text.encode()), len(lines)
            result.longest_line = max(map(len, lines), default=0)
            result.partitions = len(parts)
            result.members = sum(len(p.members.all()) for p in parts)
            result.path = partitions_path(fabric)
            if not result.path:
                raise ApplyError(
                    f"fabric {fabric.name}: no partitions file configured "
                    "(Fabric.partitions_path or WEFT_PARTITIONS_PATH)"
                )
            try:
                write_atomically(result.path, text)
            except OSError as exc:
                raise ApplyError(f"cannot write {result.path}: {exc}") from None
            result.signalled = signal_opensm(fabric, timeout=signal_timeout)
    except ApplyError as exc:
        result.error = str(exc)
        result.seconds = round(time.monotonic() - t0, 3)
        _record_failure(fabric, parts, result, user)
        return result
    except ToolAborted as exc:  # the reload command was refused: the worker is stopping
        return _interrupted(fabric, result, exc, t0)
    checks = _plan_checks(fabric, parts, sample)
    result.checked_ports = len({c.guid for c in checks})
    try:
        drift, unverified = _verify(fabric, parts, checks, timeout)
    except ToolAborted as exc:
        return _interrupted(fabric, result, exc, t0)
    result.drift, result.unverified = drift, unverified
    result.seconds = round(time.monotonic() - t0, 3)
    if unverified and not drift:
        # the ports could not be read (smpquery failing, hung): nothing says OpenSM disagrees, and
        # nothing says it applied the file: a failure of the apply's verification, not drift
        first = unverified[0]
        ports = len({u["guid"] for u in unverified})  # a port carries one check per partition
        result.error = (
            f"written to {result.path} and OpenSM signalled ({result.signalled}), but not verified: "
            f"{ports} of the {result.checked_ports} sampled port(s) could not be read "
            f"within {timeout:g} s (e.g. {first['guid']}: {first['error']})"
        )
        _record_failure(fabric, parts, result, user)
        return result
    result.ok = not drift
    result.state = ApplyState.APPLIED if not drift else ApplyState.DRIFT
    _record_outcome(fabric, parts, result, user)
    return result


def _interrupted(fabric: Fabric, result: ApplyResult, exc: ToolAborted, t0: float) -> ApplyResult:
    """The worker is stopping (:func:`fabric.collectors.tools.abort_all`) in the middle of an apply:
    nothing is recorded (no drift, no alarm, no mail; the partitions keep their stored state, so the
    next start applies and verifies again) and the result says ``pending`` with the reason."""
    result.error = f"interrupted: {exc}"
    result.state = ApplyState.PENDING
    result.seconds = round(time.monotonic() - t0, 3)
    log.info("applying the partitions of %s: %s", fabric.name, result.error)
    return result


#: a read is not started with less than this many seconds left before the verification deadline
MIN_READ_S = 0.5


def _verify(
    fabric: Fabric, parts: list[Partition], checks: list[_Check], timeout: float
) -> tuple[list[dict], list[dict]]:
    """Read the P_Key tables of the checked ports again until all agree or ``timeout`` seconds
    pass; return ``(drift, unverified)``.

    ``drift``: ports whose last read table disagrees (``[{"partition", "pkey", "guid",
    "expected", "seen"}]``, ``seen`` the membership read or None). ``unverified``: ports never
    read successfully before the deadline (``[{"partition", "pkey", "guid", "expected",
    "error"}]``: the tool failed or timed out, or no time was left to read them). Each
    ``smpquery`` run is bounded by the time left until the deadline (at most 15 s), and no read
    starts with less than :data:`MIN_READ_S` left, so a hung tool costs at most ``timeout``
    (plus a process kill), not ``timeout`` per port.

    Raises:
        ToolAborted: the worker is stopping (:func:`fabric.collectors.tools.abort_all`).
    """
    by_id = {p.pk: p for p in parts}
    env = fabric_env(fabric)
    deadline = time.monotonic() + timeout
    interval = 0.2
    # guid -> the last table read or "error: ..." (what is known of each port so far)
    last: dict[str, object] = {}
    pending = list(checks)
    while True:
        tables: dict[str, object] = {}
        for c in pending:
            if c.guid in tables:
                continue
            left = deadline - time.monotonic()
            if left < MIN_READ_S:
                break  # out of time: the ports not read this round keep what was read before
            try:
                tables[c.guid] = read_pkeys(fabric, c.guid, env=env, timeout=min(15.0, left))
            except ToolAborted:
                raise  # the process is stopping: not a disagreement, and no point waiting out the timeout
            except (ToolError, PartitionsParseError) as exc:
                tables[c.guid] = f"error: {str(exc)[:200]}"
        for guid, table in tables.items():
            if not (isinstance(table, str) and guid in last and not isinstance(last[guid], str)):
                last[guid] = table  # a failed re-read keeps the table read before
        drift, unverified, failed = [], [], []
        for c in pending:
            part = by_id[c.partition_id]
            row = {"partition": part.name, "pkey": part.pkey_hex, "guid": c.guid, "expected": c.expected}
            table = last.get(c.guid)
            if table is None or isinstance(table, str):
                error = (
                    table.removeprefix("error: ") if table else "not read before the verification deadline"
                )
                unverified.append(row | {"error": error})
                failed.append(c)
                continue
            seen = table.membership(part.pkey)
            if not _matches(c.expected, seen):
                drift.append(row | {"seen": seen})
                failed.append(c)
        if not failed or deadline - time.monotonic() < MIN_READ_S:
            return drift, unverified
        pending = failed
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
        interval = min(interval * 2, 2.0)


def _fabric_event(fabric: Fabric, code: str, message: str, details: dict) -> EventSpec:
    return EventSpec(code=code, message=message, object_type="fabric", object_key=fabric.name,
                     object_repr=fabric.name, details=details)  # fmt: skip


def _record_failure(fabric: Fabric, parts: list[Partition], result: ApplyResult, user) -> None:
    log.warning("applying the partitions of %s failed: %s", fabric.name, result.error)
    with transaction.atomic():
        written = {}
        if result.signalled:  # written and signalled, not verified: the file is the one applied
            written = {"applied_hash": result.sha256, "applied_at": timezone.now(), "drift": []}
        Partition.objects.filter(pk__in=[p.pk for p in parts]).update(
            applied_state=ApplyState.FAILED, apply_error=result.error[:2000], **written
        )
        spec = _fabric_event(
            fabric, "partition.apply_failed", f"partitions of {fabric.name} not applied: {result.error}",
            {"path": result.path, "error": result.error, "unverified": result.unverified[:20]},
        )  # fmt: skip
        record_events(fabric, [spec])
        audit.record("partition.apply", fabric, {"ok": False, "error": result.error[:500]}, user=user)
        _notify(fabric, [spec.code], applied=True)


def _record_outcome(fabric: Fabric, parts: list[Partition], result: ApplyResult, user) -> None:
    """Store what the apply found. A partition changed while the apply ran (``updated`` moved on:
    new members, flags) stays ``pending``: the file written was not its current state."""
    now = timezone.now()
    by_pkey: dict[str, list[dict]] = {}
    for d in result.drift:
        by_pkey.setdefault(d["pkey"], []).append(d)
    specs: list[EventSpec] = []
    with transaction.atomic():
        for p in parts:
            mine = by_pkey.get(p.pkey_hex, [])
            Partition.objects.filter(pk=p.pk, updated=p.updated).update(
                applied_state=ApplyState.DRIFT if mine else ApplyState.APPLIED,
                applied_at=now,
                applied_hash=result.sha256,
                drift=mine[:100],
                apply_error="",
            )
            if mine:
                specs.append(
                    EventSpec(
                        code="partition.drift",
                        message=f"partition {p} of {fabric.name}: {len(mine)} sampled port(s) disagree "
                        f"after apply (e.g. {mine[0]['guid']}: expected {mine[0]['expected']}, "
                        f"seen {mine[0]['seen']})",
                        object_type="partition",
                        # the partition, not only its PKey: a PKey freed by job 25 and given to
                        # job 26 is another partition with its own alarm (and clear mail)
                        object_key=f"{fabric.name}:{p.pkey_hex}:{p.name}"[:120],
                        object_repr=str(p),
                        details={"drift": mine[:20]},
                    )
                )
        if not specs:
            specs.append(
                _fabric_event(
                    fabric,
                    "partition.applied",
                    f"{len(parts)} partition(s) of {fabric.name} applied ({result.signalled}); "
                    f"{result.checked_ports} port(s) verified",
                    {"sha256": result.sha256, "checked_ports": result.checked_ports, "path": result.path},
                )  # fmt: skip
            )
        record_events(fabric, specs)
        audit.record(
            "partition.apply",
            fabric,
            {"ok": result.ok, "sha256": result.sha256, "drift": len(result.drift), "path": result.path},
            user=user,
        )
        _notify(fabric, [s.code for s in specs], applied=True)


# -- apply after a change, coalesced --------------------------------------------------------------

#: applies one :func:`apply_pending` call makes at most (then it leaves the rest to the next change)
MAX_APPLY_ROUNDS = 5


def conf_digest(fabric: Fabric) -> str:
    """SHA-256 (hex) of the ``partitions.conf`` the stored partitions of ``fabric`` make now: the
    ``sha256`` :func:`apply` would write (and stores as ``applied_hash``)."""
    return hashlib.sha256(generate_conf(fabric).encode()).hexdigest()


def is_current(fabric: Fabric, digest: str | None = None) -> bool:
    """True when the last apply wrote what is stored now and found it applied: every stored
    partition of ``fabric`` is ``applied`` with ``applied_hash`` = :func:`conf_digest`, and the
    partitions file (:func:`partitions_path`, when set) still holds that text. False with no
    stored partition (nothing says what OpenSM runs), any pending, failed or drifting one, or a
    file that is missing or was replaced (an OpenSM restarted with another file, a new lab)."""
    digest = digest or conf_digest(fabric)
    states = list(Partition.objects.filter(fabric=fabric).values_list("applied_state", "applied_hash"))
    if not states or not all(s == ApplyState.APPLIED and h == digest for s, h in states):
        return False
    path = partitions_path(fabric)
    if not path:
        return True
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest
    except OSError:
        return False


def auto_apply_enabled(fabric: Fabric) -> bool:
    """Whether changes made for the pools app are applied without an Admin: the fabric has a
    partitions file to write (:func:`partitions_path`). Without one they stay ``pending``."""
    return bool(partitions_path(fabric))


def queue_apply(fabric_id: int, *, force: bool = False) -> bool:
    """Queue ``fabric.tasks.apply_partitions_task`` for ``fabric_id`` when the caller's
    transaction commits (at once outside one), if :func:`auto_apply_enabled`. ``force``: apply
    even when :func:`is_current` (OpenSM restarted with another file, as a lab does).
    Returns whether it was queued. A broker that is down is logged, not raised: the partitions
    stay ``pending`` and the next change or an Admin's apply catches up."""
    fabric = Fabric.objects.filter(pk=fabric_id).first()
    if fabric is None or not auto_apply_enabled(fabric):
        return False
    # a token per request: the embedded worker drops a call equal to one still running, and the
    # running apply may have read the partitions before this change
    token = os.urandom(6).hex()

    def send() -> None:
        try:
            enqueue.send("fabric.apply_partitions", fabric_id, force=force, request=token)
        except Exception:
            log.exception("could not queue the partitions apply of fabric %s", fabric_id)

    transaction.on_commit(send)
    return True


def _apply_limit_s() -> float:
    return float(settings.WEFT_PARTITIONS_VERIFY_TIMEOUT_S) + 120.0


def apply_pending(fabric: Fabric, *, force: bool = False, user=None) -> dict:
    """Apply the partitions of ``fabric`` unless :func:`is_current` (``force``: apply anyway),
    one apply per fabric at a time, until what was last written is what is stored.

    Coalescing: the caller that takes the lock ``fabric.partitions_apply.<id>`` applies; callers
    that find it taken return ``skipped`` at once. The holder compares what it wrote with
    :func:`conf_digest` after each apply and, after releasing the lock, once more: a change that
    committed before a skipped caller tried the lock committed before that check, so it is applied
    by the holder (or by a caller that takes the lock after it). A failed or drifting apply is
    not retried unless the stored partitions changed meanwhile; at most :data:`MAX_APPLY_ROUNDS`
    applies per call.

    Returns ``{"fabric", "applies", "skipped", "ok", "state", "seconds", "error"}`` (the last
    apply's ``ok``/``state``/``error``; ``skipped`` "" when this call held the lock).
    """
    out = {"fabric": fabric.name, "applies": 0, "skipped": "", "ok": None, "state": "", "seconds": 0.0,
           "error": ""}  # fmt: skip
    written = None  # sha256 of the last file this call wrote
    while out["applies"] < MAX_APPLY_ROUNDS:
        with single_instance(f"fabric.partitions_apply.{fabric.pk}", _apply_limit_s()) as mine:
            if not mine:
                if not out["applies"]:
                    out["skipped"] = "an apply of this fabric is running; it applies this change too"
                return out
            while out["applies"] < MAX_APPLY_ROUNDS:
                digest = conf_digest(fabric)
                if digest == written or (written is None and not force and is_current(fabric, digest)):
                    break
                result = apply(fabric, user=user)
                written = result.sha256 or digest
                out["applies"] += 1
                out.update(ok=result.ok, state=result.state, error=result.error,
                           seconds=round(out["seconds"] + result.seconds, 3))  # fmt: skip
                if result.state == ApplyState.PENDING:  # interrupted by a shutdown: stop here
                    return out
        if written is None or conf_digest(fabric) == written:
            return out
    return out
