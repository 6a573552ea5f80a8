"""The borrowed flags: :func:`remark_borrowed` re-marks a pool's active items and allocations
borrowed or guaranteed (the first ``guaranteed_*`` units, oldest first, guaranteed), in the caller's
transaction; :func:`rebalance_borrowed` does it in its own, audited (after a guarantee changed).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from accounts import audit

from ...choices import AllocationKind
from ...models import Allocation, AllocationItem, Pool
from .common import lock_pools


def remark_borrowed(pool: Pool) -> dict[int, bool]:
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


def remarked_details(changed: dict[int, bool]) -> dict[str, Any]:
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
        pool = lock_pools({pool_id}).get(pool_id)
        if pool is None:
            raise Pool.DoesNotExist(f"no pool {pool_id}")
        changed = remark_borrowed(pool)
        if changed:
            audit.record("pool.borrowed", pool, remarked_details(changed), user=user)
    return changed
