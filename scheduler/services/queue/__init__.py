"""The job queue: the one writer of :class:`~scheduler.models.Job` and
:class:`~scheduler.models.JobDecision` (issue 12, "Jobs" and "Queue").

Use cases, each one transaction that locks what it changes, writes its ``job.*`` event and its
audit entry inside it, and sends ``scheduler.signals.job_changed`` on commit:

* :func:`submit` — a new pending job (validated: an unknown tier is refused naming the field, a
  ``count`` above what the pool can ever hold too, :func:`check_capacity`);
  :func:`submit_with_key` the same with the client's idempotency key: a retry of the same request
  by the same user gets the job the first one queued, a different request with that key
  :class:`IdempotencyConflict`;
* :func:`cancel`, :func:`start`, :func:`finish` — the state machine of ``scheduler.choices``
  (a refused transition is :class:`JobConflict`); ending a job releases its allocation through
  ``pools.services.allocation.release``;
* :func:`move` — a placed or running job moved to other hosts (the rebalancer's defragmenting
  moves): allocation released and a new one bound in one transaction;
* :func:`allocation_lost` — the pools ended a job's allocation themselves (reclaimed for another
  pool's guarantee, lease expired): the job is ``preempted`` with that reason;
* :func:`expire_time_limits` — a running job past its ``time_limit_s`` ends ``timeout`` (its
  allocation released, ``job.timeout``), at the start of every pass;
* requeue: a preempted job with ``Job.requeue`` (by default the preemptible ones) goes back to
  pending with its submit time and priority instead (``ends.requeue_job``: events ``job.preempted`` and
  ``job.requeued``, audit ``job.requeue``);
* :func:`run_pass` — one scheduling pass: load the queue and the free state
  (``scheduler.services.state``), plan it (``scheduler.planner.plan_pass``: order with fair
  share, quota, placement, preemption, reservation and backfill), then bind the plan in plan
  order — runs of plain whole-GPU placements in bulk (up to :data:`BIND_BATCH` per transaction,
  ``pools.services.allocation.allocate_many``), a placement with victims, MIG slices, a fraction
  or a job partition in a transaction of its own — and record every pending job's decision. When
  a job left pending fits in its pool's guaranteed share (``Pool.guaranteed_gpus``, or
  ``guaranteed_slices`` for MIG) while other pools' preemptible jobs hold borrowed GPUs, slices
  or shares, the pass ends with the rebalancer's reclaim
  (``rebalance.reclaim_for_guarantees``, under the same lock): the pools' own reclaim never runs
  for the queue's requests by named GPUs.

**One pass at a time**: ``core.locks.single_instance("scheduler.pass")`` (a lease renewed while
the pass runs; a dead worker frees it within ``WEFT_LOCK_TTL_S``). A pass asked for while one
runs is not lost: it leaves a mark in the cache and the running pass goes round again.

**Idempotent if a worker dies mid-pass**: a placement is one transaction — the job row (and its
victims' rows) locked and checked still pending (still holding), the victims preempted and their
allocations released, the job's GPUs allocated, the job placed, its decision, event and audit
entry — or part of one bulk transaction doing the same for a batch (a job of the batch that the
pools refuse stays pending, the others are placed), so a pass that dies leaves each job either
placed with its GPUs or pending without any, and the next pass simply plans again.

**Job PKeys**: in a pool with ``job_isolation`` the placement's transaction also creates the
job's own partition of its hosts' CA ports (``pools.services.partitions.open_job_partition``;
a job whose pool has no free job PKey stays pending, nothing bound), and every end of a job
(complete, fail, cancel, preempt, the pools taking its allocation back) deletes it
(``close_job_partition``) in the end's transaction; OpenSM applies each change on commit
(``fabric.services.partitions.queue_apply``), as the UFM Slurm plugin's prolog/epilog do. After
a discovery the members of holding jobs' partitions are recomputed (:func:`sync_job_partitions`,
the pools' ``sync_allocation_partition``), as pools' partitions are. Pending decisions are written at the end of the pass in
one transaction (only those that changed; an unchanged one bumps its history row's count).

Locks, in this order (the pools' own order continues it): job rows (pk order), then pool rows
(pk order), then what ``pools.services.allocation`` locks (allocations, GPUs).

Modules (one concern each; each imports only those above it): ``spec`` (what a job asks for,
its validation, the errors), ``records`` (history rows, ``job.*`` events, the signal, row locks),
``ends`` (a job's end and requeue), ``binder`` (a planned placement, a batch of them and a move made
real: :func:`~.binder.bind_job`, shared with the rebalancer and the fault service),
``submitting`` (submit and idempotency keys), ``lifecycle`` (cancel, start, finish, the pools taking
an allocation back, time limits, job partitions after a discovery) and ``passes`` (the scheduling
pass). The public names stay importable from ``scheduler.services.queue``.

Errors: :class:`InvalidJob` (400, ``field`` names the bad one), :class:`JobConflict` and
:class:`IdempotencyConflict` (409),
``Job.DoesNotExist`` / ``Pool.DoesNotExist`` (404 to the API).
"""

from __future__ import annotations

from pools.services.allocation import MAX_COUNT

from .binder import bind_job, move
from .lifecycle import (
    allocation_lost,
    cancel,
    end_previous_run,
    expire_time_limits,
    finish,
    start,
    sync_job_partitions,
)
from .passes import (
    BIND_BATCH,
    PASS_LIMIT_S,
    PASS_LOCK,
    pass_inputs,
    queue_order,
    queued_job,
    request_pass,
    run_pass,
    set_reclaimer,
    set_replacer,
)
from .records import TENANT_MAIL_CODES, job_event, seen_by
from .spec import (
    MAX_SEGMENTS,
    MAX_TIME_LIMIT_S,
    MIG_SLICES_PER_GPU,
    InvalidJob,
    JobConflict,
    JobError,
    JobSpec,
    check_capacity,
    describe,
)
from .submitting import (
    IDEMPOTENCY_FIELD,
    IdempotencyConflict,
    check_idempotency_key,
    expire_idempotency_keys,
    key_expired,
    submit,
    submit_with_key,
)

__all__ = [
    "BIND_BATCH", "IDEMPOTENCY_FIELD", "MAX_COUNT", "MAX_SEGMENTS", "MAX_TIME_LIMIT_S", "MIG_SLICES_PER_GPU",
    "PASS_LIMIT_S", "PASS_LOCK", "TENANT_MAIL_CODES", "IdempotencyConflict", "InvalidJob", "JobConflict",
    "JobError", "JobSpec", "allocation_lost", "bind_job", "cancel", "check_capacity", "check_idempotency_key",
    "describe", "end_previous_run", "expire_idempotency_keys", "expire_time_limits", "finish", "job_event",
    "key_expired", "move", "pass_inputs", "queue_order", "queued_job", "request_pass", "run_pass", "seen_by",
    "set_reclaimer", "set_replacer", "start", "submit", "submit_with_key", "sync_job_partitions",
]  # fmt: skip
