"""Import of an OpenSM ``partitions.conf`` into the stored partitions."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from accounts import audit

from ...choices import MemberReason, PartitionSource
from ...models import Fabric, Partition, PartitionMember
from ...parsers.partitions import (
    PartitionRecord,
    PartitionsConf,
    PartitionsParseError,
    generate,
    parse_partitions,
)
from .common import (
    OWNER_NAME_RE,
    PartitionError,
    mark_pending,
    node_guids_among,
    notify_changed,
    partition_owners,
    ports_by_guid,
)
from .conf import record_fields, to_record

log = logging.getLogger(__name__)

MERGE, REPLACE = "merge", "replace"


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
            given back as stored, a member that is a node GUID of the fabric (not a port GUID),
            and what :func:`~fabric.parsers.partitions.parse_partitions` refuses with
            ``strict=True`` (a PKey 0xffff, two names for one PKey, a default partition leaving
            ports out).
        PartitionError: ``mode`` is not merge or replace; another transaction stored one of the
            file's PKeys or names while it was imported (the database refused the write; the API
            answers 409).
    """
    if mode not in (MERGE, REPLACE):
        raise PartitionError(f"mode {mode!r} is not merge or replace")
    conf: PartitionsConf = parse_partitions(text, source=source, strict=True)
    for rec in conf.partitions:
        if rec.pkey is None:
            raise PartitionsParseError(
                f"partition {rec.name!r} has no PKey: Weft needs explicit PKeys (OpenSM would generate one)",
                source,
                rec.line,
            )
    nodes = node_guids_among(fabric, (m.guid for rec in conf.partitions for m in rec.members))
    for rec in conf.partitions:
        for m in rec.members:
            if m.guid in nodes:
                name, ports = nodes[m.guid]
                raise PartitionsParseError(
                    f"member {m.guid} is the node GUID of {name}, not a port GUID: OpenSM would put no "
                    f"port in the partition; its port GUID(s): {', '.join(ports) or 'none known'}",
                    source,
                    m.line,
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
                and stored[rec.pkey].name != record_fields(rec)["name"]
            ]
            for pk in renamed:
                Partition.objects.filter(pk=pk).update(name=f"~import-{pk}")
            ports = ports_by_guid(fabric, (m.guid for rec in conf.partitions for m in rec.members))
            for rec in conf.partitions:
                if rec.pkey in untouched:
                    continue
                values = record_fields(rec)
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
                mark_pending(row)
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
            notify_changed(fabric, [])
    except IntegrityError as exc:
        # another change stored a partition with a PKey or a name of the file after the rows were
        # locked (a create is not blocked by those locks): nothing of the import was written
        raise PartitionError(
            f"the partitions of fabric {fabric.name} changed while the file was imported (another change "
            "stored one of its PKeys or names); nothing was imported: retry",
            field="detail",
        ) from exc
    return summary
