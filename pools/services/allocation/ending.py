"""The end of an allocation: :func:`release` (``released``), :func:`expire_leases` (``expired``,
each in its own transaction), and :func:`end_allocation`, which frees a locked allocation's GPUs,
slices or fraction, re-marks its pool's borrowed flags and records the end (event, audit, signal on
commit) in the caller's transaction (the reclaim ends its victims with it too).
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from accounts import audit
from events.services import EventSpec, record_events
from fabric.models import Fabric

from ...choices import HOLDING_STATES, AllocationKind, AllocationState, GpuState
from ...models import Allocation, Gpu, MigSlice, Pool
from .borrowed import remark_borrowed, remarked_details
from .common import iso, on_commit
from .request import NotHolding
from .usage import fraction_use


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
        end_allocation(alloc, AllocationState.RELEASED, now, user, reason=reason or "released")
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
            end_allocation(
                alloc,
                AllocationState.EXPIRED,
                now,
                None,
                reason=f"lease expired at {iso(alloc.lease_expires_at)}",
            )
            expired += 1
    return {"expired": expired}


_END_EVENT = {
    AllocationState.RELEASED: "allocation.released",
    AllocationState.EXPIRED: "allocation.expired",
    AllocationState.RECLAIMED: "allocation.reclaimed",
}


def end_allocation(alloc: Allocation, state: str, now, user, *, reason: str) -> None:
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
        still = set(fraction_use(gpu_ids))
        Gpu.objects.filter(pk__in=[g for g in gpu_ids if g not in still]).update(state=GpuState.FREE)
    before = alloc.state
    alloc.state, alloc.ended_at, alloc.end_reason = state, now, reason[:200]
    alloc.save(update_fields=["state", "ended_at", "end_reason"])
    # ending only borrowed units moves no unit across the guarantee (those after them were borrowed
    # and stay at or past it): the pool's flags change only when a guaranteed unit is freed
    remarked = remark_borrowed(alloc.pool) if not all(i.borrowed for i in items) else {}
    fabric_id = alloc.pool.fabric_id or (gpus[0].host.fabric_id if gpus else None)
    record_events(Fabric(pk=fabric_id) if fabric_id else None, [EventSpec(
        code=_END_EVENT[state], object_type="pool", object_key=f"{alloc.pool.name}/{alloc.pk}", object_repr=str(alloc),
        message=f"{alloc.pool.name}: allocation {alloc.pk} {state} ({reason})",
        details={"allocation": alloc.pk, "gpus": gpu_ids, "reason": reason}, tenant_id=alloc.tenant_id,
    )], at=now)  # fmt: skip
    audit.record(f"allocation.{state}", alloc,
                 {"state": [before, state], "gpus": gpu_ids, "reason": reason, **remarked_details(remarked)},
                 user=user)  # fmt: skip
    on_commit(alloc, gpu_ids, fabric_id)
