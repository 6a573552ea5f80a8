"""Enumerations of the job queue (``scheduler`` app).

Job states follow the issue's state machine (issue 12, "Jobs")::

    pending ──> placed ──> running ──> completed
       │          │           ├──────> failed
       │          │           ├──────> timeout     (ran past its time limit; ended by the pass)
       │          ├───────────┼──────> preempted   (GPUs taken back for a higher priority)
       └──────────┴───────────┴──────> cancelled
               placed/running ──> pending      (preempted, and the job asked to be requeued)
                      running <──> degraded    (its fabric failed under it: ``scheduler.services.faults``)

``placed`` holds an allocation (the pools' allocation service bound its GPUs); ``running`` is
what the job's prolog (or an Operator) reports; ``degraded`` is a running job whose fabric
failed under it (an HCA link down, its host gone, its PKey missing on a port, congested links:
``Job.faults`` says which) — it keeps running and holding its GPUs, and returns to ``running``
when every cause cleared, or is requeued or given a new host per ``on_fault``
(:class:`OnFault`); the last five are final and hold nothing. A job with ``requeue`` that is preempted goes back
to ``pending`` (``scheduler.models.Job``) instead of ending ``preempted``.
"""

from __future__ import annotations

from django.db import models

from pools.choices import OnFault as _PoolsOnFault


class JobState(models.TextChoices):
    PENDING = "pending", "Pending"
    PLACED = "placed", "Placed (GPUs bound)"
    RUNNING = "running", "Running"
    DEGRADED = "degraded", "Degraded (fabric fault)"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    PREEMPTED = "preempted", "Preempted"
    TIMEOUT = "timeout", "Timed out"


#: states that hold an allocation
HOLDING = (JobState.PLACED, JobState.RUNNING, JobState.DEGRADED)
#: states of a job that runs (a degraded job keeps running)
RUNNING_STATES = (JobState.RUNNING, JobState.DEGRADED)
#: states a job never leaves
FINAL = (JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.PREEMPTED, JobState.TIMEOUT)

#: allowed transitions (from → to); the services refuse any other
TRANSITIONS: dict[str, tuple[str, ...]] = {
    JobState.PENDING: (JobState.PLACED, JobState.CANCELLED),
    JobState.PLACED: (JobState.RUNNING, JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED,
                      JobState.PREEMPTED),
    JobState.RUNNING: (JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.PREEMPTED,
                       JobState.TIMEOUT, JobState.DEGRADED),
    JobState.DEGRADED: (JobState.RUNNING, JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED,
                        JobState.PREEMPTED, JobState.TIMEOUT),
}  # fmt: skip


class JobKind(models.TextChoices):
    """What a job asks for: whole GPUs, MIG slices of one profile, or one shared-GPU fraction
    (the pools' allocation kinds, ``pools.choices.AllocationKind``)."""

    GPU = "gpu", "Whole GPUs"
    MIG = "mig", "MIG slices"
    FRACTION = "fraction", "Shared-GPU fraction"


class PriorityClass(models.TextChoices):
    """Priority classes, lowest first; :data:`PRIORITY` gives each its number (higher first in
    the queue; only a higher number may preempt a lower one, as Kubernetes PriorityClasses)."""

    BATCH = "batch", "Batch"
    NORMAL = "normal", "Normal"
    HIGH = "high", "High"
    CRITICAL = "critical", "Critical"


PRIORITY: dict[str, int] = {
    PriorityClass.BATCH: 100,
    PriorityClass.NORMAL: 500,
    PriorityClass.HIGH: 800,
    PriorityClass.CRITICAL: 1000,
}


class TopologyMode(models.TextChoices):
    """How a job's topology tier counts: ``required`` (never placed across more than one domain of
    that tier) or ``preferred`` (as compact as possible; the decision says whether the tier was met)."""

    REQUIRED = "required", "Required"
    PREFERRED = "preferred", "Preferred"


class PendingCode(models.TextChoices):
    """Why a job is still pending: the placement engine's codes (``scheduler.placement``) plus the
    queue's own ``quota`` (the pool's quota would be passed: the engine is not asked) and
    ``conflict`` (the GPUs chosen were taken by another writer between the plan and the binding;
    the next pass tries again)."""

    QUOTA = "quota", "Quota"
    CAPACITY = "capacity", "Capacity"
    CONSTRAINT = "constraint", "Constraint"
    CONGESTION = "congestion", "Congestion"
    FRAGMENTATION = "fragmentation", "Fragmentation"
    CONFLICT = "conflict", "Conflict"


#: what the queue does when a running job's fabric fails (declared with the pools, whose
#: ``Pool.on_fault`` is a job's default)
OnFault = _PoolsOnFault


class Traffic(models.TextChoices):
    """The collective a job's traffic model assumes on each rail (``scheduler.jobpaths``):
    ``all-to-all`` every HCA of the rail sends to every other (the default: all-to-all and the
    tree/halving-doubling phases of all-reduce touch every pair); ``ring`` each HCA sends to the
    next one of the rail in host-name order, the last to the first (NCCL's ring all-reduce)."""

    ALL_TO_ALL = "all-to-all", "all-to-all"
    RING = "ring", "ring"
