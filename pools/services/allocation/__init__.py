"""The allocation service: the one writer of allocations and of ``Gpu.state``/``MigSlice.state``.
A package (issue 27): the module moved to ``grant`` whole first, so that its history follows; its
concerns are split out of it next. The public names stay importable from
``pools.services.allocation``."""

from __future__ import annotations

from .grant import (
    MAX_COUNT,
    MAX_LEASE_S,
    AllocationError,
    AllocationRequest,
    InvalidRequest,
    NotEnoughFree,
    NotHolding,
    QuotaExceeded,
    allocate,
    allocate_many,
    eligible_gpus,
    expire_leases,
    gpu_capacity,
    pool_capacity,
    pool_summary,
    pool_usage,
    rebalance_borrowed,
    release,
)

__all__ = [
    "MAX_COUNT", "MAX_LEASE_S", "AllocationError", "AllocationRequest", "InvalidRequest", "NotEnoughFree",
    "NotHolding", "QuotaExceeded", "allocate", "allocate_many", "eligible_gpus", "expire_leases", "gpu_capacity",
    "pool_capacity", "pool_summary", "pool_usage", "rebalance_borrowed", "release",
]  # fmt: skip
