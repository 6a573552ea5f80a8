"""What must hold of the allocation tables after any sequence of allocations, releases, expiries
and reclaims (the SQLite property tests and the PostgreSQL race test share it).

:func:`expected_borrowed` states the borrowed rule of ``pools.services.allocation`` (units oldest
first, the first ``guaranteed_*`` guaranteed) apart from the service's ``_rebalance``, so that the
two check each other. A handful of queries per check: the property tests run it after every step.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import NamedTuple

from pools.models import Allocation, AllocationItem, Gpu, MigSlice, Pool
from pools.services.allocation import gpu_capacity, pool_usage


class Item(NamedTuple):
    pk: int
    allocation_id: int
    pool_id: int
    state: str
    kind: str
    gpu_id: int
    mig_slice_id: int | None
    borrowed: bool
    memory_mib: int | None
    compute_pct: int | None


def active_items() -> list[Item]:
    """Every active allocation item, oldest allocation first."""
    rows = AllocationItem.objects.filter(active=True).order_by("allocation_id", "pk")
    return [Item(*r) for r in rows.values_list(
        "pk", "allocation_id", "allocation__pool_id", "allocation__state", "kind", "gpu_id", "mig_slice_id",
        "borrowed", "memory_mib", "compute_pct",
    )]  # fmt: skip


def expected_borrowed(pool: Pool, items: list[Item]) -> dict[int, bool]:
    """``{item pk: borrowed}`` for ``pool``'s items (of ``items``, oldest first) by the rule:
    whole GPUs and the distinct GPUs with fractions are GPU units, slices slice units; the first
    ``guaranteed_*`` units are guaranteed; a GPU's fractions share the place of its first one."""
    mine = [i for i in items if i.pool_id == pool.pk]
    gpu_units: list[tuple] = []
    for i in mine:
        key = ("frac", i.gpu_id) if i.kind == "fraction" else ("whole", i.pk)
        if i.kind != "mig" and key not in gpu_units:
            gpu_units.append(key)
    slices = [i.pk for i in mine if i.kind == "mig"]
    out = {}
    for i in mine:
        if i.kind == "mig":
            out[i.pk] = slices.index(i.pk) >= pool.guaranteed_slices
        else:
            key = ("frac", i.gpu_id) if i.kind == "fraction" else ("whole", i.pk)
            out[i.pk] = gpu_units.index(key) >= pool.guaranteed_gpus
    return out


def check_invariants(pools: list[Pool] | None = None, *, with_usage: bool = True) -> None:
    """Assert: no GPU or slice held twice, fractions within their GPU, GPU/slice states agree
    with the items, ended allocations hold nothing, every pool within its quotas, borrowed flags
    of items and allocations as :func:`expected_borrowed` says, and (``with_usage``) the
    service's ``pool_usage`` agreeing, borrowed counts included."""
    items = active_items()
    whole = Counter(i.gpu_id for i in items if i.kind == "gpu")
    assert max(whole.values(), default=0) <= 1, "a GPU is held whole twice"
    frac = {i.gpu_id for i in items if i.kind == "fraction"}
    assert not frac & set(whole), "a GPU is held whole and in fractions"
    sliced = Counter(i.mig_slice_id for i in items if i.kind == "mig")
    assert max(sliced.values(), default=0) <= 1, "a MIG slice is held twice"
    shares: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for i in items:
        if i.kind == "fraction":
            shares[i.gpu_id][0] += i.memory_mib
            shares[i.gpu_id][1] += i.compute_pct
    for gpu in Gpu.objects.filter(pk__in=list(shares)):
        assert shares[gpu.pk][0] <= gpu_capacity(gpu) and shares[gpu.pk][1] <= 100, ("oversubscribed", gpu.pk)
    states = dict(Gpu.objects.values_list("pk", "state"))
    assert {pk for pk, s in states.items() if s == "allocated"} == set(whole)
    assert {pk for pk, s in states.items() if s == "shared"} == frac
    assert set(MigSlice.objects.filter(state="allocated").values_list("pk", flat=True)) == set(sliced)
    assert all(i.state == "active" for i in items), "an ended allocation holds something"
    flags = dict(Allocation.objects.filter(state="active").values_list("pk", "borrowed"))
    assert set(flags) == {i.allocation_id for i in items}, "an active allocation holds nothing"
    for pool in (
        Pool.objects.filter(pk__in=[p.pk for p in pools]) if pools is not None else Pool.objects.all()
    ):
        want = expected_borrowed(pool, items)
        stored = {i.pk: i.borrowed for i in items if i.pool_id == pool.pk}
        assert stored == want, (pool.name, {k: (stored[k], want[k]) for k in want if stored[k] != want[k]})
        by_alloc: dict[int, bool] = {}
        for i in items:
            if i.pool_id == pool.pk:
                by_alloc[i.allocation_id] = by_alloc.get(i.allocation_id, False) or want[i.pk]
        assert {a: flags[a] for a in by_alloc} == by_alloc, (pool.name, "allocation flags")
        mine = [i for i in items if i.pool_id == pool.pk]
        gpus = sum(1 for i in mine if i.kind == "gpu") + len({i.gpu_id for i in mine if i.kind == "fraction"})
        slices = sum(1 for i in mine if i.kind == "mig")
        assert pool.quota_gpus is None or gpus <= pool.quota_gpus, (pool.name, "GPU quota", gpus)
        assert pool.quota_slices is None or slices <= pool.quota_slices, (pool.name, "slice quota", slices)
        if with_usage:
            assert pool_usage(pool.pk) == {
                "gpus": gpus, "slices": slices, "borrowed_gpus": max(0, gpus - pool.guaranteed_gpus),
                "borrowed_slices": max(0, slices - pool.guaranteed_slices),
            }, pool.name  # fmt: skip
