"""File generation: the parser/generator records of stored partitions and the fabric's
``partitions.conf`` text (``fabric.parsers.partitions.generate``), its digest and path."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable

from django.conf import settings

from ...models import Fabric, Partition, PartitionMember
from ...parsers.partitions import (
    DEFAULT_PKEY,
    McastGroupRecord,
    MemberRecord,
    PartitionRecord,
    generate,
)

log = logging.getLogger(__name__)


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


def record_fields(rec: PartitionRecord) -> dict:
    """The ``Partition`` field values of a parsed partitions.conf record (``fabric.parsers.partitions``)."""
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


def conf_comment(fabric: Fabric) -> str:
    """The comment line written at the top of ``fabric``'s partitions.conf."""
    return f"OpenSM partitions of fabric {fabric.name}, written by Weft: edit in Weft, not here"


def generate_conf(fabric: Fabric, *, width: int = 100) -> str:
    """The ``partitions.conf`` text for the stored partitions of ``fabric`` (the default partition
    first, written as ``Default=0x7fff, ipoib : ALL=full, SELF=full ;`` when none is stored)."""
    parts = Partition.objects.filter(fabric=fabric).prefetch_related("members").order_by("pkey")
    return generate([to_record(p) for p in parts], width=width, comment=conf_comment(fabric))


def partitions_path(fabric: Fabric) -> str:
    """Where the partitions file of ``fabric`` goes (``Fabric.partitions_path``, else
    ``WEFT_PARTITIONS_PATH``); "" when neither is set."""
    return fabric.partitions_path or settings.WEFT_PARTITIONS_PATH


def conf_digest(fabric: Fabric) -> str:
    """SHA-256 (hex) of the ``partitions.conf`` the stored partitions of ``fabric`` make now: the
    ``sha256`` :func:`apply` would write (and stores as ``applied_hash``)."""
    return hashlib.sha256(generate_conf(fabric).encode()).hexdigest()
