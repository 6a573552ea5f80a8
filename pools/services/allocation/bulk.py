"""Allocating a batch: :func:`allocate_many` (a scheduling pass's placements) in one transaction with
the guarantees of :func:`~.grant.allocate`, request by request in list order; named whole GPUs are
locked, checked and written in bulk.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from accounts import audit
from core.bulk import create_objects, insert_rows
from events.services import EventSpec, record_events
from fabric.models import Fabric, Host

from ...choices import AllocationKind, AllocationState, GpuState
from ...models import Allocation, AllocationItem, Gpu, Pool
from .common import (
    borrowed_flags,
    check_quota,
    created_changes,
    created_event,
    is_user,
    lock_pools,
    on_commit,
    tenant_for,
)
from .grant import allocate
from .request import AllocationError, AllocationRequest, InvalidRequest, NotEnoughFree
from .usage import NOT_MIG, eligible_gpus, pool_usage


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
    pools = lock_pools({pool_id for _, pool_id, _ in batch})
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
            eligible_gpus(pools[pool_ids[0]]).filter(pk__any=mine, state=GpuState.FREE, mig_mode_current__in=NOT_MIG)
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
            tenant_id = tenant_for(pool, req)
            check_quota(pool, "gpus", usage[pool_id]["gpus"], req.count)
            unknown = sorted(g for g in req.gpu_ids if g not in gpus)
            if unknown:
                raise InvalidRequest(f"no GPU with id {unknown}", field="gpu_ids")
            busy = sorted(g for g in req.gpu_ids if g not in free[pool_id] or g in taken)
            if busy:
                raise NotEnoughFree(f"GPUs {busy} are not free for pool {pool.name}", gpus=busy)
        except AllocationError as exc:
            out[i] = exc
            continue
        flags = borrowed_flags(pool.guaranteed_gpus, usage[pool_id]["gpus"], req.count)
        usage[pool_id]["gpus"] += req.count
        taken.update(req.gpu_ids)
        plans.append((i, pool, req, tenant_id, sorted(req.gpu_ids), flags))
    if not plans:
        return
    owner = user if is_user(user) else None
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
        by_fabric.setdefault(fabric_id, []).append(created_event(pool, alloc, tenant_id, ids, []))
        audits.append(("allocation.create", alloc, created_changes(pool, alloc, ids, [])))
        on_commit(alloc, ids, fabric_id)
    for fabric_id, specs in by_fabric.items():
        record_events(Fabric(pk=fabric_id) if fabric_id else None, specs, at=now)
    audit.record_many(audits, user=user)
