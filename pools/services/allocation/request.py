"""What an allocation asks for and the service's refusals: :class:`AllocationRequest` (validated
by :meth:`~AllocationRequest.validate`, naming the bad field), :class:`AllocationError` and its kinds
(:class:`InvalidRequest` 400; :class:`NotEnoughFree`, :class:`QuotaExceeded`, :class:`NotHolding`
409), and the bounds :data:`MAX_COUNT`, :data:`MAX_LEASE_S`. Reads and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...choices import AllocationKind

#: the most GPUs or slices one request may ask for: a bound on the request's shape only (what a
#: pool can give is its GPUs, :func:`pool_capacity`; the queue refuses a job above it at submit)
MAX_COUNT = 1 << 20
#: the longest lease, seconds (a year)
MAX_LEASE_S = 366 * 86400


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
