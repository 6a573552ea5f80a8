"""The allocation service: the one writer of allocations and of ``Gpu.state``/``MigSlice.state``.

Modelled on Saleor's ``warehouse.management.allocate_stocks``: each change is one transaction
that locks what it reads before deciding, writes in bulk, records its events and its audit entry
inside the transaction, and sends ``pools.signals.allocation_changed`` (and a realtime message)
only on commit.

Locks, always in this order (so two transactions never wait on each other in a cycle):

1. :class:`~pools.models.Pool` rows (``select_for_update``), in pk order and in one statement:
   the pool allocated in, or the pool of the allocation being ended; a request that reclaims also
   locks the pools it reclaims from. Every writer of a pool's allocations holds its row, so the
   pool's usage, counted under the lock, cannot be raced past its quota, and its borrowed flags
   are re-marked by one transaction at a time. A request that finds it must reclaim from pools it
   has not locked rolls back (releasing its locks) and starts again with them in the set
   (``grant._LOCK_ROUNDS``; the last round reclaims only from pools it holds);
2. allocations being ended (release, expiry, reclaim), in pk order;
3. GPUs (or MIG slices), in pk order. A request by count takes the first free ones with
   ``SKIP LOCKED`` (rows another transaction is handing out are skipped, not waited for); a
   request for named GPUs locks exactly those in pk order and is refused if any is taken.

A GPU can never be held twice: besides the locks, the database refuses a second active whole-GPU
item of one GPU and a second active item of one slice (``AllocationItem`` constraints). Shared-GPU
fractions are summed under the GPU's row lock against its memory (total minus reserved, MiB) and
100 % compute (HAMi's ``gpumem``/``gpucores``): never oversubscribed.

Quotas (:class:`~pools.models.Pool`): a pool's GPU usage is its active whole GPUs plus the
distinct GPUs it holds fractions on; slice usage its active slices. A request that would pass
``quota_*`` is refused (:class:`QuotaExceeded`, HTTP 409) and changes nothing: a refusal is not
an event (it would be written in a transaction that rolls back, or cost a second write on the hot
path); the API's 409 body says which quota and by how much.

Borrowed (``AllocationItem.borrowed``, ``Allocation.borrowed`` = any of its active items): what a
pool holds above its ``guaranteed_*`` share, oldest first staying guaranteed. A pool's *units*
are its whole GPUs and the distinct GPUs it holds fractions on (counted against
``guaranteed_gpus``), and its MIG slices (against ``guaranteed_slices``), ordered by allocation
(pk: creation order) then item; the first ``guaranteed_*`` units are guaranteed, the rest
borrowed, and every fraction item of one GPU shares its unit's flag (the unit's place is that of
its oldest fraction). An allocation marks its new items so (they come last); ending allocations
(release, expiry, reclaim) and a change of the guarantee (:func:`rebalance_borrowed`) re-mark the
pool's remaining items in the same transaction (``borrowed.remark_borrowed``), audited with the change.

Reclaim: when a request by count within the pool's guaranteed share finds too few free GPUs,
slices or no GPU with room for a fraction, it ends active borrowed allocations of other pools
that hold what it may use, whole, as ``reclaimed`` (lowest ``priority_weight`` first, newest
first): whole-GPU allocations for whole GPUs, MIG allocations of the profile for slices, and for
a fraction the cheapest way to make room on one GPU (a borrowed whole-GPU allocation, or the
borrowed fractions on a shared GPU). The guarantee is the pool's right whatever its weight: the
weight orders the borrowers, it does not shield them. Requests for named GPUs do not reclaim.

Bulk: :func:`allocate_many` allocates a batch (a scheduling pass's placements) in one
transaction with the same guarantees, request by request in list order, each refusal its own
(the others go on); named whole GPUs, the pass's requests, are locked, checked and written in
bulk (one audit entry and one event per allocation, bulk-inserted).

Modules (one concern each; each imports only those above it): ``request`` (what is asked, the
refusals), ``usage`` (the reads: eligible GPUs, capacity, usage, a GPU's room for fractions),
``common`` (the pool-row locks, a request's rules, what a change records and sends on commit),
``borrowed`` (the borrowed flags), ``ending`` (release, lease expiry, the end of an allocation),
``reclaim`` (what to take back for a guarantee), ``grant`` (:func:`allocate`: one request) and
``bulk`` (:func:`allocate_many`). The public names stay importable from
``pools.services.allocation``.

Errors: :class:`InvalidRequest` (400: bad input), :class:`NotEnoughFree` and
:class:`QuotaExceeded` (409), :class:`NotHolding` (409: release of an ended allocation),
``Pool.DoesNotExist``/``Allocation.DoesNotExist`` (404 to the API).
"""

from __future__ import annotations

from .borrowed import rebalance_borrowed
from .bulk import allocate_many
from .ending import expire_leases, release
from .grant import allocate
from .request import (
    MAX_COUNT,
    MAX_LEASE_S,
    AllocationError,
    AllocationRequest,
    InvalidRequest,
    NotEnoughFree,
    NotHolding,
    QuotaExceeded,
)
from .usage import eligible_gpus, gpu_capacity, pool_capacity, pool_summary, pool_usage

__all__ = [
    "MAX_COUNT", "MAX_LEASE_S", "AllocationError", "AllocationRequest", "InvalidRequest", "NotEnoughFree",
    "NotHolding", "QuotaExceeded", "allocate", "allocate_many", "eligible_gpus", "expire_leases", "gpu_capacity",
    "pool_capacity", "pool_summary", "pool_usage", "rebalance_borrowed", "release",
]  # fmt: skip
