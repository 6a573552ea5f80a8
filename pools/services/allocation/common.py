"""What every writer of allocations shares: the pool-row locks in the service's order
(:func:`lock_pools`; :class:`Locked`, the rows one attempt holds, and :class:`MorePools`, raised to
start again with more), the rules of a request (:func:`tenant_for`, :func:`check_quota`,
:func:`borrowed_flags`), and what a change records: the ``allocation.created`` event and audit
changes (:func:`created_event`, :func:`created_changes`), ``pools.signals.allocation_changed`` and a
realtime message on commit (:func:`on_commit`).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from core.realtime import group_name, publish
from events.services import EventSpec

from ...choices import AllocationKind
from ...models import Allocation, Gpu, MigSlice, Pool, Tenant
from ...signals import allocation_changed
from .request import AllocationRequest, InvalidRequest, QuotaExceeded


class MorePools(Exception):
    """Raised inside a request's transaction (which rolls back, releasing its locks) when it must
    reclaim from pools whose rows it does not hold; :func:`allocate` starts again with them."""

    def __init__(self, pool_ids: set[int]):
        super().__init__(sorted(pool_ids))
        self.pool_ids = pool_ids


@dataclass
class Locked:
    """The pool rows one attempt holds (pk → row) and whether it is the last attempt."""

    pools: dict[int, Pool]
    last_round: bool

    def need(self, pool_ids: set[int]) -> None:
        """Raise :class:`MorePools` for the pools of ``pool_ids`` not held (not in the last
        round: its candidates come from :meth:`restrict`, held pools only)."""
        missing = set(pool_ids) - set(self.pools)
        if missing and not self.last_round:
            raise MorePools(missing)

    def restrict(self, qs, field: str = "pool"):
        """``qs`` limited to rows of held pools in the last round, unchanged before."""
        return qs.filter(**{f"{field}__in": list(self.pools)}) if self.last_round else qs


def lock_pools(pool_ids: set[int]) -> dict[int, Pool]:
    """Lock these pool rows in pk order (one statement); returns the ones that exist, by pk."""
    rows = Pool.objects.select_for_update().filter(pk__in=sorted(pool_ids)).order_by("pk")
    return {p.pk: p for p in rows}


def created_event(
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


def created_changes(pool: Pool, alloc: Allocation, gpu_ids: list[int], reclaimed_ids: list[int]) -> dict:
    """The ``allocation.create`` audit entry's changes (both allocation paths)."""
    return {
        "pool": pool.name, "kind": alloc.kind, "count": alloc.count, "gpus": gpu_ids, "job": alloc.job,
        "borrowed": alloc.borrowed, "lease_expires_at": iso(alloc.lease_expires_at), "reclaimed": reclaimed_ids,
    }  # fmt: skip


def is_user(user) -> bool:
    return user is not None and getattr(user, "is_authenticated", False)


def tenant_for(pool: Pool, request: AllocationRequest) -> int:
    if pool.tenant_id is not None:
        if request.tenant_id not in (None, pool.tenant_id):
            raise InvalidRequest(f"pool {pool.name} belongs to another tenant", field="tenant")
        return pool.tenant_id
    if request.tenant_id is None:
        raise InvalidRequest(f"pool {pool.name} is shared: name the tenant to allocate for", field="tenant")
    if not Tenant.objects.filter(pk=request.tenant_id).exists():
        raise InvalidRequest(f"no tenant {request.tenant_id}", field="tenant")
    return request.tenant_id


def check_quota(pool: Pool, unit: str, used: int, more: int) -> None:
    quota = pool.quota_gpus if unit == "gpus" else pool.quota_slices
    if quota is not None and used + more > quota:
        raise QuotaExceeded(
            f"pool {pool.name}: {used} {unit} held + {more} asked > quota {quota}",
            unit=unit, quota=quota, used=used, requested=more,
        )  # fmt: skip


def borrowed_flags(guaranteed: int, used: int, n: int) -> list[bool]:
    """Flags of ``n`` new units after the ``used`` a pool holds: the unit at place ``p``
    (0-based, oldest first) is borrowed when ``p >= guaranteed`` (the rule :func:`remark_borrowed`
    applies to a whole pool)."""
    return [used + i >= guaranteed for i in range(n)]


def fabric_of(pool: Pool, picked) -> int | None:
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


def iso(value) -> str | None:
    return value.isoformat() if value else None


def on_commit(alloc: Allocation, gpu_ids: list[int], fabric_id: int | None) -> None:
    payload = {"allocation": alloc.pk, "pool": alloc.pool_id, "tenant": alloc.tenant_id, "state": alloc.state,
               "gpus": gpu_ids}  # fmt: skip
    partition_id = alloc.pool.partition_id  # read under the pool's row lock (every caller holds it)

    def send() -> None:
        allocation_changed.send(sender=Allocation, allocation_id=alloc.pk, pool_id=alloc.pool_id,
                                state=payload["state"], gpu_ids=gpu_ids, pool_partition_id=partition_id)  # fmt: skip
        publish(group_name("pools", "all"), "allocation.changed", payload)

    transaction.on_commit(send)
