"""Allocating one request: :func:`allocate` (whole GPUs, MIG slices or a fraction; by count or
named GPUs), one transaction holding the pool rows in the service's lock order, reclaiming when the
request is within the pool's guaranteed share (a request that finds it must reclaim from pools it
has not locked starts again with them, at most :data:`_LOCK_ROUNDS` times).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts import audit
from events.services import record_events
from fabric.models import Fabric

from ...choices import AllocationKind, AllocationState, GpuState
from ...models import Allocation, AllocationItem, Gpu, MigSlice, Pool
from .common import (
    Locked,
    MorePools,
    borrowed_flags,
    check_quota,
    created_changes,
    created_event,
    fabric_of,
    is_user,
    lock_pools,
    on_commit,
    tenant_for,
)
from .reclaim import end_reclaimed, fraction_plan, reclaim_units
from .request import AllocationRequest, InvalidRequest, NotEnoughFree
from .usage import NOT_MIG, eligible_gpus, fits, fraction_use, gpu_capacity, pool_usage

#: free GPUs looked at per round when placing a fraction
_FRACTION_BATCH = 32


#: attempts at locking a request's pools: a request that must reclaim from pools it has not
#: locked starts again with them; the last attempt reclaims only from the pools it holds
_LOCK_ROUNDS = 3


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
                locked = Locked(lock_pools({pool_id} | also), last_round=attempt == _LOCK_ROUNDS - 1)
                if pool_id not in locked.pools:
                    raise Pool.DoesNotExist(f"no pool {pool_id}")
                return _allocate(locked.pools[pool_id], request, locked, user, now)
        except MorePools as more:
            also |= more.pool_ids
    raise AssertionError("the last lock round never asks for more pools")  # pragma: no cover


def _allocate(pool: Pool, request: AllocationRequest, locked: Locked, user, now: datetime) -> Allocation:
    tenant_id = tenant_for(pool, request)
    usage = pool_usage(pool.pk)
    if request.kind == AllocationKind.GPU:
        picked, borrowed, reclaimed = _take_gpus(pool, request, usage, locked, now, user)
    elif request.kind == AllocationKind.MIG:
        picked, borrowed, reclaimed = _take_slices(pool, request, usage, locked, now, user)
    else:
        picked, borrowed, reclaimed = _take_fraction(pool, request, usage, locked, now, user)
    alloc = Allocation.objects.create(
        pool=pool, tenant_id=tenant_id, kind=request.kind, owner=user if is_user(user) else None,
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
    fabric_id = fabric_of(pool, picked)
    reclaimed_ids = [a.pk for a in reclaimed]
    record_events(
        Fabric(pk=fabric_id) if fabric_id else None,
        [created_event(pool, alloc, tenant_id, gpu_ids, reclaimed_ids)],
        at=now,
    )
    audit.record("allocation.create", alloc, created_changes(pool, alloc, gpu_ids, reclaimed_ids), user=user)
    on_commit(alloc, gpu_ids, fabric_id)
    return alloc


def _take_gpus(pool: Pool, request: AllocationRequest, usage: dict, locked: Locked, now, user):
    n = request.count
    check_quota(pool, "gpus", usage["gpus"], n)
    free = eligible_gpus(pool).filter(state=GpuState.FREE, mig_mode_current__in=NOT_MIG)
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
            usable = eligible_gpus(pool).filter(mig_mode_current__in=NOT_MIG)
            reclaimed = reclaim_units(
                pool, AllocationKind.GPU, Q(items__gpu__in=usable), n - len(rows), locked, now, user
            )
            if reclaimed:
                rows = list(free.select_for_update(skip_locked=True, of=("self",)).order_by("pk")[:n])
        if len(rows) < n:
            raise NotEnoughFree(
                f"pool {pool.name}: {n} GPUs asked, {len(rows)} free", requested=n, available=len(rows)
            )
    return rows, borrowed_flags(pool.guaranteed_gpus, usage["gpus"], n), reclaimed


def _take_slices(pool: Pool, request: AllocationRequest, usage: dict, locked: Locked, now, user):
    n = request.count
    check_quota(pool, "slices", usage["slices"], n)
    usable = MigSlice.objects.present().exclude(gpu__health="unhealthy").filter(gpu__in=eligible_gpus(pool))
    if request.mig_profile:
        usable = usable.filter(profile=request.mig_profile)

    def free_rows() -> list[MigSlice]:
        qs = usable.filter(state=GpuState.FREE).select_related("gpu")
        return list(qs.select_for_update(skip_locked=True, of=("self",)).order_by("pk")[:n])

    rows, reclaimed = free_rows(), []
    if len(rows) < n and usage["slices"] + n <= pool.guaranteed_slices:
        reclaimed = reclaim_units(
            pool, AllocationKind.MIG, Q(items__mig_slice__in=usable), n - len(rows), locked, now, user
        )
        if reclaimed:
            rows = free_rows()
    if len(rows) < n:
        raise NotEnoughFree(
            f"pool {pool.name}: {n} MIG slices{' ' + request.mig_profile if request.mig_profile else ''} asked, "
            f"{len(rows)} free", requested=n, available=len(rows),
        )  # fmt: skip
    return rows, borrowed_flags(pool.guaranteed_slices, usage["slices"], n), reclaimed


def _take_fraction(pool: Pool, request: AllocationRequest, usage: dict, locked: Locked, now, user):
    """One GPU that fits the fraction: an already shared GPU first (packing), then a free one;
    else, within the pool's guarantee, one made room on by reclaiming (:func:`fraction_plan`)."""
    mem, pct = request.memory_mib, request.compute_pct
    base = eligible_gpus(pool).filter(
        state__in=[GpuState.FREE, GpuState.SHARED], mig_mode_current__in=NOT_MIG, memory_total_mib__gte=mem,
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
        check_quota(pool, "gpus", usage["gpus"], more)
        borrowed = (
            held[gpu.pk] if gpu.pk in held else borrowed_flags(pool.guaranteed_gpus, usage["gpus"], 1)[0]
        )
        return [gpu], [borrowed]

    for state in [GpuState.SHARED, GpuState.FREE] if rounds is None else [None]:
        candidates = (
            rounds[0] if rounds is not None
            else list(base.filter(state=state).select_for_update(skip_locked=True, of=("self",))
                      .order_by("pk")[:_FRACTION_BATCH])
        )  # fmt: skip
        use = fraction_use([g.pk for g in candidates])
        for gpu in candidates:
            if fits(gpu_capacity(gpu), use.get(gpu.pk, (0, 0)), mem, pct):
                return (*take(gpu), [])
    if rounds is None and usage["gpus"] + 1 <= pool.guaranteed_gpus:
        plan = fraction_plan(pool, mem, pct, locked)
        if plan is not None:
            target, victims, pools = plan
            locked.need(pools)
            reclaimed = end_reclaimed(pool, victims, now, user)
            gpu = base.filter(pk=target).select_for_update(of=("self",)).first()
            if gpu is not None and fits(
                gpu_capacity(gpu), fraction_use([gpu.pk]).get(gpu.pk, (0, 0)), mem, pct
            ):
                return (*take(gpu), reclaimed)
    raise NotEnoughFree(
        f"pool {pool.name}: no GPU has {mem} MiB and {pct} % compute free", memory_mib=mem, compute_pct=pct
    )
