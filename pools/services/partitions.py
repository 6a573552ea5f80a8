"""Pools and their IB partitions (PKeys), issue 11 "Partitions (PKeys) applied by the real OpenSM".

A pool may own one :class:`fabric.models.Partition` on its fabric (``Pool.partition``). Its
members of reason ``pool`` are, at every moment, the port GUIDs of the CA ports of the hosts
whose GPUs (whole, MIG slices or fractions) the pool holds in active allocations, with full
membership; members of other reasons (``extra``: storage, login nodes, with full or limited
membership; ``imported``) are the partition's own and stay (``fabric.services.partitions.set_members``
with ``reason="pool"`` replaces only the pool's; a GUID another reason holds keeps that row).

The fabric partitions service stays the one writer of partitions, members and ``applied_*``;
this module only decides what a pool's partition should hold:

* :func:`save_pool` (the pools API's create and update) and :func:`set_pool_pkey`: give a pool a
  PKey, change it, move it with the pool to another fabric, or take it away (the partition is
  deleted); the pool's members are written at once. Both lock the fabric rows concerned first
  (:func:`lock_pkey_scope`), so racing changes of pool PKeys and job ranges are judged one
  after the other.
* :func:`check_pool_pkey` / :func:`check_job_range`: a pool PKey never lies inside a job PKey
  range in force on its fabric (the pool's own when it isolates jobs, other isolating pools' of
  that fabric or of none), checked from both sides; :func:`job_range_overlaps` lists stored
  overlaps (``manage.py check --database default``, ``pools.W001``).
* :func:`sync_pool_members`: recompute one pool's members (after an allocation changed, after a
  discovery changed the hosts' ports), in one transaction with the partition row locked first,
  so two syncs racing never leave the older computation in place.
* job partitions (per-job isolation): :func:`open_job_partition`, :func:`close_job_partition`,
  and :func:`sync_allocation_partition` after a discovery (the same member rule and write as a
  pool's, ``_write_wanted``).

Each change queues an apply of the fabric's partitions on commit
(``fabric.services.partitions.queue_apply``: a worker writes ``partitions.conf``, makes OpenSM
re-read it and verifies with ``smpquery pkeys``; bursts coalesce to one apply per fabric at a
time), when the fabric has a partitions file configured; otherwise the partition stays
``pending`` until an Admin applies.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import Q

from fabric.choices import MemberReason, NodeType, PartitionSource
from fabric.models import Fabric, Partition, Port
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
    return _ca_port_guids(AllocationItem.objects.filter(allocation__pool_id=pool.pk, active=True), fabric_id)


def _ca_port_guids(items, fabric_id: int) -> list[str]:
    """Sorted port GUIDs of the CA ports on fabric ``fabric_id`` of the hosts of ``items``
    (a QuerySet of allocation items): the members of a pool's or a job's partition."""
    return sorted(
        set(
            Port.objects.filter(
                node__fabric_id=fabric_id,
                node__node_type=NodeType.CA,
                node__host_id__in=items.values("gpu__host_id"),
            )
            .exclude(port_guid="")
            .values_list("port_guid", flat=True)
        )
    )


def _write_members(pool: Pool, partition: Partition, user=None) -> MemberChange | None:
    """With ``partition`` locked by the caller: make its ``pool`` members the pool's hosts' CA
    ports (:func:`_write_wanted`)."""
    return _write_wanted(partition, pool_member_guids(pool, partition.fabric_id), user)


def _write_wanted(partition: Partition, wanted: list[str], user=None) -> MemberChange | None:
    """With ``partition`` locked by the caller: make its ``pool`` members ``wanted`` (sorted port
    GUIDs); None when they already are (no write, no audit entry). A wanted GUID that another
    reason holds (an ``extra`` row an Admin or the UFM API added) keeps that row
    (``set_members``), so it is no ``pool`` row and is not looked for as one. Pool and job
    partitions both go through here."""
    rows = dict(partition.members.values_list("port_guid", "reason"))
    have = sorted(g for g, reason in rows.items() if reason == MemberReason.POOL)
    if have == [g for g in wanted if rows.get(g, MemberReason.POOL) == MemberReason.POOL]:
        return None
    return set_members(partition, wanted, reason=MemberReason.POOL, user=user, as_owner=True)


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


# --- pool PKeys and job PKey ranges kept apart ---------------------------------------------------


def _range(low: int, high: int) -> str:
    return f"0x{low:04x}-0x{high:04x}"


def job_ranges_on(fabric_id: int):
    """Pools whose job PKey range is in force on fabric ``fabric_id``: those with
    ``job_isolation`` whose fabric is that one or none (a pool without a fabric places jobs, and
    opens their partitions, on any fabric). A QuerySet in pk order."""
    return (
        Pool.objects.filter(job_isolation=True)
        .filter(Q(fabric_id=fabric_id) | Q(fabric_id__isnull=True))
        .order_by("pk")
    )


def check_pool_pkey(pkey: int, fabric_id: int, *, pool: Pool | None = None) -> None:
    """Refuse a pool PKey that lies inside a job PKey range in force on its fabric: ``pool``'s own
    range when it isolates jobs (its unsaved values count: ``job_isolation``, ``job_pkey_min``/
    ``max``), and every other isolating pool's (:func:`job_ranges_on`). Job partitions take the
    lowest free PKey of their range, so a pool PKey inside one would be refused or accepted
    depending on which jobs happen to run, and shrinks the range jobs have.

    Raises:
        PoolPKeyError: ``field`` "pkey"; the message names the range and the pool it is of.
    """
    if pool is not None and pool.job_isolation and pool.job_pkey_min <= pkey <= pool.job_pkey_max:
        raise PoolPKeyError(
            f"PKey 0x{pkey:04x} lies in this pool's own job PKey range "
            f"{_range(pool.job_pkey_min, pool.job_pkey_max)} (job_pkey_min-job_pkey_max), which its "
            "jobs' partitions take their PKeys from: choose a PKey outside it"
        )
    others = job_ranges_on(fabric_id).filter(job_pkey_min__lte=pkey, job_pkey_max__gte=pkey)
    if pool is not None and pool.pk is not None:
        others = others.exclude(pk=pool.pk)
    clash = others.first()
    if clash is not None:
        raise PoolPKeyError(
            f"PKey 0x{pkey:04x} lies in the job PKey range {_range(clash.job_pkey_min, clash.job_pkey_max)} "
            f"of pool {clash.name} (id {clash.pk}, job isolation"
            f"{' on any fabric' if clash.fabric_id is None else ''}), which job partitions take their "
            "PKeys from: choose a PKey outside it"
        )


def pool_pkeys_in_range(low: int, high: int, fabric_id: int | None, *, exclude_pool_id: int | None = None):
    """Pools whose PKey (their partition's) lies in ``low``-``high`` on fabric ``fabric_id``
    (None: on any fabric), other than ``exclude_pool_id``; a QuerySet with the partition, in PKey
    order."""
    qs = Pool.objects.select_related("partition", "partition__fabric").filter(
        partition__pkey__gte=low, partition__pkey__lte=high
    )
    if fabric_id is not None:
        qs = qs.filter(partition__fabric_id=fabric_id)
    if exclude_pool_id is not None:
        qs = qs.exclude(pk=exclude_pool_id)
    return qs.order_by("partition__pkey", "pk")


def check_job_range(pool: Pool, field: str = "job_pkey_min", *, include_own: bool = True) -> None:
    """Refuse a job PKey range (``pool``'s unsaved ``job_isolation``, ``job_pkey_min``/``max``
    and ``fabric``) that holds a pool PKey on a fabric it applies to (the pool's, or any when it
    has none): another pool's, and with ``include_own`` the pool's own stored one (leave it out
    when the same change gives the pool a new PKey: :func:`check_pool_pkey` judges that). A pool
    that does not isolate jobs has no range in force. ``field`` names the request field that
    made the change.

    Raises:
        PoolPKeyError: ``field``; the message names the range, the pool PKeys in it and their pools.
    """
    if not pool.job_isolation:
        return
    exclude = None if include_own else pool.pk
    inside = list(
        pool_pkeys_in_range(pool.job_pkey_min, pool.job_pkey_max, pool.fabric_id, exclude_pool_id=exclude)[:4]
    )
    if inside:
        held = ", ".join(
            f"0x{p.partition.pkey:04x} (pool {p.name}, fabric {p.partition.fabric.name})" for p in inside[:3]
        )
        raise PoolPKeyError(
            f"the job PKey range {_range(pool.job_pkey_min, pool.job_pkey_max)} holds pool PKeys: "
            f"{held}{' and more' if len(inside) > 3 else ''}; job partitions must not share pool PKeys: "
            "choose a range outside them",
            field=field,
        )


def job_range_overlaps() -> list[str]:
    """Every pool PKey stored inside a job PKey range in force on its fabric (data from before
    these were refused, or written past the API): one sentence per pair, for ``manage.py check
    --database default`` (``pools.W001``)."""
    out = []
    for iso in Pool.objects.filter(job_isolation=True).order_by("pk"):
        for p in pool_pkeys_in_range(iso.job_pkey_min, iso.job_pkey_max, iso.fabric_id):
            whose = "its own PKey" if p.pk == iso.pk else f"the PKey of pool {p.name} (id {p.pk})"
            out.append(
                f"pool {iso.name} (id {iso.pk}): its job PKey range {_range(iso.job_pkey_min, iso.job_pkey_max)} "
                f"holds {whose}, 0x{p.partition.pkey:04x} on fabric {p.partition.fabric.name}"
            )
    return out


def lock_pkey_scope(*fabric_ids: int | None, every: bool = False) -> list[int]:
    """Lock (``select_for_update``, in id order, inside the caller's transaction) the ``Fabric``
    rows a change of a pool PKey or of a job PKey range is judged on: ``fabric_ids`` (None
    skipped), or with ``every`` all of them (a pool without a fabric that isolates jobs: its range
    is in force on every fabric). Two such changes touching one fabric then run one after the
    other, and the second's checks (:func:`check_pool_pkey`, :func:`check_job_range`) read what
    the first committed (PostgreSQL; SQLite has one writer at a time anyway). Locks are taken in
    id order everywhere, so two callers never wait for each other in a cycle. Returns the ids."""
    qs = Fabric.objects.select_for_update().order_by("pk")
    if not every:
        ids = sorted({f for f in fabric_ids if f is not None})
        if not ids:
            return []
        qs = qs.filter(pk__in=ids)
    return list(qs.values_list("pk", flat=True))


#: :func:`save_pool`'s ``pkey`` when the change leaves the pool's PKey as it is
KEEP = object()

#: the pool fields whose change can bring a job PKey range over pool PKeys (in the order a 400
#: names them)
RANGE_FIELDS = ("job_pkey_min", "job_pkey_max", "job_isolation", "fabric")


def save_pool(pool: Pool, values: dict, *, pkey=KEEP, user=None) -> Pool:
    """Create ``pool`` (unsaved) or change it with ``values`` (model fields: ``fabric``,
    ``job_isolation``, ``job_pkey_min``...) and, unless ``pkey`` is :data:`KEEP`, give it ``pkey``
    (None takes it away; :func:`set_pool_pkey`), in one transaction. The pools API's create and
    update.

    Pool PKeys and job PKey ranges are judged here again against what is committed, with the
    fabric rows they concern locked first (:func:`lock_pkey_scope`: the pool's fabric before and
    after, every fabric for an isolating pool without one): a pool PKey set on a fabric and a job
    range taking it in, racing, would each pass a check made before the other's write; locked,
    the second waits and is refused. The pool row is locked too, and the pool's partition is the
    one stored (not the caller's copy). Only the fields in ``values`` are written on an update.
    A changed PKey (or a pool with one moving to another fabric) is judged by
    :func:`check_pool_pkey`; a change of a field of :data:`RANGE_FIELDS` by
    :func:`check_job_range` (the pool's own stored PKey counts unless it changes too); an
    unrelated edit is not refused for an overlap stored before (``pools.W001`` reports those).

    Raises:
        PoolPKeyError: ``field`` "pkey" (or "fabric" for a pool moving with its PKey), or the range
            field changed; nothing was written.
    """
    with transaction.atomic():
        before = Pool.objects.select_for_update().filter(pk=pool.pk).first() if pool.pk else None
        for name, value in values.items():
            setattr(pool, name, value)
        if before is not None:
            pool.partition = before.partition  # written only by set_pool_pkey: the stored one counts
        current = before.pkey if before is not None else None
        moved = before is not None and before.fabric_id != pool.fabric_id
        target = current if pkey is KEEP else pkey
        pkey_changed = target != current or (moved and target is not None)
        lock_pkey_scope(
            before.fabric_id if before is not None else None,
            pool.fabric_id,
            every=pool.job_isolation and pool.fabric_id is None,
        )
        range_field = next((f for f in RANGE_FIELDS if f in values), None)
        try:
            if target is not None and pool.fabric_id is not None and pkey_changed:
                check_pool_pkey(target, pool.fabric_id, pool=pool)
        except PoolPKeyError as exc:
            exc.field = "pkey" if pkey is not KEEP else "fabric"
            raise
        if range_field:
            check_job_range(pool, field=range_field, include_own=not pkey_changed)
        if before is None:
            pool.save()
        elif values:
            pool.save(update_fields=list(values))
        if pkey_changed:
            set_pool_pkey(pool, target, user=user)
    return pool


def set_pool_pkey(pool: Pool, pkey: int | None, *, user=None) -> Partition | None:
    """Make ``pkey`` the PKey of ``pool`` (a saved pool; its ``fabric`` is the one the partition
    goes on), in one audited transaction, and queue an apply of each fabric touched.

    * None: the pool's partition, if any, is deleted (its PKey leaves the ports at the apply).
    * A pool without one: a partition ``pool_<id>`` (IPoIB on, OpenSM's defaults otherwise) is
      created on the pool's fabric with the pool's members.
    * A pool with one: the PKey is changed in place (extra members and flags kept); a pool that
      moved to another fabric gets a new partition there (the old one is deleted).

    Returns the pool's partition (None when taken away); ``pool.partition`` is set. The fabric
    rows are locked first (:func:`lock_pkey_scope`), so the PKey is judged against what is
    committed.

    Raises:
        PoolPKeyError: the pool has no fabric (``field`` "pkey"), or the PKey is outside
            0x0001-0x7ffe, already used on the fabric by another partition, or inside a job
            PKey range in force on the fabric (:func:`check_pool_pkey`).
    """
    with transaction.atomic():
        # the fabrics judged on (the pool's, the one its partition leaves): see lock_pkey_scope
        lock_pkey_scope(
            pool.fabric_id,
            Partition.objects.filter(pk=pool.partition_id).values_list("fabric_id", flat=True).first(),
        )
        current = (
            Partition.objects.select_for_update().filter(pk=pool.partition_id).first()
            if pool.partition_id
            else None
        )
        touched: set[int] = set()
        if current is not None and (pkey is None or current.fabric_id != pool.fabric_id):
            touched.add(current.fabric_id)
            delete_partition(current, user=user, as_owner=True)  # the pool's link is set to NULL with it
            current = None
        if pkey is None:
            pool.partition = None
        else:
            if pool.fabric_id is None:
                raise PoolPKeyError("a pool needs a fabric to own a PKey (PKeys are per fabric)")
            if current is None or current.pkey != pkey:  # a PKey kept as it was is not re-judged
                check_pool_pkey(pkey, pool.fabric_id, pool=pool)
            partition = current or Partition(
                fabric_id=pool.fabric_id, name=partition_name(pool), ipoib=True,
                description=f"GPU pool {pool.pk} (Weft)", source=PartitionSource.WEFT,
            )  # fmt: skip
            if partition.pk is None or partition.pkey != pkey:
                partition.pkey = pkey
                try:
                    save_partition(
                        partition,
                        user=user,
                        action="partition.create" if partition.pk is None else "",
                        as_owner=True,
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


# --- job partitions (per-job isolation) -----------------------------------------------------------


class NoJobPKey(PoolPKeyError):
    """Every PKey of the pool's job range is used on the fabric (or the job has no fabric to put a
    partition on); nothing was written."""


def job_partition_name(job_id: int) -> str:
    """The partition name of job ``job_id``: ``job_<id>`` (fabric-level, like ``pool_<id>``)."""
    return f"job_{job_id}"


def allocation_member_guids(allocation_id: int, fabric_id: int) -> list[str]:
    """Sorted port GUIDs of the CA ports on fabric ``fabric_id`` of the hosts allocation
    ``allocation_id`` holds GPUs (whole, slices or a fraction) on (its active items)."""
    return _ca_port_guids(AllocationItem.objects.filter(allocation_id=allocation_id, active=True), fabric_id)


def _free_pkeys(pool: Pool, fabric_id: int):
    """PKeys of ``pool``'s job range not used by any partition of fabric ``fabric_id``, lowest first."""
    used = set(
        Partition.objects.filter(
            fabric_id=fabric_id, pkey__gte=pool.job_pkey_min, pkey__lte=pool.job_pkey_max
        ).values_list("pkey", flat=True)
    )
    return (k for k in range(pool.job_pkey_min, pool.job_pkey_max + 1) if k not in used)


def open_job_partition(
    pool: Pool, job_id: int, allocation_id: int, *, fabric_id: int | None = None, user=None
) -> Partition:
    """Create job ``job_id``'s own partition (per-job isolation, ``Pool.job_isolation``): name
    ``job_<id>``, the lowest free PKey of the pool's job range (``Pool.job_pkey_min``-
    ``job_pkey_max``; free = no partition of the fabric has it), members the CA ports of the
    hosts allocation ``allocation_id`` holds, full membership (reason ``pool``: computed here),
    IPoIB on. Through ``fabric.services.partitions`` (``save_partition``, ``set_members``: audited,
    inside the caller's transaction), and an apply of the fabric queued on commit.

    ``fabric_id``: the fabric of the job's hosts (default: the pool's, else that of the
    allocation's first GPU: a placement never spans fabrics). Two openers racing for
    one PKey: the database's unique (fabric, PKey) refuses the second insert, which takes the next
    free PKey (a savepoint around each try).

    Raises:
        NoJobPKey: no fabric, or every PKey of the range is taken on the fabric.
    """
    fabric_id = (
        fabric_id
        or pool.fabric_id
        or (
            AllocationItem.objects.filter(allocation_id=allocation_id, active=True)
            .values_list("gpu__host__fabric_id", flat=True)
            .first()
        )
    )
    if fabric_id is None:
        raise NoJobPKey(f"pool {pool.name}: a job partition needs a fabric (PKeys are per fabric)")
    with transaction.atomic():
        for pkey in _free_pkeys(pool, fabric_id):
            partition = Partition(
                fabric_id=fabric_id, name=job_partition_name(job_id), pkey=pkey, ipoib=True,
                description=f"job {job_id} of GPU pool {pool.pk} (Weft)", source=PartitionSource.WEFT,
            )  # fmt: skip
            try:
                with transaction.atomic():
                    save_partition(partition, user=user, action="partition.create", as_owner=True)
                break
            except (PartitionError, IntegrityError):  # taken meanwhile: the next one
                continue
        else:
            raise NoJobPKey(
                f"pool {pool.name}: every job PKey of 0x{pool.job_pkey_min:04x}-0x{pool.job_pkey_max:04x} "
                f"is used on fabric {Fabric.objects.filter(pk=fabric_id).values_list('name', flat=True).first()}"
            )
        set_members(
            partition,
            allocation_member_guids(allocation_id, fabric_id),
            reason=MemberReason.POOL,
            user=user,
            as_owner=True,
        )
        queue_apply(fabric_id)
    return partition


def sync_allocation_partition(partition_id: int, allocation_id: int, *, user=None) -> MemberChange | None:
    """Recompute the members of a job's partition ``partition_id`` (:func:`open_job_partition`
    made it) from the hosts allocation ``allocation_id`` holds now: the CA ports a discovery
    found for them on the partition's fabric (:func:`allocation_member_guids`; a replaced HCA
    has a new port GUID). The job partitions' twin of :func:`sync_pool_members`, after the same
    signal (``fabric.signals.discovery_committed``; the scheduler's receiver names the jobs),
    with the same rules: one transaction, the partition row locked before the allocation is
    read, an apply of its fabric queued on commit when the members changed. Returns what
    changed, or None (partition gone, nothing changed)."""
    with transaction.atomic():
        partition = Partition.objects.select_for_update().filter(pk=partition_id).first()
        if partition is None:  # the job ended meanwhile
            return None
        change = _write_wanted(partition, allocation_member_guids(allocation_id, partition.fabric_id), user)
        if change is not None:
            queue_apply(partition.fabric_id)
    return change


def close_job_partition(partition_id: int, *, user=None) -> bool:
    """Delete a job's partition (the job ended) through ``fabric.services.partitions`` (audited)
    and queue an apply of its fabric on commit: OpenSM takes the PKey off the ports. Returns
    False when it was already gone."""
    with transaction.atomic():
        partition = Partition.objects.select_for_update().filter(pk=partition_id).first()
        if partition is None:
            return False
        fabric_id = partition.fabric_id
        delete_partition(partition, user=user, as_owner=True)
        queue_apply(fabric_id)
    return True
