"""Pools and their IB partitions (PKeys), issue 11 "Partitions (PKeys) applied by the real OpenSM".

A pool may own one :class:`fabric.models.Partition` on its fabric (``Pool.partition``). Its
members of reason ``pool`` are, at every moment, the port GUIDs of the CA ports of the hosts
whose GPUs (whole, MIG slices or fractions) the pool holds in active allocations, with full
membership; members of other reasons (``extra``: storage, login nodes, with full or limited
membership; ``imported``) are the partition's own and stay (``fabric.services.partitions.set_members``
with ``reason="pool"`` replaces only the pool's; a GUID another reason holds keeps that row).

The fabric partitions service stays the one writer of partitions, members and ``applied_*``;
this module only decides what a pool's partition should hold:

* :func:`set_pool_pkey`: give a pool a PKey, change it, move it with the pool to another fabric,
  or take it away (the partition is deleted); the pool's members are written at once.
* :func:`sync_pool_members`: recompute one pool's members (after an allocation changed, after a
  discovery changed the hosts' ports), in one transaction with the partition row locked first,
  so two syncs racing never leave the older computation in place.

Each change queues an apply of the fabric's partitions on commit
(``fabric.services.partitions.queue_apply``: a worker writes ``partitions.conf``, makes OpenSM
re-read it and verifies with ``smpquery pkeys``; bursts coalesce to one apply per fabric at a
time), when the fabric has a partitions file configured; otherwise the partition stays
``pending`` until an Admin applies.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from fabric.choices import MemberReason, NodeType, PartitionSource
from fabric.models import Partition, Port
from fabric.services.partitions import (
    MemberChange,
    PartitionError,
    delete_partition,
    queue_apply,
    save_partition,
    set_members,
)

from ..models import AllocationItem, Pool


class PoolPKeyError(ValueError):
    """A PKey the pool cannot own (no fabric, a PKey out of range or taken on the fabric);
    ``field`` names the request field it is about. Nothing was written."""

    def __init__(self, message: str, field: str = "pkey"):
        super().__init__(message)
        self.field = field


def partition_name(pool: Pool) -> str:
    """The partition's name for ``pool``: ``pool_<id>``. Not the pool's name: partitions are
    fabric-level (every Viewer reads them, OpenSM's file names them) while a pool's name is
    seen only by its tenant's members (``pools.access``)."""
    return f"pool_{pool.pk}"


def pool_member_guids(pool: Pool, fabric_id: int) -> list[str]:
    """Sorted port GUIDs of the CA ports on fabric ``fabric_id`` of the hosts whose GPUs ``pool``
    holds now (active allocation items of any kind)."""
    hosts = AllocationItem.objects.filter(allocation__pool_id=pool.pk, active=True).values("gpu__host_id")
    return sorted(
        set(
            Port.objects.filter(
                node__fabric_id=fabric_id, node__node_type=NodeType.CA, node__host_id__in=hosts
            )
            .exclude(port_guid="")
            .values_list("port_guid", flat=True)
        )
    )


def _write_members(pool: Pool, partition: Partition, user=None) -> MemberChange | None:
    """With ``partition`` locked by the caller: make its ``pool`` members the pool's hosts' CA
    ports; None when they already are (no write, no audit entry). A wanted GUID that another
    reason holds (an ``extra`` row an Admin or the UFM API added) keeps that row
    (``set_members``), so it is no ``pool`` row and is not looked for as one."""
    wanted = pool_member_guids(pool, partition.fabric_id)
    rows = dict(partition.members.values_list("port_guid", "reason"))
    have = sorted(g for g, reason in rows.items() if reason == MemberReason.POOL)
    if have == [g for g in wanted if rows.get(g, MemberReason.POOL) == MemberReason.POOL]:
        return None
    return set_members(partition, wanted, reason=MemberReason.POOL, user=user)


def sync_pool_members(pool_id: int, *, user=None) -> MemberChange | None:
    """Recompute the ``pool`` members of pool ``pool_id``'s partition (see the module docstring)
    in one transaction, and queue an apply of its fabric on commit when they changed.

    The partition row is locked before the allocations are read: a sync that waits for another
    reads what that one committed, so the last sync to finish wrote the newest set. Returns what
    changed, or None (no such pool, no partition, nothing changed)."""
    with transaction.atomic():
        partition_id = Pool.objects.filter(pk=pool_id).values_list("partition_id", flat=True).first()
        if partition_id is None:
            return None
        partition = Partition.objects.select_for_update().filter(pk=partition_id).first()
        pool = Pool.objects.filter(pk=pool_id, partition_id=partition_id).first()
        if partition is None or pool is None:  # taken away meanwhile
            return None
        change = _write_members(pool, partition, user)
        if change is not None:
            queue_apply(partition.fabric_id)
    return change


def sync_fabric_pools(fabric_id: int) -> int:
    """:func:`sync_pool_members` for every pool with a partition on fabric ``fabric_id`` (after
    a discovery: a host's CA ports may have changed). Returns how many pools' members changed."""
    pools = Pool.objects.filter(partition__fabric_id=fabric_id).values_list("pk", flat=True)
    return sum(1 for pk in list(pools) if sync_pool_members(pk) is not None)


def set_pool_pkey(pool: Pool, pkey: int | None, *, user=None) -> Partition | None:
    """Make ``pkey`` the PKey of ``pool`` (a saved pool; its ``fabric`` is the one the partition
    goes on), in one audited transaction, and queue an apply of each fabric touched.

    * None: the pool's partition, if any, is deleted (its PKey leaves the ports at the apply).
    * A pool without one: a partition ``pool_<id>`` (IPoIB on, OpenSM's defaults otherwise) is
      created on the pool's fabric with the pool's members.
    * A pool with one: the PKey is changed in place (extra members and flags kept); a pool that
      moved to another fabric gets a new partition there (the old one is deleted).

    Returns the pool's partition (None when taken away); ``pool.partition`` is set.

    Raises:
        PoolPKeyError: the pool has no fabric (``field`` "pkey"), or the PKey is outside
            0x0001-0x7ffe or already used on the fabric by another partition.
    """
    with transaction.atomic():
        current = (
            Partition.objects.select_for_update().filter(pk=pool.partition_id).first()
            if pool.partition_id
            else None
        )
        touched: set[int] = set()
        if current is not None and (pkey is None or current.fabric_id != pool.fabric_id):
            touched.add(current.fabric_id)
            delete_partition(current, user=user)  # the pool's link is set to NULL with it
            current = None
        if pkey is None:
            pool.partition = None
        else:
            if pool.fabric_id is None:
                raise PoolPKeyError("a pool needs a fabric to own a PKey (PKeys are per fabric)")
            partition = current or Partition(
                fabric_id=pool.fabric_id, name=partition_name(pool), ipoib=True,
                description=f"GPU pool {pool.pk} (Weft)", source=PartitionSource.WEFT,
            )  # fmt: skip
            if partition.pk is None or partition.pkey != pkey:
                partition.pkey = pkey
                try:
                    save_partition(
                        partition, user=user, action="partition.create" if partition.pk is None else ""
                    )
                except PartitionError as exc:
                    raise PoolPKeyError(str(exc)) from None
                except IntegrityError:  # another request took the PKey between the check and the insert
                    raise PoolPKeyError(
                        f"PKey 0x{pkey:04x} is already used on fabric {pool.fabric_id}"
                    ) from None
            Pool.objects.filter(pk=pool.pk).update(partition=partition)
            pool.partition = partition
            _write_members(pool, partition, user)
            touched.add(partition.fabric_id)
        for fabric_id in sorted(touched):
            queue_apply(fabric_id)
    return pool.partition
