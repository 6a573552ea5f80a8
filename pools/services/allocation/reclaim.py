"""Reclaim for a pool's guaranteed share: which borrowed allocations of other pools to end for a
request by count (:func:`reclaim_units`: whole GPUs or MIG slices, lowest ``priority_weight`` then
newest first; :func:`fraction_plan`: the cheapest way to make room for a fraction on one GPU), and
ending them as ``reclaimed`` (:func:`end_reclaimed`).
"""

from __future__ import annotations

from typing import NamedTuple

from django.db.models import Count, Q

from ...choices import AllocationKind, AllocationState, GpuState
from ...models import Allocation, AllocationItem, Gpu, Pool
from .common import Locked
from .ending import end_allocation
from .usage import NOT_MIG, eligible_gpus, fits


def reclaim_units(
    pool: Pool, kind: str, usable: Q, shortfall: int, locked: Locked, now, user
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
    return end_reclaimed(pool, chosen, now, user)


class _Share(NamedTuple):
    """A fraction on a shared GPU, as :func:`fraction_plan` weighs it."""

    gpu_id: int
    total_mib: int
    reserved_mib: int | None
    allocation_id: int
    pool_id: int
    borrowed: bool
    weight: int
    memory_mib: int
    compute_pct: int


def fraction_plan(pool: Pool, mem: int, pct: int, locked: Locked) -> tuple[int, list[int], set[int]] | None:
    """How to make room for a fraction (``mem`` MiB, ``pct`` %) on one GPU ``pool`` may use, by
    reclaiming: ``(gpu pk, allocation pks to reclaim, their pools)``, or None. The ways: a
    borrowed whole-GPU allocation of another pool holding a GPU big enough (ending it frees the
    GPU), or on a shared GPU the borrowed fractions of other pools, lowest weight then newest
    first, until the fraction fits. The cheapest way wins: the lowest highest weight among those
    reclaimed, then the fewest, then the newest. In the last lock round only allocations of held
    pools are candidates (``locked``)."""
    gpus = eligible_gpus(pool).filter(mig_mode_current__in=NOT_MIG, memory_total_mib__gte=mem)
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
        if fits(total - (reserved or 0), (0, 0), mem, pct):
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
        while others and not fits(cap, (mem_used, pct_used), mem, pct):
            victim = others.pop(0)
            victims.append(victim)
            mem_used -= victim.memory_mib or 0
            pct_used -= victim.compute_pct or 0
        if victims and fits(cap, (mem_used, pct_used), mem, pct):
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


def end_reclaimed(pool: Pool, allocation_ids: list[int], now, user) -> list[Allocation]:
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
        end_allocation(
            alloc,
            AllocationState.RECLAIMED,
            now,
            user,
            # the victim's tenant reads this (its allocation's event): another tenant's pool unnamed
            reason=f"reclaimed for the guaranteed share of {_pool_seen_by(pool, alloc.tenant_id)}",
        )
    return allocs
