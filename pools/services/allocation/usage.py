"""The reads of the allocation service, shared by its writers and the scheduler: the GPUs a pool may
use (:func:`eligible_gpus`), what it can ever hold (:func:`pool_capacity`), what it holds now and the
borrowed part of it (:func:`pool_usage`, :func:`pool_summary`: the pools' counting rule), and the
room a shared GPU has for fractions (:func:`gpu_capacity`, :func:`fraction_use`, :func:`fits`).
Writes nothing.
"""

from __future__ import annotations

from django.db.models import Count, Q, Sum

from ...choices import AllocationKind, GpuState
from ...models import AllocationItem, Gpu, Pool


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


#: MIG modes of GPUs handed out whole or in fractions
NOT_MIG = ["disabled", "unsupported"]


def gpu_capacity(gpu: Gpu) -> int | None:
    """Memory a GPU can share out, MiB: total minus the driver's reserve (None: unknown)."""
    if gpu.memory_total_mib is None:
        return None
    return gpu.memory_total_mib - (gpu.memory_reserved_mib or 0)


def fraction_use(gpu_ids: list[int]) -> dict[int, tuple[int, int]]:
    rows = (
        AllocationItem.objects.filter(gpu_id__in=gpu_ids, active=True, kind=AllocationKind.FRACTION)
        .values("gpu_id")
        .annotate(mem=Sum("memory_mib"), pct=Sum("compute_pct"))
    )
    return {r["gpu_id"]: (r["mem"] or 0, r["pct"] or 0) for r in rows}


def fits(cap: int | None, used: tuple[int, int], mem: int, pct: int) -> bool:
    return cap is not None and used[0] + mem <= cap and used[1] + pct <= 100
