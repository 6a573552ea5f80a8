"""The allocation service: the one writer of allocations and of ``Gpu.state``/``MigSlice.state``.

Modelled on Saleor's ``warehouse.management.allocate_stocks``: each change is one transaction
that locks what it reads before deciding, writes in bulk, records its events and its audit entry
inside the transaction, and sends ``pools.signals.allocation_changed`` (and a realtime message)
only on commit.

Locks, always in this order (so two transactions never wait on each other in a cycle):

1. :class:`~pools.models.Pool` rows (``select_for_update``), in pk order and in one statement:
   the pool allocated in, or the pool of the allocation being ended; a request that reclaims also
   locks the pools it reclaims from. Every writer of a pool's allocations holds its row, so the
   pool's usage, counted under the lock, cannot be raced past its quota, and its borrowed flags
   are re-marked by one transaction at a time. A request that finds it must reclaim from pools it
   has not locked rolls back (releasing its locks) and starts again with them in the set
   (:data:`_LOCK_ROUNDS`; the last round reclaims only from pools it holds);
2. allocations being ended (release, expiry, reclaim), in pk order;
3. GPUs (or MIG slices), in pk order. A request by count takes the first free ones with
   ``SKIP LOCKED`` (rows another transaction is handing out are skipped, not waited for); a
   request for named GPUs locks exactly those in pk order and is refused if any is taken.

A GPU can never be held twice: besides the locks, the database refuses a second active whole-GPU
item of one GPU and a second active item of one slice (``AllocationItem`` constraints). Shared-GPU
fractions are summed under the GPU's row lock against its memory (total minus reserved, MiB) and
100 % compute (HAMi's ``gpumem``/``gpucores``): never oversubscribed.

Quotas (:class:`~pools.models.Pool`): a pool's GPU usage is its active whole GPUs plus the
distinct GPUs it holds fractions on; slice usage its active slices. A request that would pass
``quota_*`` is refused (:class:`QuotaExceeded`, HTTP 409) and changes nothing: a refusal is not
an event (it would be written in a transaction that rolls back, or cost a second write on the hot
path); the API's 409 body says which quota and by how much.

Borrowed (``AllocationItem.borrowed``, ``Allocation.borrowed`` = any of its active items): what a
pool holds above its ``guaranteed_*`` share, oldest first staying guaranteed. A pool's *units*
are its whole GPUs and the distinct GPUs it holds fractions on (counted against
``guaranteed_gpus``), and its MIG slices (against ``guaranteed_slices``), ordered by allocation
(pk: creation order) then item; the first ``guaranteed_*`` units are guaranteed, the rest
borrowed, and every fraction item of one GPU shares its unit's flag (the unit's place is that of
its oldest fraction). An allocation marks its new items so (they come last); ending allocations
(release, expiry, reclaim) and a change of the guarantee (:func:`rebalance_borrowed`) re-mark the
pool's remaining items in the same transaction (:func:`_rebalance`), audited with the change.

Reclaim: when a request by count within the pool's guaranteed share finds too few free GPUs,
slices or no GPU with room for a fraction, it ends active borrowed allocations of other pools
that hold what it may use, whole, as ``reclaimed`` (lowest ``priority_weight`` first, newest
first): whole-GPU allocations for whole GPUs, MIG allocations of the profile for slices, and for
a fraction the cheapest way to make room on one GPU (a borrowed whole-GPU allocation, or the
borrowed fractions on a shared GPU). The guarantee is the pool's right whatever its weight: the
weight orders the borrowers, it does not shield them. Requests for named GPUs do not reclaim.

Bulk: :func:`allocate_many` allocates a batch (a scheduling pass's placements) in one
transaction with the same guarantees, request by request in list order, each refusal its own
(the others go on); named whole GPUs, the pass's requests, are locked, checked and written in
bulk (one audit entry and one event per allocation, bulk-inserted).

Errors: :class:`InvalidRequest` (400: bad input), :class:`NotEnoughFree` and
:class:`QuotaExceeded` (409), :class:`NotHolding` (409: release of an ended allocation),
``Pool.DoesNotExist``/``Allocation.DoesNotExist`` (404 to the API).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.db import transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from accounts import audit
from core.bulk import create_objects, insert_rows
from core.realtime import group_name, publish
from events.services import EventSpec, record_events
from fabric.models import Fabric, Host

from ...choices import HOLDING_STATES, AllocationKind, AllocationState, GpuState
from ...models import Allocation, AllocationItem, Gpu, MigSlice, Pool, Tenant
from ...signals import allocation_changed

#: the most GPUs or slices one request may ask for: a bound on the request's shape only (what a
#: pool can give is its GPUs, :func:`pool_capacity`; the queue refuses a job above it at submit)
MAX_COUNT = 1 << 20
#: the longest lease, seconds (a year)
MAX_LEASE_S = 366 * 86400
#: free GPUs looked at per round when placing a fraction
_FRACTION_BATCH = 32


class AllocationError(Exception):
    """Base of the service's refusals; ``status`` is the HTTP status the API answers with and
    :meth:`as_dict` its body (``detail``, ``code`` and details)."""

    status = 409
    code = "conflict"

    def __init__(self, message: str, **details: Any):
        super().__init__(message)
        self.details = details

    def as_dict(self) -> dict[str, Any]:
        return {"detail": str(self), "code": self.code, **self.details}


class InvalidRequest(AllocationError):
    """The request cannot be satisfied as written (bad count, unknown GPU, no tenant)."""

    status = 400
    code = "invalid"


class NotEnoughFree(AllocationError):
    """Fewer free GPUs/slices/capacity than asked for (after reclaiming what may be)."""

    code = "not_enough_free"


class QuotaExceeded(AllocationError):
    """The pool's quota would be passed (``quota``, ``used``, ``requested`` in the body)."""

    code = "quota_exceeded"


class NotHolding(AllocationError):
    """The allocation has already ended (released, expired or reclaimed)."""

    code = "not_holding"


@dataclass
class AllocationRequest:
    """What to allocate in a pool.

    ``kind``: :class:`pools.choices.AllocationKind`. ``count``: GPUs or slices (1 for a
    fraction). ``gpu_ids``: these GPUs exactly (whole GPUs: ``count`` of them; a fraction: one),
    else any that fit. ``mig_profile``: slices of this profile only (``1g.10gb``).
    ``memory_mib``/``compute_pct``: the fraction. ``lease_s``: seconds until it expires (None:
    no lease). ``tenant_id``: on whose behalf (required for a shared pool).
    """

    kind: str = AllocationKind.GPU
    count: int = 1
    gpu_ids: list[int] = field(default_factory=list)
    mig_profile: str = ""
    memory_mib: int | None = None
    compute_pct: int | None = None
    job: str = ""
    lease_s: float | None = None
    tenant_id: int | None = None

    def validate(self) -> None:
        """Raises :class:`InvalidRequest` naming the field."""
        if self.kind not in AllocationKind.values:
            raise InvalidRequest(f"kind must be one of {AllocationKind.values}", field="kind")
        if not isinstance(self.count, int) or not 1 <= self.count <= MAX_COUNT:
            raise InvalidRequest(f"count must be 1..{MAX_COUNT}", field="count")
        if len(set(self.gpu_ids)) != len(self.gpu_ids):
            raise InvalidRequest("gpu_ids names a GPU twice", field="gpu_ids")
        if self.lease_s is not None and not 0 < self.lease_s <= MAX_LEASE_S:
            raise InvalidRequest(f"lease_s must be in (0, {MAX_LEASE_S}]", field="lease_s")
        if len(self.job) > 128:
            raise InvalidRequest("job is at most 128 characters", field="job")
        if self.kind == AllocationKind.FRACTION:
            if self.count != 1:
                raise InvalidRequest("a fraction is one share of one GPU: count must be 1", field="count")
            if not self.memory_mib or self.memory_mib < 1:
                raise InvalidRequest("a fraction needs memory_mib ≥ 1", field="memory_mib")
            if not self.compute_pct or not 1 <= self.compute_pct <= 100:
                raise InvalidRequest("a fraction needs compute_pct in 1..100", field="compute_pct")
            if len(self.gpu_ids) > 1:
                raise InvalidRequest("a fraction is on one GPU: give at most one gpu_id", field="gpu_ids")
        else:
            if self.memory_mib is not None or self.compute_pct is not None:
                raise InvalidRequest("memory_mib/compute_pct are for kind 'fraction'", field="kind")
            if self.gpu_ids and len(self.gpu_ids) != self.count:
                raise InvalidRequest(
                    f"gpu_ids names {len(self.gpu_ids)} GPUs, count is {self.count}", field="gpu_ids"
                )
        if self.kind == AllocationKind.MIG and self.gpu_ids:
            raise InvalidRequest("MIG slices are chosen by profile, not gpu_ids", field="gpu_ids")
        if self.kind != AllocationKind.MIG and self.mig_profile:
            raise InvalidRequest("mig_profile is for kind 'mig'", field="mig_profile")


# --- reads ---------------------------------------------------------------------------------------


def eligible_gpus(pool: Pool):
    """Present, not unhealthy GPUs the pool may use (model and fabric filters), any state."""
    qs = Gpu.objects.present().exclude(health="unhealthy")
    if pool.gpu_model:
        qs = qs.filter(product_name__icontains=pool.gpu_model)
    if pool.fabric_id:
        qs = qs.filter(host__fabric_id=pool.fabric_id)
    return qs


def pool_capacity(pool: Pool, gpu_model: str = "") -> int:
    """The most whole GPUs ``pool`` can ever hold: its present GPUs matching its model and fabric
    filters (:func:`eligible_gpus`'s filters), whatever their state or health (a busy or unhealthy
    GPU may be free later), and whose product name also contains ``gpu_model`` (case-insensitive;
    a job's own filter) when given. One COUNT query."""
    qs = Gpu.objects.present()
    if pool.gpu_model:
        qs = qs.filter(product_name__icontains=pool.gpu_model)
    if pool.fabric_id:
        qs = qs.filter(host__fabric_id=pool.fabric_id)
    if gpu_model:
        qs = qs.filter(product_name__icontains=gpu_model)
    return qs.count()


def pool_usage(pool_id: int) -> dict[str, int]:
    """``{"gpus", "slices", "borrowed_gpus", "borrowed_slices"}`` the pool holds now: whole GPUs
    plus distinct GPUs with fractions, MIG slices; the borrowed part of each (the stored flags:
    ``max(0, gpus - guaranteed_gpus)`` and the same for slices, see the module docstring)."""
    items = AllocationItem.objects.filter(allocation__pool_id=pool_id, active=True)
    frac = Q(kind=AllocationKind.FRACTION)
    agg = items.aggregate(
        whole=Count("id", filter=Q(kind=AllocationKind.GPU)),
        slices=Count("id", filter=Q(kind=AllocationKind.MIG)),
        frac_gpus=Count("gpu", filter=frac, distinct=True),
        borrowed_whole=Count("id", filter=Q(kind=AllocationKind.GPU, borrowed=True)),
        borrowed_frac_gpus=Count("gpu", filter=frac & Q(borrowed=True), distinct=True),
        borrowed_slices=Count("id", filter=Q(kind=AllocationKind.MIG, borrowed=True)),
    )
    return {
        "gpus": agg["whole"] + agg["frac_gpus"],
        "slices": agg["slices"],
        "borrowed_gpus": agg["borrowed_whole"] + agg["borrowed_frac_gpus"],
        "borrowed_slices": agg["borrowed_slices"],
    }


def pool_summary(pool: Pool) -> dict[str, int]:
    """:func:`pool_usage` plus ``free_gpus``: free whole GPUs the pool's filters match now (free
    for every pool that matches them too)."""
    free = (
        eligible_gpus(pool)
        .filter(state=GpuState.FREE, mig_mode_current__in=["disabled", "unsupported"])
        .count()
    )
    return pool_usage(pool.pk) | {"free_gpus": free}


# --- allocate ------------------------------------------------------------------------------------

#: attempts at locking a request's pools: a request that must reclaim from pools it has not
#: locked starts again with them; the last attempt reclaims only from the pools it holds
_LOCK_ROUNDS = 3
#: MIG modes of GPUs handed out whole or in fractions
_NOT_MIG = ["disabled", "unsupported"]


class _MorePools(Exception):
    """Raised inside a request's transaction (which rolls back, releasing its locks) when it must
    reclaim from pools whose rows it does not hold; :func:`allocate` starts again with them."""

    def __init__(self, pool_ids: set[int]):
        super().__init__(sorted(pool_ids))
        self.pool_ids = pool_ids


@dataclass
class _Locked:
    """The pool rows one attempt holds (pk → row) and whether it is the last attempt."""

    pools: dict[int, Pool]
    last_round: bool

    def need(self, pool_ids: set[int]) -> None:
        """Raise :class:`_MorePools` for the pools of ``pool_ids`` not held (not in the last
        round: its candidates come from :meth:`restrict`, held pools only)."""
        missing = set(pool_ids) - set(self.pools)
        if missing and not self.last_round:
            raise _MorePools(missing)

    def restrict(self, qs, field: str = "pool"):
        """``qs`` limited to rows of held pools in the last round, unchanged before."""
        return qs.filter(**{f"{field}__in": list(self.pools)}) if self.last_round else qs


def _lock_pools(pool_ids: set[int]) -> dict[int, Pool]:
    """Lock these pool rows in pk order (one statement); returns the ones that exist, by pk."""
    rows = Pool.objects.select_for_update().filter(pk__in=sorted(pool_ids)).order_by("pk")
    return {p.pk: p for p in rows}


def allocate(
    pool_id: int, request: AllocationRequest, *, user=None, now: datetime | None = None
) -> Allocation:
    """Allocate ``request`` in pool ``pool_id``; return the active :class:`Allocation` (items
    created, GPUs/slices marked ``allocated``/``shared``), reclaiming borrowed allocations of
    other pools when the request is within the pool's guaranteed share (module docstring).

    Raises:
        InvalidRequest: bad input (400). QuotaExceeded, NotEnoughFree: refused, nothing written
            (409). Pool.DoesNotExist: no such pool.
    """
    request.validate()
    now = now or timezone.now()
    also: set[int] = set()
    for attempt in range(_LOCK_ROUNDS):
        try:
            with transaction.atomic():
                locked = _Locked(_lock_pools({pool_id} | also), last_round=attempt == _LOCK_ROUNDS - 1)
                if pool_id not in locked.pools:
                    raise Pool.DoesNotExist(f"no pool {pool_id}")
                return _allocate(locked.pools[pool_id], request, locked, user, now)
        except _MorePools as more:
            also |= more.pool_ids
    raise AssertionError("the last lock round never asks for more pools")  # pragma: no cover


def _created_event(
    pool: Pool, alloc: Allocation, tenant_id, gpu_ids: list[int], reclaimed_ids: list[int]
) -> EventSpec:
    """The ``allocation.created`` event of a new allocation (one shape for :func:`allocate` and
    :func:`allocate_many`)."""
    return EventSpec(
        code="allocation.created", object_type="pool", object_key=f"{pool.name}/{alloc.pk}",
        object_repr=str(alloc), message=f"{pool.name}: allocation {alloc.pk} of {_what(alloc)}"
        f"{' (borrowed)' if alloc.borrowed else ''}",
        details={"allocation": alloc.pk, "tenant": tenant_id, "kind": alloc.kind, "count": alloc.count,
                 "gpus": gpu_ids, "borrowed": alloc.borrowed, "reclaimed": reclaimed_ids},
        tenant_id=alloc.tenant_id,
    )  # fmt: skip


def _created_changes(pool: Pool, alloc: Allocation, gpu_ids: list[int], reclaimed_ids: list[int]) -> dict:
    """The ``allocation.create`` audit entry's changes (both allocation paths)."""
    return {
        "pool": pool.name, "kind": alloc.kind, "count": alloc.count, "gpus": gpu_ids, "job": alloc.job,
        "borrowed": alloc.borrowed, "lease_expires_at": _iso(alloc.lease_expires_at), "reclaimed": reclaimed_ids,
    }  # fmt: skip


def _allocate(pool: Pool, request: AllocationRequest, locked: _Locked, user, now: datetime) -> Allocation:
    tenant_id = _tenant_for(pool, request)
    usage = pool_usage(pool.pk)
    if request.kind == AllocationKind.GPU:
        picked, borrowed, reclaimed = _take_gpus(pool, request, usage, locked, now, user)
    elif request.kind == AllocationKind.MIG:
        picked, borrowed, reclaimed = _take_slices(pool, request, usage, locked, now, user)
    else:
        picked, borrowed, reclaimed = _take_fraction(pool, request, usage, locked, now, user)
    alloc = Allocation.objects.create(
        pool=pool, tenant_id=tenant_id, kind=request.kind, owner=user if _is_user(user) else None,
        job=request.job, state=AllocationState.ACTIVE, count=request.count, mig_profile=request.mig_profile,
        memory_mib=request.memory_mib, compute_pct=request.compute_pct, borrowed=any(borrowed),
        started_at=now, lease_expires_at=now + timedelta(seconds=request.lease_s) if request.lease_s else None,
    )  # fmt: skip
    items = []
    for row, is_borrowed in zip(picked, borrowed, strict=True):
        gpu = row.gpu if isinstance(row, MigSlice) else row
        items.append(AllocationItem(
            allocation=alloc, kind=request.kind, gpu=gpu, mig_slice=row if isinstance(row, MigSlice) else None,
            memory_mib=request.memory_mib, compute_pct=request.compute_pct, borrowed=is_borrowed,
        ))  # fmt: skip
    AllocationItem.objects.bulk_create(items)
    if request.kind == AllocationKind.GPU:
        Gpu.objects.filter(pk__in=[g.pk for g in picked]).update(state=GpuState.ALLOCATED)
    elif request.kind == AllocationKind.MIG:
        MigSlice.objects.filter(pk__in=[s.pk for s in picked]).update(state=GpuState.ALLOCATED)
    else:
        Gpu.objects.filter(pk__in=[g.pk for g in picked]).update(state=GpuState.SHARED)
    gpu_ids = sorted({i.gpu_id for i in items})
    fabric_id = _fabric_of(pool, picked)
    reclaimed_ids = [a.pk for a in reclaimed]
    record_events(
        Fabric(pk=fabric_id) if fabric_id else None,
        [_created_event(pool, alloc, tenant_id, gpu_ids, reclaimed_ids)],
        at=now,
    )
    audit.record("allocation.create", alloc, _created_changes(pool, alloc, gpu_ids, reclaimed_ids), user=user)
    _on_commit(alloc, gpu_ids, fabric_id)
    return alloc


# --- allocate in bulk -----------------------------------------------------------------------------


def allocate_many(
    requests: list[tuple[int, AllocationRequest]], *, user=None, now: datetime | None = None
) -> list[Allocation | AllocationError]:
    """Allocate many ``(pool_id, request)`` at once in one transaction (a scheduling pass binding
    its placements): returns, in order, each one's active :class:`Allocation` or the
    :class:`AllocationError` that refused it. A refused request changes nothing and does not
    stop the others; the same guarantees as :func:`allocate`, one by one in list order.

    Requests for named whole GPUs (``kind`` gpu with ``gpu_ids``, what a pass asks for) are done
    in bulk: the pools' rows locked once (pk order, the module's lock order), each pool's usage
    read once and carried across the batch (quota and borrowed flags as if the requests came one
    after the other), all the named GPUs locked in one statement (pk order) and checked free and
    eligible for their pool, a GPU named by two requests given to the first only; then the
    allocations, items, GPU states, events and audit entries (one per allocation) written with
    bulk inserts, and ``allocation_changed`` sent per allocation on commit. Named GPUs never
    reclaim (as in :func:`allocate`). Any other request goes through :func:`allocate` inside a
    savepoint, after the bulk ones.

    A missing pool is refused as :class:`InvalidRequest` (``field`` "pool"). Errors other than
    :class:`AllocationError` (the database) roll the whole batch back and propagate.
    """
    now = now or timezone.now()
    out: list[Allocation | AllocationError | None] = [None] * len(requests)
    bulk, single = [], []
    for i, (_pool_id, req) in enumerate(requests):
        try:
            req.validate()
        except InvalidRequest as exc:
            out[i] = exc
            continue
        (bulk if req.kind == AllocationKind.GPU and req.gpu_ids else single).append(i)
    with transaction.atomic():
        if bulk:
            _allocate_named([(i, *requests[i]) for i in bulk], out, user, now)
        for i in single:
            pool_id, req = requests[i]
            try:
                with transaction.atomic():
                    out[i] = allocate(pool_id, req, user=user, now=now)
            except AllocationError as exc:
                out[i] = exc
            except Pool.DoesNotExist:
                out[i] = InvalidRequest(f"no pool {pool_id}", field="pool")
    return out  # type: ignore[return-value]


def _allocate_named(batch: list[tuple[int, int, AllocationRequest]], out: list, user, now: datetime) -> None:
    """The bulk part of :func:`allocate_many` (its docstring), in the caller's transaction;
    writes each request's result into ``out`` at its index."""
    pools = _lock_pools({pool_id for _, pool_id, _ in batch})
    # a pool without quota or guarantee needs no usage: nothing to check, all it holds is borrowed
    usage = {
        pk: pool_usage(pk) if p.quota_gpus is not None or p.guaranteed_gpus else {"gpus": 0}
        for pk, p in pools.items()
    }
    wanted = sorted({g for _, _, req in batch for g in req.gpu_ids})
    gpus = dict(  # GPU id → its host id (locked: pk order; ``__any``: one array parameter)
        Gpu.objects.select_for_update().filter(pk__any=wanted).order_by("pk").values_list("pk", "host_id")
    )
    # GPUs free and eligible, read once per distinct pool filter (model, fabric)
    filters: dict[tuple[str, int | None], list[int]] = {}
    for pool_id, pool in pools.items():
        filters.setdefault((pool.gpu_model, pool.fabric_id), []).append(pool_id)
    free: dict[int, set[int]] = {}
    for pool_ids in filters.values():
        mine = sorted({g for _, p, req in batch if p in pool_ids for g in req.gpu_ids})
        ok = set(
            eligible_gpus(pools[pool_ids[0]]).filter(pk__any=mine, state=GpuState.FREE, mig_mode_current__in=_NOT_MIG)
            .values_list("pk", flat=True)
        )  # fmt: skip
        free.update(dict.fromkeys(pool_ids, ok))
    taken: set[int] = set()
    plans = []
    for i, pool_id, req in batch:
        pool = pools.get(pool_id)
        try:
            if pool is None:
                raise InvalidRequest(f"no pool {pool_id}", field="pool")
            tenant_id = _tenant_for(pool, req)
            _check_quota(pool, "gpus", usage[pool_id]["gpus"], req.count)
            unknown = sorted(g for g in req.gpu_ids if g not in gpus)
            if unknown:
                raise InvalidRequest(f"no GPU with id {unknown}", field="gpu_ids")
            busy = sorted(g for g in req.gpu_ids if g not in free[pool_id] or g in taken)
            if busy:
                raise NotEnoughFree(f"GPUs {busy} are not free for pool {pool.name}", gpus=busy)
        except AllocationError as exc:
            out[i] = exc
            continue
        flags = _borrowed_flags(pool.guaranteed_gpus, usage[pool_id]["gpus"], req.count)
        usage[pool_id]["gpus"] += req.count
        taken.update(req.gpu_ids)
        plans.append((i, pool, req, tenant_id, sorted(req.gpu_ids), flags))
    if not plans:
        return
    owner = user if _is_user(user) else None
    allocs = create_objects(
        [
            Allocation(
                pool=pool, tenant_id=tenant_id, kind=AllocationKind.GPU, owner=owner, job=req.job,
                state=AllocationState.ACTIVE, count=req.count, borrowed=any(flags), started_at=now,
                lease_expires_at=now + timedelta(seconds=req.lease_s) if req.lease_s else None,
            )
            for _, pool, req, tenant_id, _, flags in plans
        ],
    )  # fmt: skip
    insert_rows(  # plain tuples (thousands of items in a pass: no model instance each)
        AllocationItem,
        [
            "allocation_id",
            "kind",
            "gpu_id",
            "mig_slice_id",
            "memory_mib",
            "compute_pct",
            "borrowed",
            "active",
        ],
        [
            (alloc.pk, AllocationKind.GPU.value, g, None, None, None, b, True)
            for alloc, (*_, ids, flags) in zip(allocs, plans, strict=True)
            for g, b in zip(ids, flags, strict=True)
        ],
    )
    Gpu.objects.filter(pk__any=sorted(taken)).update(state=GpuState.ALLOCATED)
    host_fabric = dict(
        Host.objects.filter(pk__any=sorted({gpus[g] for g in taken})).values_list("pk", "fabric_id")
    )
    by_fabric: dict[int | None, list[EventSpec]] = {}
    audits = []
    for alloc, (i, pool, _req, tenant_id, ids, _) in zip(allocs, plans, strict=True):
        out[i] = alloc
        fabric_id = pool.fabric_id or host_fabric.get(gpus[ids[0]])
        by_fabric.setdefault(fabric_id, []).append(_created_event(pool, alloc, tenant_id, ids, []))
        audits.append(("allocation.create", alloc, _created_changes(pool, alloc, ids, [])))
        _on_commit(alloc, ids, fabric_id)
    for fabric_id, specs in by_fabric.items():
        record_events(Fabric(pk=fabric_id) if fabric_id else None, specs, at=now)
    audit.record_many(audits, user=user)


def _is_user(user) -> bool:
    return user is not None and getattr(user, "is_authenticated", False)


def _tenant_for(pool: Pool, request: AllocationRequest) -> int:
    if pool.tenant_id is not None:
        if request.tenant_id not in (None, pool.tenant_id):
            raise InvalidRequest(f"pool {pool.name} belongs to another tenant", field="tenant")
        return pool.tenant_id
    if request.tenant_id is None:
        raise InvalidRequest(f"pool {pool.name} is shared: name the tenant to allocate for", field="tenant")
    if not Tenant.objects.filter(pk=request.tenant_id).exists():
        raise InvalidRequest(f"no tenant {request.tenant_id}", field="tenant")
    return request.tenant_id


def _check_quota(pool: Pool, unit: str, used: int, more: int) -> None:
    quota = pool.quota_gpus if unit == "gpus" else pool.quota_slices
    if quota is not None and used + more > quota:
        raise QuotaExceeded(
            f"pool {pool.name}: {used} {unit} held + {more} asked > quota {quota}",
            unit=unit, quota=quota, used=used, requested=more,
        )  # fmt: skip


def _borrowed_flags(guaranteed: int, used: int, n: int) -> list[bool]:
    """Flags of ``n`` new units after the ``used`` a pool holds: the unit at place ``p``
    (0-based, oldest first) is borrowed when ``p >= guaranteed`` (the rule :func:`_rebalance`
    applies to a whole pool)."""
    return [used + i >= guaranteed for i in range(n)]


def _take_gpus(pool: Pool, request: AllocationRequest, usage: dict, locked: _Locked, now, user):
    n = request.count
    _check_quota(pool, "gpus", usage["gpus"], n)
    free = eligible_gpus(pool).filter(state=GpuState.FREE, mig_mode_current__in=_NOT_MIG)
    reclaimed: list[Allocation] = []
    if request.gpu_ids:
        rows = list(Gpu.objects.select_for_update().filter(pk__in=request.gpu_ids).order_by("pk"))
        if len(rows) != n:
            unknown = sorted(set(request.gpu_ids) - {g.pk for g in rows})
            raise InvalidRequest(f"no GPU with id {unknown}", field="gpu_ids")
        ok = set(free.filter(pk__in=request.gpu_ids).values_list("pk", flat=True))
        taken = [g.pk for g in rows if g.pk not in ok]
        if taken:
            raise NotEnoughFree(f"GPUs {taken} are not free for pool {pool.name}", gpus=taken)
    else:
        rows = list(free.select_for_update(skip_locked=True, of=("self",)).order_by("pk")[:n])
        if len(rows) < n and usage["gpus"] + n <= pool.guaranteed_gpus:
            usable = eligible_gpus(pool).filter(mig_mode_current__in=_NOT_MIG)
            reclaimed = _reclaim_units(
                pool, AllocationKind.GPU, Q(items__gpu__in=usable), n - len(rows), locked, now, user
            )
            if reclaimed:
                rows = list(free.select_for_update(skip_locked=True, of=("self",)).order_by("pk")[:n])
        if len(rows) < n:
            raise NotEnoughFree(
                f"pool {pool.name}: {n} GPUs asked, {len(rows)} free", requested=n, available=len(rows)
            )
    return rows, _borrowed_flags(pool.guaranteed_gpus, usage["gpus"], n), reclaimed


def _take_slices(pool: Pool, request: AllocationRequest, usage: dict, locked: _Locked, now, user):
    n = request.count
    _check_quota(pool, "slices", usage["slices"], n)
    usable = MigSlice.objects.present().exclude(gpu__health="unhealthy").filter(gpu__in=eligible_gpus(pool))
    if request.mig_profile:
        usable = usable.filter(profile=request.mig_profile)

    def free_rows() -> list[MigSlice]:
        qs = usable.filter(state=GpuState.FREE).select_related("gpu")
        return list(qs.select_for_update(skip_locked=True, of=("self",)).order_by("pk")[:n])

    rows, reclaimed = free_rows(), []
    if len(rows) < n and usage["slices"] + n <= pool.guaranteed_slices:
        reclaimed = _reclaim_units(
            pool, AllocationKind.MIG, Q(items__mig_slice__in=usable), n - len(rows), locked, now, user
        )
        if reclaimed:
            rows = free_rows()
    if len(rows) < n:
        raise NotEnoughFree(
            f"pool {pool.name}: {n} MIG slices{' ' + request.mig_profile if request.mig_profile else ''} asked, "
            f"{len(rows)} free", requested=n, available=len(rows),
        )  # fmt: skip
    return rows, _borrowed_flags(pool.guaranteed_slices, usage["slices"], n), reclaimed


def gpu_capacity(gpu: Gpu) -> int | None:
    """Memory a GPU can share out, MiB: total minus the driver's reserve (None: unknown)."""
    if gpu.memory_total_mib is None:
        return None
    return gpu.memory_total_mib - (gpu.memory_reserved_mib or 0)


def _fraction_use(gpu_ids: list[int]) -> dict[int, tuple[int, int]]:
    rows = (
        AllocationItem.objects.filter(gpu_id__in=gpu_ids, active=True, kind=AllocationKind.FRACTION)
        .values("gpu_id")
        .annotate(mem=Sum("memory_mib"), pct=Sum("compute_pct"))
    )
    return {r["gpu_id"]: (r["mem"] or 0, r["pct"] or 0) for r in rows}


def _fits(cap: int | None, used: tuple[int, int], mem: int, pct: int) -> bool:
    return cap is not None and used[0] + mem <= cap and used[1] + pct <= 100


def _take_fraction(pool: Pool, request: AllocationRequest, usage: dict, locked: _Locked, now, user):
    """One GPU that fits the fraction: an already shared GPU first (packing), then a free one;
    else, within the pool's guarantee, one made room on by reclaiming (:func:`_fraction_plan`)."""
    mem, pct = request.memory_mib, request.compute_pct
    base = eligible_gpus(pool).filter(
        state__in=[GpuState.FREE, GpuState.SHARED], mig_mode_current__in=_NOT_MIG, memory_total_mib__gte=mem,
    )  # fmt: skip
    if request.gpu_ids:
        rounds = [list(Gpu.objects.select_for_update().filter(pk__in=request.gpu_ids))]
        if not rounds[0]:
            raise InvalidRequest(f"no GPU with id {request.gpu_ids}", field="gpu_ids")
        ok = set(base.filter(pk__in=request.gpu_ids).values_list("pk", flat=True))
        rounds[0] = [g for g in rounds[0] if g.pk in ok]
    else:
        rounds = None
    # the pool's fraction GPUs and their unit's flag (every fraction of one GPU shares it)
    held = dict(
        AllocationItem.objects.filter(
            allocation__pool=pool, active=True, kind=AllocationKind.FRACTION
        ).values_list("gpu_id", "borrowed")
    )

    def take(gpu: Gpu):
        more = 0 if gpu.pk in held else 1
        _check_quota(pool, "gpus", usage["gpus"], more)
        borrowed = (
            held[gpu.pk] if gpu.pk in held else _borrowed_flags(pool.guaranteed_gpus, usage["gpus"], 1)[0]
        )
        return [gpu], [borrowed]

    for state in [GpuState.SHARED, GpuState.FREE] if rounds is None else [None]:
        candidates = (
            rounds[0] if rounds is not None
            else list(base.filter(state=state).select_for_update(skip_locked=True, of=("self",))
                      .order_by("pk")[:_FRACTION_BATCH])
        )  # fmt: skip
        use = _fraction_use([g.pk for g in candidates])
        for gpu in candidates:
            if _fits(gpu_capacity(gpu), use.get(gpu.pk, (0, 0)), mem, pct):
                return (*take(gpu), [])
    if rounds is None and usage["gpus"] + 1 <= pool.guaranteed_gpus:
        plan = _fraction_plan(pool, mem, pct, locked)
        if plan is not None:
            target, victims, pools = plan
            locked.need(pools)
            reclaimed = _end_reclaimed(pool, victims, now, user)
            gpu = base.filter(pk=target).select_for_update(of=("self",)).first()
            if gpu is not None and _fits(
                gpu_capacity(gpu), _fraction_use([gpu.pk]).get(gpu.pk, (0, 0)), mem, pct
            ):
                return (*take(gpu), reclaimed)
    raise NotEnoughFree(
        f"pool {pool.name}: no GPU has {mem} MiB and {pct} % compute free", memory_mib=mem, compute_pct=pct
    )


# --- reclaim -------------------------------------------------------------------------------------


def _reclaim_units(
    pool: Pool, kind: str, usable: Q, shortfall: int, locked: _Locked, now, user
) -> list[Allocation]:
    """End borrowed ``kind`` allocations of other pools holding what ``pool`` may use
    (``usable``: a condition on their items), lowest priority weight then newest first, until
    they free ``shortfall`` GPUs or slices; nothing when all of them would not free enough."""
    qs = Allocation.objects.filter(state=AllocationState.ACTIVE, kind=kind, borrowed=True).exclude(pool=pool)
    candidates = (
        locked.restrict(qs).filter(Q(items__active=True) & usable).annotate(n=Count("items"))
        .order_by("pool__priority_weight", "-id").values_list("pk", "pool_id", "n")
    )  # fmt: skip
    chosen, pools, freed = [], set(), 0
    for pk, pool_id, n in candidates:
        if freed >= shortfall:
            break
        chosen.append(pk)
        pools.add(pool_id)
        freed += n
    if freed < shortfall:
        return []
    locked.need(pools)
    return _end_reclaimed(pool, chosen, now, user)


class _Share(NamedTuple):
    """A fraction on a shared GPU, as :func:`_fraction_plan` weighs it."""

    gpu_id: int
    total_mib: int
    reserved_mib: int | None
    allocation_id: int
    pool_id: int
    borrowed: bool
    weight: int
    memory_mib: int
    compute_pct: int


def _fraction_plan(pool: Pool, mem: int, pct: int, locked: _Locked) -> tuple[int, list[int], set[int]] | None:
    """How to make room for a fraction (``mem`` MiB, ``pct`` %) on one GPU ``pool`` may use, by
    reclaiming: ``(gpu pk, allocation pks to reclaim, their pools)``, or None. The ways: a
    borrowed whole-GPU allocation of another pool holding a GPU big enough (ending it frees the
    GPU), or on a shared GPU the borrowed fractions of other pools, lowest weight then newest
    first, until the fraction fits. The cheapest way wins: the lowest highest weight among those
    reclaimed, then the fewest, then the newest. In the last lock round only allocations of held
    pools are candidates (``locked``)."""
    gpus = eligible_gpus(pool).filter(mig_mode_current__in=_NOT_MIG, memory_total_mib__gte=mem)
    items = AllocationItem.objects.filter(active=True, allocation__state=AllocationState.ACTIVE, gpu__in=gpus)
    plans: list[tuple[tuple, int, list[int], set[int]]] = []
    whole = locked.restrict(
        items.filter(kind=AllocationKind.GPU, allocation__borrowed=True).exclude(allocation__pool=pool),
        "allocation__pool",
    )
    for alloc_id, pool_id, weight, gpu_id, total, reserved in whole.values_list(
        "allocation_id", "allocation__pool_id", "allocation__pool__priority_weight", "gpu_id",
        "gpu__memory_total_mib", "gpu__memory_reserved_mib",
    ):  # fmt: skip
        if _fits(total - (reserved or 0), (0, 0), mem, pct):
            plans.append(((weight, 1, -alloc_id), gpu_id, [alloc_id], {pool_id}))
    by_gpu: dict[int, list[_Share]] = {}
    fractions = items.filter(kind=AllocationKind.FRACTION, gpu__state=GpuState.SHARED)
    for row in fractions.values_list(
        "gpu_id", "gpu__memory_total_mib", "gpu__memory_reserved_mib", "allocation_id", "allocation__pool_id",
        "allocation__borrowed", "allocation__pool__priority_weight", "memory_mib", "compute_pct",
    ):  # fmt: skip
        share = _Share(*row)
        by_gpu.setdefault(share.gpu_id, []).append(share)
    may = set(locked.pools) if locked.last_round else None
    for gpu_id, shares in by_gpu.items():
        cap = shares[0].total_mib - (shares[0].reserved_mib or 0)
        mem_used = sum(s.memory_mib or 0 for s in shares)
        pct_used = sum(s.compute_pct or 0 for s in shares)
        others = sorted(
            (s for s in shares if s.borrowed and s.pool_id != pool.pk and (may is None or s.pool_id in may)),
            key=lambda s: (s.weight, -s.allocation_id),
        )
        victims: list[_Share] = []
        while others and not _fits(cap, (mem_used, pct_used), mem, pct):
            victim = others.pop(0)
            victims.append(victim)
            mem_used -= victim.memory_mib or 0
            pct_used -= victim.compute_pct or 0
        if victims and _fits(cap, (mem_used, pct_used), mem, pct):
            key = (max(s.weight for s in victims), len(victims), -max(s.allocation_id for s in victims))
            plans.append((key, gpu_id, [s.allocation_id for s in victims], {s.pool_id for s in victims}))
    if not plans:
        return None
    _, gpu_id, victims, pools = min(plans, key=lambda p: p[0])
    return gpu_id, victims, pools


def _pool_seen_by(pool: Pool, tenant_id: int | None) -> str:
    """``pool`` as a message for tenant ``tenant_id`` says it: by name when it is that tenant's
    or shared, else "another tenant's pool" (issue 22: an event of one tenant named another's)."""
    if pool.tenant_id is None or pool.tenant_id == tenant_id:
        return f"pool {pool.name}"
    return "another tenant's pool"


def _end_reclaimed(pool: Pool, allocation_ids: list[int], now, user) -> list[Allocation]:
    """Lock these allocations (pk order), then all their GPUs (pk order, one statement), and end
    the ones still active as reclaimed for ``pool``; their pools' rows are held by the caller."""
    if not allocation_ids:
        return []
    allocs = list(
        Allocation.objects.select_for_update(of=("self",))
        .select_related("pool")
        .filter(pk__in=allocation_ids, state=AllocationState.ACTIVE)
        .order_by("pk")
    )
    gpu_ids = AllocationItem.objects.filter(allocation__in=allocs, active=True).values("gpu_id")
    list(Gpu.objects.select_for_update().filter(pk__in=gpu_ids).order_by("pk").only("pk"))
    for alloc in allocs:
        _end(
            alloc,
            AllocationState.RECLAIMED,
            now,
            user,
            # the victim's tenant reads this (its allocation's event): another tenant's pool unnamed
            reason=f"reclaimed for the guaranteed share of {_pool_seen_by(pool, alloc.tenant_id)}",
        )
    return allocs


# --- borrowed flags ------------------------------------------------------------------------------


def _rebalance(pool: Pool) -> dict[int, bool]:
    """Re-mark the active items and allocations of ``pool`` (its row locked by the caller)
    borrowed or guaranteed by the rule of the module docstring (first ``guaranteed_*`` units,
    oldest first, guaranteed); writes only the rows whose flag changes. Returns ``{allocation
    pk: borrowed}`` of the allocations whose flag changed."""
    rows = (
        AllocationItem.objects.filter(allocation__pool=pool, active=True)
        .order_by("allocation_id", "pk")
        .values_list("pk", "allocation_id", "kind", "gpu_id", "borrowed", "allocation__borrowed")
    )
    gpu_units = slice_units = 0
    frac_unit: dict[int, bool] = {}
    flip: dict[bool, list[int]] = {True: [], False: []}
    alloc_now: dict[int, bool] = {}
    alloc_was: dict[int, bool] = {}
    for pk, alloc_id, kind, gpu_id, was, alloc_flag in rows:
        if kind == AllocationKind.MIG:
            borrowed = slice_units >= pool.guaranteed_slices
            slice_units += 1
        elif kind == AllocationKind.FRACTION:
            if gpu_id not in frac_unit:
                frac_unit[gpu_id] = gpu_units >= pool.guaranteed_gpus
                gpu_units += 1
            borrowed = frac_unit[gpu_id]
        else:
            borrowed = gpu_units >= pool.guaranteed_gpus
            gpu_units += 1
        if borrowed != was:
            flip[borrowed].append(pk)
        alloc_now[alloc_id] = alloc_now.get(alloc_id, False) or borrowed
        alloc_was[alloc_id] = alloc_flag
    for flag, pks in flip.items():
        if pks:
            AllocationItem.objects.filter(pk__in=pks).update(borrowed=flag)
    changed = {a: b for a, b in alloc_now.items() if b != alloc_was[a]}
    for flag in (True, False):
        pks = [a for a, b in changed.items() if b == flag]
        if pks:
            Allocation.objects.filter(pk__in=pks).update(borrowed=flag)
    return changed


def _remarked(changed: dict[int, bool]) -> dict[str, Any]:
    """The audit details of re-marked allocations (empty when none changed)."""
    if not changed:
        return {}
    return {"remarked": {"borrowed": sorted(a for a, b in changed.items() if b),
                         "guaranteed": sorted(a for a, b in changed.items() if not b)}}  # fmt: skip


def rebalance_borrowed(pool_id: int, *, user=None) -> dict[int, bool]:
    """Re-mark pool ``pool_id``'s active items and allocations borrowed or guaranteed (after its
    ``guaranteed_*`` changed, or to repair flags): one transaction holding the pool's row,
    audited as ``pool.borrowed`` when an allocation's flag changed. Returns ``{allocation pk:
    borrowed}`` of those.

    Raises:
        Pool.DoesNotExist: no such pool.
    """
    with transaction.atomic():
        pool = _lock_pools({pool_id}).get(pool_id)
        if pool is None:
            raise Pool.DoesNotExist(f"no pool {pool_id}")
        changed = _rebalance(pool)
        if changed:
            audit.record("pool.borrowed", pool, _remarked(changed), user=user)
    return changed


# --- release, expiry -----------------------------------------------------------------------------


def _lock_for_end(allocation_id: int, **match) -> Allocation | None:
    """Lock allocation ``allocation_id``'s pool row, then the allocation (the module's lock
    order; an allocation never changes pool); None when it does not exist or no longer
    matches ``match`` (field lookups) once locked."""
    if Pool.objects.select_for_update(of=("self",)).filter(allocations__pk=allocation_id).first() is None:
        return None
    return (
        Allocation.objects.select_for_update(of=("self",))
        .select_related("pool")
        .filter(pk=allocation_id, **match)
        .first()
    )


def release(allocation_id: int, *, user=None, reason: str = "", now: datetime | None = None) -> Allocation:
    """End an allocation as ``released``, free its GPUs/slices/fraction and re-mark its pool's
    borrowed items.

    Raises:
        NotHolding: it has already ended (409). Allocation.DoesNotExist: no such allocation.
    """
    now = now or timezone.now()
    with transaction.atomic():
        alloc = _lock_for_end(allocation_id)
        if alloc is None:
            raise Allocation.DoesNotExist(f"no allocation {allocation_id}")
        if alloc.state not in HOLDING_STATES:
            raise NotHolding(f"allocation {alloc.pk} is {alloc.state}", state=alloc.state)
        _end(alloc, AllocationState.RELEASED, now, user, reason=reason or "released")
    return alloc


def expire_leases(now: datetime | None = None, limit: int = 1000) -> dict[str, int]:
    """End active allocations whose lease ran out as ``expired``, each in its own transaction
    (pool row, then the allocation, re-checked once locked: one released meanwhile is skipped).
    Returns ``{"expired": n}``."""
    now = now or timezone.now()
    due = list(
        Allocation.objects.filter(state=AllocationState.ACTIVE, lease_expires_at__lte=now)
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )
    expired = 0
    for pk in due:
        with transaction.atomic():
            alloc = _lock_for_end(pk, state=AllocationState.ACTIVE, lease_expires_at__lte=now)
            if alloc is None:
                continue
            _end(
                alloc,
                AllocationState.EXPIRED,
                now,
                None,
                reason=f"lease expired at {_iso(alloc.lease_expires_at)}",
            )
            expired += 1
    return {"expired": expired}


_END_EVENT = {
    AllocationState.RELEASED: "allocation.released",
    AllocationState.EXPIRED: "allocation.expired",
    AllocationState.RECLAIMED: "allocation.reclaimed",
}


def _end(alloc: Allocation, state: str, now, user, *, reason: str) -> None:
    """Free a locked, holding allocation's items (GPUs in pk order), re-mark its pool's borrowed
    items (the caller holds the pool's row) and record the end."""
    items = list(alloc.items.filter(active=True).order_by("gpu_id", "pk"))
    gpu_ids = sorted({i.gpu_id for i in items})
    gpus = list(
        Gpu.objects.select_for_update(of=("self",))
        .select_related("host")
        .filter(pk__in=gpu_ids)
        .order_by("pk")
    )
    alloc.items.filter(active=True).update(active=False)
    if alloc.kind == AllocationKind.GPU:
        Gpu.objects.filter(pk__in=gpu_ids).update(state=GpuState.FREE)
    elif alloc.kind == AllocationKind.MIG:
        MigSlice.objects.filter(pk__in=[i.mig_slice_id for i in items]).update(state=GpuState.FREE)
    else:
        still = set(_fraction_use(gpu_ids))
        Gpu.objects.filter(pk__in=[g for g in gpu_ids if g not in still]).update(state=GpuState.FREE)
    before = alloc.state
    alloc.state, alloc.ended_at, alloc.end_reason = state, now, reason[:200]
    alloc.save(update_fields=["state", "ended_at", "end_reason"])
    # ending only borrowed units moves no unit across the guarantee (those after them were borrowed
    # and stay at or past it): the pool's flags change only when a guaranteed unit is freed
    remarked = _rebalance(alloc.pool) if not all(i.borrowed for i in items) else {}
    fabric_id = alloc.pool.fabric_id or (gpus[0].host.fabric_id if gpus else None)
    record_events(Fabric(pk=fabric_id) if fabric_id else None, [EventSpec(
        code=_END_EVENT[state], object_type="pool", object_key=f"{alloc.pool.name}/{alloc.pk}", object_repr=str(alloc),
        message=f"{alloc.pool.name}: allocation {alloc.pk} {state} ({reason})",
        details={"allocation": alloc.pk, "gpus": gpu_ids, "reason": reason}, tenant_id=alloc.tenant_id,
    )], at=now)  # fmt: skip
    audit.record(f"allocation.{state}", alloc,
                 {"state": [before, state], "gpus": gpu_ids, "reason": reason, **_remarked(remarked)},
                 user=user)  # fmt: skip
    _on_commit(alloc, gpu_ids, fabric_id)


# --- helpers -------------------------------------------------------------------------------------


def _fabric_of(pool: Pool, picked) -> int | None:
    if pool.fabric_id:
        return pool.fabric_id
    if not picked:
        return None
    gpu = picked[0].gpu if isinstance(picked[0], MigSlice) else picked[0]
    return Gpu.objects.filter(pk=gpu.pk).values_list("host__fabric_id", flat=True).first()


def _what(alloc: Allocation) -> str:
    if alloc.kind == AllocationKind.FRACTION:
        return f"{alloc.memory_mib} MiB + {alloc.compute_pct} % of one GPU"
    unit = "GPU" if alloc.kind == AllocationKind.GPU else f"MIG slice {alloc.mig_profile}".rstrip()
    return f"{alloc.count} {unit}{'s' if alloc.count != 1 else ''}"


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def _on_commit(alloc: Allocation, gpu_ids: list[int], fabric_id: int | None) -> None:
    payload = {"allocation": alloc.pk, "pool": alloc.pool_id, "tenant": alloc.tenant_id, "state": alloc.state,
               "gpus": gpu_ids}  # fmt: skip
    partition_id = alloc.pool.partition_id  # read under the pool's row lock (every caller holds it)

    def send() -> None:
        allocation_changed.send(sender=Allocation, allocation_id=alloc.pk, pool_id=alloc.pool_id,
                                state=payload["state"], gpu_ids=gpu_ids, pool_partition_id=partition_id)  # fmt: skip
        publish(group_name("pools", "all"), "allocation.changed", payload)

    transaction.on_commit(send)
