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
  pending with its submit time and priority instead (``_requeue``: events ``job.preempted`` and
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

Errors: :class:`InvalidJob` (400, ``field`` names the bad one), :class:`JobConflict` and
:class:`IdempotencyConflict` (409),
``Job.DoesNotExist`` / ``Pool.DoesNotExist`` (404 to the API).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone

from accounts import audit
from core.bulk import create_objects, update_rows
from core.locks import single_instance
from events.services import EventSpec, record_events
from fabric.models import Fabric
from pools.choices import AllocationState
from pools.models import Allocation, AllocationItem, Pool, Tenant
from pools.services.allocation import (
    MAX_COUNT,
    AllocationError,
    AllocationRequest,
    NotHolding,
    QuotaExceeded,
    allocate,
    allocate_many,
    pool_capacity,
    release,
)
from pools.services.partitions import (
    NoJobPKey,
    close_job_partition,
    open_job_partition,
    sync_allocation_partition,
)

from ...choices import (
    HOLDING,
    PRIORITY,
    RUNNING_STATES,
    TRANSITIONS,
    JobKind,
    JobState,
    OnFault,
    PendingCode,
    PriorityClass,
    TopologyMode,
    Traffic,
)
from ...locality import TIER_NAMES, UnknownTier, tier_number
from ...models import Job, JobDecision
from ...placement import Fraction, Request, RequestError, Segments
from ...planner import Outcome, QueuedJob, fair_order, plan_pass
from ...signals import job_changed
from .. import state

log = logging.getLogger(__name__)

#: the pass lock's key (``core.locks``) and the cache key of "another pass was asked for"
PASS_LOCK = "scheduler.pass"
PASS_WANTED = "weft:scheduler:pass-wanted"
#: a pass stops renewing its lock after this (seconds): a wedged pass cannot block forever
PASS_LIMIT_S = 600
#: passes run back to back at most, when more were asked for while one ran
MAX_ROUNDS = 3
#: placements bound per transaction in bulk (``_bind_many``): bounds how long a pass holds the
#: pools' rows (other allocations wait for them)
BIND_BATCH = 250
#: the most segments, and hosts per segment, a gang may ask for (the columns are small integers)
MAX_SEGMENTS = 32767
#: GPU-instance slices a GPU has at most (an A100/H100 in 7 × ``1g`` slices): a MIG job's bound
MIG_SLICES_PER_GPU = 7
#: the longest time limit a job may ask for (a year)
MAX_TIME_LIMIT_S = 366 * 86400
#: a MIG GPU instance profile name as ``nvidia-smi mig -lgip`` prints it: compute slices "g", memory
#: "gb", an optional media-extension suffix ("1g.10gb", "7g.80gb", "1g.12gb+me")
MIG_PROFILE_RE = re.compile(r"[1-8]g\.[1-9][0-9]{0,3}gb(\+me|\+gfx|-me)?")


class JobError(Exception):
    """Base of the queue's refusals: ``status`` (HTTP), ``code``, ``field``; :meth:`as_dict`."""

    status = 409
    code = "conflict"

    def __init__(self, message: str, *, field: str | None = None, **details: Any):
        super().__init__(message)
        self.field = field
        self.details = details

    def as_dict(self) -> dict[str, Any]:
        out = {"detail": str(self), "code": self.code, **self.details}
        if self.field:
            out["field"] = self.field
        return out


class InvalidJob(JobError):
    """A job that cannot be queued as written (400); ``field`` names the field."""

    status = 400
    code = "invalid"


class JobConflict(JobError):
    """A transition the state machine does not allow (cancel a completed job, start a pending
    one); ``state`` is the job's state."""

    code = "wrong_state"


@dataclass
class JobSpec:
    """What a submit asks for (the fields of :class:`~scheduler.models.Job`; see there).

    ``tier``/``segment_tier``: a tier number 0-4 or name (``leaf``, ``block``, ``spine_group``,
    ``fabric``, ``host``); ``tenant_id``: on whose behalf (required for a shared pool);
    ``requeue``: back to pending when preempted (None: as ``preemptible``, see ``Job``).
    """

    name: str
    pool_id: int
    tenant_id: int | None = None
    kind: str = JobKind.GPU
    count: int = 1
    gpu_model: str = ""
    mig_profile: str = ""
    memory_mib: int | None = None
    compute_pct: int | None = None
    gpus_per_host: int | None = None
    segments: int | None = None
    segment_hosts: int | None = None
    segment_tier: int | str | None = None
    priority_class: str = PriorityClass.NORMAL
    preemptible: bool = False
    requeue: bool | None = None
    tier: int | str | None = None
    tier_mode: str = TopologyMode.PREFERRED
    time_limit_s: int | None = None
    #: what to do when its fabric fails (blank: the pool's; ``scheduler.services.faults``)
    on_fault: str = ""
    #: the collective on each rail (``scheduler.choices.Traffic``; the job→links index)
    traffic: str = Traffic.ALL_TO_ALL
    #: the runner's signed webhook (blank: the tenant's); the secret is its HMAC key
    webhook_url: str = ""
    webhook_secret: str = ""

    def validate(self) -> tuple[int | None, int | None]:
        """Check every field; returns ``(tier, segment_tier)`` as numbers. Raises
        :class:`InvalidJob` naming the first bad field."""
        if not isinstance(self.name, str) or not self.name.strip() or len(self.name) > 128:
            raise InvalidJob("name must be 1-128 characters", field="name")
        if self.kind not in JobKind.values:
            raise InvalidJob(f"kind must be one of {', '.join(JobKind.values)}", field="kind")
        if (
            not isinstance(self.count, int)
            or isinstance(self.count, bool)
            or not 1 <= self.count <= MAX_COUNT
        ):
            raise InvalidJob(f"count must be 1..{MAX_COUNT}", field="count")
        if self.priority_class not in PRIORITY:
            raise InvalidJob(f"priority_class must be one of {', '.join(PRIORITY)}", field="priority_class")
        if self.requeue is not None and not isinstance(self.requeue, bool):
            raise InvalidJob("requeue is true or false", field="requeue")
        if self.tier_mode not in TopologyMode.values:
            raise InvalidJob("tier_mode must be required or preferred", field="tier_mode")
        if self.time_limit_s is not None and not 1 <= self.time_limit_s <= MAX_TIME_LIMIT_S:
            raise InvalidJob(f"time_limit_s must be 1..{MAX_TIME_LIMIT_S}", field="time_limit_s")
        if len(self.gpu_model) > 96:
            raise InvalidJob("gpu_model is at most 96 characters", field="gpu_model")
        if self.traffic not in Traffic.values:
            raise InvalidJob(f"traffic must be one of {', '.join(Traffic.values)}", field="traffic")
        if self.on_fault and self.on_fault not in OnFault.values:
            raise InvalidJob(
                f"on_fault must be one of {', '.join(OnFault.values)} (blank: the pool's)", field="on_fault"
            )
        if self.webhook_url and (
            len(self.webhook_url) > 500 or not self.webhook_url.startswith(("http://", "https://"))
        ):
            raise InvalidJob(
                "webhook_url is an http:// or https:// URL of at most 500 characters", field="webhook_url"
            )
        if len(self.webhook_secret or "") > 200:
            raise InvalidJob("webhook_secret is at most 200 characters", field="webhook_secret")
        tier = seg_tier = None
        if self.tier not in (None, ""):
            try:
                tier = tier_number(self.tier)
            except UnknownTier as exc:
                raise InvalidJob(str(exc), field="tier") from exc
        elif self.tier_mode == TopologyMode.REQUIRED:
            raise InvalidJob("a required topology constraint needs a tier", field="tier")
        if self.kind == JobKind.MIG:
            if not self.mig_profile or len(self.mig_profile) > 32:
                raise InvalidJob("MIG jobs name a profile (e.g. 1g.10gb)", field="mig_profile")
            if not MIG_PROFILE_RE.fullmatch(self.mig_profile):
                raise InvalidJob(
                    f"{self.mig_profile!r} is not a MIG GPU instance profile: <slices>g.<memory>gb, "
                    "optionally +me (as nvidia-smi mig -lgip names them, e.g. 1g.10gb, 3g.40gb, 1g.12gb+me)",
                    field="mig_profile",
                )
        elif self.mig_profile:
            raise InvalidJob("mig_profile is for kind 'mig'", field="mig_profile")
        if self.kind == JobKind.FRACTION:
            if self.count != 1:
                raise InvalidJob("a fraction is one share of one GPU: count must be 1", field="count")
            if not self.memory_mib or self.memory_mib < 1:
                raise InvalidJob("a fraction needs memory_mib ≥ 1", field="memory_mib")
            if not self.compute_pct or not 1 <= self.compute_pct <= 100:
                raise InvalidJob("a fraction needs compute_pct in 1..100", field="compute_pct")
        elif self.memory_mib is not None or self.compute_pct is not None:
            raise InvalidJob("memory_mib/compute_pct are for kind 'fraction'", field="memory_mib")
        seg = (self.segments, self.segment_hosts, self.segment_tier)
        if any(v not in (None, "") for v in seg):
            if self.segments is None or self.segment_hosts is None or self.segment_tier in (None, ""):
                raise InvalidJob("segments need segments, segment_hosts and segment_tier", field="segments")
            try:
                seg_tier = tier_number(self.segment_tier)
            except UnknownTier as exc:
                raise InvalidJob(str(exc), field="segment_tier") from exc
        for name in ("segments", "segment_hosts"):
            v = getattr(self, name)
            if v is not None and not 1 <= v <= MAX_SEGMENTS:
                raise InvalidJob(f"{name} must be 1..{MAX_SEGMENTS}", field=name)
        if self.kind != JobKind.GPU and (self.gpus_per_host is not None or self.segments is not None):
            raise InvalidJob("gpus_per_host and segments are for whole-GPU jobs", field="gpus_per_host")
        try:  # the engine's own consistency rules (counts, segments adding up)
            Request(
                count=self.count, gpus_per_host=self.gpus_per_host, mig_profile=self.mig_profile,
                fraction=Fraction(self.memory_mib or 0, self.compute_pct or 0) if self.kind == JobKind.FRACTION else None,
                segments=Segments(self.segments, self.segment_hosts, seg_tier) if seg_tier is not None else None,
                tier=tier,
            )  # fmt: skip
        except RequestError as exc:
            msg = str(exc)
            fld = "segments" if "segment" in msg else "gpus_per_host" if "gpus_per_host" in msg else "count"
            raise InvalidJob(msg, field=fld) from exc
        return tier, seg_tier


# --- helpers -------------------------------------------------------------------------------------


def _fabric_for(job: Job) -> Fabric | None:
    """The fabric a job's events belong to: its pool's, else that of the GPUs it was given."""
    if job.pool.fabric_id:
        return Fabric(pk=job.pool.fabric_id)
    if job.allocation_id:
        fid = (
            AllocationItem.objects.filter(allocation_id=job.allocation_id)
            .values_list("gpu__host__fabric_id", flat=True)
            .first()
        )
        if fid is not None:
            return Fabric(pk=fid)
    return None


def _event_spec(job: Job, code: str, message: str, details: dict | None = None) -> EventSpec:
    """A job event: keyed by the job, its tenant and pool in the details beside ``details``;
    those the tenant hears of (``faults.TENANT_MAIL_CODES``) name its contacts in ``notify``
    (the alarm engine mails them)."""
    notify = {"notify": job.tenant.contacts} if code in TENANT_MAIL_CODES and job.tenant.contacts else {}
    return EventSpec(
        code=code, object_type="job", object_key=str(job.pk), object_repr=f"{job} ({job.tenant.name})",
        message=message, details={"job": job.pk, "tenant": job.tenant_id, "pool": job.pool_id, **(details or {}),
                                  **notify},
        tenant_id=job.tenant_id,
    )  # fmt: skip


#: job event codes whose mail goes to the tenant's contacts too (``scheduler.services.faults``)
TENANT_MAIL_CODES = frozenset({"job.degraded", "job.requeued", "job.replaced", "job.failed"})


def seen_by(job: Job, other: Job) -> str:
    """``job`` as an event of ``other`` names it: itself when both are one tenant's, else
    "a job of another tenant" (issue 22: a preempted job's event named the other tenant's job)."""
    return str(job) if job.tenant_id == other.tenant_id else "a job of another tenant"


def job_event(job: Job, code: str, message: str, now: datetime, details: dict | None = None) -> None:
    record_events(_fabric_for(job), [_event_spec(job, code, message, details)], at=now)


def _send(job: Job, previous: str, source: str) -> None:
    payload = {"job_id": job.pk, "state": job.state, "previous": previous, "source": source}
    transaction.on_commit(lambda: job_changed.send(sender=Job, **payload))


def _record_decision(
    job: Job, code: str, reasons: list[str], details: dict, now: datetime, *, trim: bool = True
) -> None:
    """A new history row for ``job`` (a state change: never a repeat of the last one), capped
    per job now, or by the caller later (``trim=False``: a pass trims its placements at its end)."""
    JobDecision.objects.create(job=job, at=now, last_at=now, code=code, reasons=reasons, details=details)
    if trim:
        _trim([job.pk])


def _trim(job_ids) -> None:
    cap = settings.WEFT_SCHEDULER_DECISION_HISTORY
    doomed, seen, n = [], None, 0
    for job_id, pk in (
        JobDecision.objects.filter(job_id__any=list(job_ids))
        .order_by("job_id", "-id")
        .values_list("job_id", "id")
    ):
        n = n + 1 if job_id == seen else 1
        seen = job_id
        if n > cap:
            doomed.append(pk)
    if doomed:
        JobDecision.objects.filter(pk__any=doomed).delete()


def _lock_pools(pool_ids) -> None:
    list(
        Pool.objects.select_for_update().filter(pk__in=sorted(set(pool_ids))).order_by("pk").values_list("pk")
    )


def _check_transition(job: Job, to: str) -> None:
    if to not in TRANSITIONS.get(job.state, ()):
        raise JobConflict(f"job {job.pk} is {job.state}: it cannot become {to}", state=job.state)


def _release_held(job: Job, to: str, reason: str, now: datetime, user) -> int | None:
    """Release the allocation of a locked placed/running job (None when the pools ended it
    already: reclaimed, expired); returns its id when this released it."""
    if job.allocation_id and job.state in HOLDING:
        try:
            release(job.allocation_id, user=user, reason=f"{job.reference} {to}: {reason}"[:200], now=now)
            return job.allocation_id
        except NotHolding:  # the pools ended it already (reclaimed, expired)
            pass
    return None


def _close_partition(job: Job, user) -> dict[str, Any]:
    """Delete a locked job's own partition (per-job isolation) with its GPUs, in the caller's
    transaction (OpenSM applies on commit); ``job.partition`` becomes None (the caller saves it,
    ``pkey`` stays for the record). Returns the details for its history, event and audit entry
    (``{"removed_pkey": "0x6001"}``; empty without a partition)."""
    if not job.partition_id:
        return {}
    close_job_partition(job.partition_id, user=user)
    job.partition = None
    return {"removed_pkey": f"0x{job.pkey:04x}" if job.pkey is not None else None}


def _end(job: Job, to: str, reason: str, now: datetime, user, source: str, more: dict | None = None) -> None:
    """End a locked job: release its allocation (if it still holds one) and delete its own
    partition (if it has one), final state, history, event, audit, signal on commit. The caller
    holds the job row (and its pool row). ``more``: extra details for the history, event and
    audit entry. A job with ``requeue`` that is preempted goes back to pending instead
    (:func:`_requeue`)."""
    _check_transition(job, to)
    if to == JobState.PREEMPTED and job.requeue:
        _requeue(job, reason, now, user, source)
        return
    previous = job.state
    released = _release_held(job, to, reason, now, user)
    isolation = _close_partition(job, user)
    job.state, job.ended_at, job.reason, job.pending_code = to, now, reason[:300], ""
    job.reserved_start, job.reserved_hosts, job.partition = None, [], None
    job.save(
        update_fields=["state", "ended_at", "reason", "pending_code", "reserved_start", "reserved_hosts",
                       "partition"]
    )  # fmt: skip
    more = more or {}
    _record_decision(job, to, [reason], {"released_allocation": released, **isolation, **more}, now)
    job_event(
        job,
        f"job.{to}",
        f"{job}: {to} ({reason})",
        now,
        {"reason": reason, "allocation": released, **isolation, **more},
    )
    verb = {"cancelled": "cancel", "completed": "complete", "failed": "fail", "preempted": "preempt",
            "timeout": "timeout"}[to]  # fmt: skip
    audit.record(
        f"job.{verb}",
        job,
        {"state": [previous, to], "reason": reason, "released_allocation": released, **isolation, **more},
        user=user,
    )
    _send(job, previous, source)


def _requeue(job: Job, reason: str, now: datetime, user, source: str) -> None:
    """A locked placed/running job with ``requeue`` lost its GPUs (``reason``: to whom): release
    its allocation, back to pending with its submit time and priority (its place in the queue),
    ``preemptions`` + 1; history, a ``job.preempted`` and a ``job.requeued`` event, audit
    (``job.requeue``), signal on commit (the pass that follows places it again)."""
    previous = job.state
    released = _release_held(job, JobState.PREEMPTED, reason, now, user)
    isolation = _close_partition(job, user)  # placed again: a partition of its new hosts then
    why = f"requeued: {reason}"[:300]
    job.state, job.reason, job.pending_code, job.preemptions = JobState.PENDING, why, "", job.preemptions + 1
    job.placed_at = job.started_at = None
    job.placement, job.reserved_start, job.reserved_hosts = {}, None, []  # ``allocation``: the ended one
    job.decision, job.decided_at = (
        {"code": "requeued", "reasons": [why], "released_allocation": released},
        now,
    )
    job.save(update_fields=["state", "reason", "pending_code", "preemptions", "placed_at", "started_at",
                            "placement", "reserved_start", "reserved_hosts", "decision",
                            "decided_at", "partition"])  # fmt: skip
    _record_decision(
        job, "requeued", [why], {"released_allocation": released, "from": previous, **isolation}, now
    )
    details = {"reason": reason, "allocation": released, "requeued": True, "preemptions": job.preemptions,
               **isolation}  # fmt: skip
    job_event(job, "job.preempted", f"{job}: preempted ({reason})", now, details)
    job_event(
        job, "job.requeued",
        f"{job}: back to pending, submitted {job.submitted_at:%Y-%m-%d %H:%M:%S} and {job.priority_class} "
        f"priority kept (preempted {job.preemptions} time{'s' if job.preemptions != 1 else ''})",
        now, details,
    )  # fmt: skip
    audit.record(
        "job.requeue",
        job,
        {"state": [previous, JobState.PENDING], "reason": reason, "released_allocation": released,
         "preemptions": job.preemptions},
        user=user,
    )  # fmt: skip
    _send(job, previous, source)


# --- use cases -----------------------------------------------------------------------------------


def submit(spec: JobSpec, *, user=None, now: datetime | None = None) -> Job:
    """Queue a job (pending). Raises :class:`InvalidJob` (400, naming the field) and
    ``Pool.DoesNotExist``. A pass follows on commit (``scheduler.signals``)."""
    return _submit(spec, user, now, "")[0]


def submit_with_key(spec: JobSpec, key: str, *, user, now: datetime | None = None) -> tuple[Job, bool]:
    """:func:`submit` made safe to retry (a client that timed out and sends the same request
    again): ``key`` is the client's idempotency key (the ``Idempotency-Key`` header,
    draft-ietf-httpapi-idempotency-key-header; Stripe's semantics), unique per user
    (``Job.idempotency_key``). Returns ``(job, created)``: a new job, or — the key already used
    by ``user`` for the same request (every request field equal after validation: names of
    tiers and their numbers, a tenant left implicit and the pool's, are the same) — the job
    that first request queued, whatever its state now, and nothing is written. A key is kept
    ``WEFT_IDEMPOTENCY_TTL_S`` seconds from that job's submit (:func:`key_expired`): a key
    older than that is taken from the old job and queues a new one, as once the daily prune
    cleared it (:func:`expire_idempotency_keys`).

    Raises:
        InvalidJob: as :func:`submit`; a key that is not 1-255 visible ASCII characters, or no
            signed-in user (``field`` ``Idempotency-Key``).
        IdempotencyConflict: ``user`` used ``key`` for a different request (409; ``job`` the
            first one's id, ``differs`` the fields that differ). Nothing is written.
    """
    if not getattr(user, "is_authenticated", False):
        raise InvalidJob(
            "an idempotency key needs a signed-in user (keys are per user)", field=IDEMPOTENCY_FIELD
        )
    return _submit(spec, user, now, check_idempotency_key(key))


#: how the API names the idempotency key (the request header) in 400 and 409 answers
IDEMPOTENCY_FIELD = "Idempotency-Key"
IDEMPOTENCY_KEY_MAX = 255
#: the request fields of a job: two submits with one key must agree on every one
REQUEST_FIELDS = (
    "name", "tenant_id", "pool_id", "kind", "count", "gpu_model", "mig_profile", "memory_mib", "compute_pct",
    "gpus_per_host", "segments", "segment_hosts", "segment_tier", "priority_class", "preemptible", "requeue",
    "tier", "tier_mode", "time_limit_s", "on_fault", "webhook_url", "traffic",
)  # fmt: skip


class IdempotencyConflict(JobError):
    """The idempotency key was used by the same user for a different request (409)."""

    code = "idempotency_key_reused"


def check_idempotency_key(key: str) -> str:
    """``key`` as stored: surrounding whitespace and one pair of double quotes (the header's
    structured-field string form, ``"8e03978e-…"``) removed; 1-255 visible ASCII characters.
    Raises :class:`InvalidJob` (``field`` ``Idempotency-Key``) otherwise."""
    key = (key or "").strip()
    if len(key) >= 2 and key[0] == key[-1] == '"':
        key = key[1:-1]
    if not 1 <= len(key) <= IDEMPOTENCY_KEY_MAX or not all("\x21" <= c <= "\x7e" for c in key):
        raise InvalidJob(
            f"an idempotency key is 1-{IDEMPOTENCY_KEY_MAX} visible ASCII characters (a UUID, say)",
            field=IDEMPOTENCY_FIELD,
        )
    return key


def key_expired(job: Job, now: datetime) -> bool:
    """Whether ``job``'s idempotency key is past its time to live: ``WEFT_IDEMPOTENCY_TTL_S``
    seconds (default 86400) from ``job.submitted_at`` have passed at ``now`` (that moment
    included)."""
    return job.submitted_at <= now - timedelta(seconds=settings.WEFT_IDEMPOTENCY_TTL_S)


def expire_idempotency_keys(now: datetime | None = None) -> int:
    """Clear the idempotency keys of jobs submitted ``WEFT_IDEMPOTENCY_TTL_S`` seconds or more
    before ``now`` (:func:`key_expired`), so that their owners can use those keys again; the
    jobs themselves stay. One UPDATE; the submit's audit entry keeps the key it was sent with.
    Run by the daily prune (``events.services.prune`` → ``events.signals.prune_due``). Returns
    how many keys were cleared."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.WEFT_IDEMPOTENCY_TTL_S)
    return Job.objects.filter(submitted_at__lte=cutoff).exclude(idempotency_key="").update(idempotency_key="")


def check_capacity(spec: JobSpec, pool: Pool) -> None:
    """Refuse a job larger than its pool can ever hold (``pools.services.allocation.pool_capacity``:
    its present GPUs matching its filters and the job's ``gpu_model``, whatever their state; MIG:
    :data:`MIG_SLICES_PER_GPU` slices each): :class:`InvalidJob` naming ``count`` (400). A job
    within it may wait (pending ``capacity``) but can place once the pool's GPUs are free. A
    fraction asks for one share: never refused here."""
    if spec.kind == JobKind.FRACTION:
        return
    gpus = pool_capacity(pool, spec.gpu_model)
    cap = gpus * MIG_SLICES_PER_GPU if spec.kind == JobKind.MIG else gpus
    if spec.count > cap:
        what = "MIG slices" if spec.kind == JobKind.MIG else "GPUs"
        model = f" of model {spec.gpu_model!r}" if spec.gpu_model else ""
        raise InvalidJob(
            f"count {spec.count} is more than pool {pool.name} can ever hold: {cap} {what}{model} "
            f"(its present GPUs matching its filters)",
            field="count",
        )


def _replay(existing: Job, fields: dict[str, Any], key: str) -> tuple[Job, bool]:
    differs = [f for f in REQUEST_FIELDS if getattr(existing, f) != fields[f]]
    if differs:
        raise IdempotencyConflict(
            f"idempotency key {key!r} was used for job {existing.pk} with another request "
            f"(differs in {', '.join(differs)}): use a new key for a new job",
            field=IDEMPOTENCY_FIELD, job=existing.pk, differs=differs,
        )  # fmt: skip
    return existing, False


def _submit(spec: JobSpec, user, now: datetime | None, key: str) -> tuple[Job, bool]:
    """:func:`submit` and :func:`submit_with_key` (``key`` empty: none): ``(job, created)``."""
    tier, seg_tier = spec.validate()
    now = now or timezone.now()
    owner = user if getattr(user, "is_authenticated", False) else None
    with transaction.atomic():
        # the pool row locked (FOR NO KEY UPDATE): a pool or tenant delete racing this submit
        # (pools.services.tenancy) waits and then sees the job, or this submit sees the pool gone
        pool = (
            Pool.objects.select_for_update(no_key=True, of=("self",))
            .select_related("tenant")
            .get(pk=spec.pool_id)
        )
        if pool.tenant_id is not None:
            if spec.tenant_id not in (None, pool.tenant_id):
                raise InvalidJob(f"pool {pool.name} belongs to another tenant", field="tenant")
            tenant_id = pool.tenant_id
        elif spec.tenant_id is None:
            raise InvalidJob(f"pool {pool.name} is shared: name the tenant the job is for", field="tenant")
        elif (
            Tenant.objects.select_for_update(no_key=True).filter(pk=spec.tenant_id).values_list("pk").first()
            is None
        ):
            raise InvalidJob(f"no tenant {spec.tenant_id}", field="tenant")
        else:
            tenant_id = spec.tenant_id
        check_capacity(spec, pool)
        fields = dict(
            name=spec.name.strip(), tenant_id=tenant_id, pool_id=pool.pk,
            kind=spec.kind, count=spec.count, gpu_model=spec.gpu_model, mig_profile=spec.mig_profile,
            memory_mib=spec.memory_mib, compute_pct=spec.compute_pct, gpus_per_host=spec.gpus_per_host,
            segments=spec.segments, segment_hosts=spec.segment_hosts, segment_tier=seg_tier,
            priority_class=spec.priority_class, preemptible=spec.preemptible,
            requeue=spec.preemptible if spec.requeue is None else spec.requeue,
            tier=tier, tier_mode=spec.tier_mode, time_limit_s=spec.time_limit_s, on_fault=spec.on_fault,
            webhook_url=spec.webhook_url, traffic=spec.traffic,
        )  # fmt: skip
        if key:
            existing = Job.objects.filter(owner=owner, idempotency_key=key).first()
            if existing is not None:
                if not key_expired(existing, now):
                    return _replay(existing, fields, key)
                # kept past its TTL and not pruned yet: the key is free again (as after the prune)
                Job.objects.filter(pk=existing.pk, idempotency_key=key).update(idempotency_key="")
        try:
            with transaction.atomic():  # a retry racing the first request: the unique key decides
                job = Job.objects.create(
                    **fields, owner=owner, idempotency_key=key, priority=PRIORITY[spec.priority_class],
                    webhook_secret=spec.webhook_secret,
                    submitted_at=now, reason="waiting for a scheduling pass",
                )  # fmt: skip
        except IntegrityError:
            existing = Job.objects.filter(owner=owner, idempotency_key=key).first() if key else None
            if existing is None:
                raise
            return _replay(existing, fields, key)
        job_event(job, "job.submitted", f"{job}: submitted ({describe(job)})", now)
        audit.record(
            "job.submit", job,
            {"pool": pool.name, "tenant": tenant_id, "request": describe(job), "priority_class": job.priority_class,
             "preemptible": job.preemptible, "requeue": job.requeue, "tier": job.tier, "tier_mode": job.tier_mode,
             "time_limit_s": job.time_limit_s, **({"idempotency_key": key} if key else {})},
            user=user,
        )  # fmt: skip
        _send(job, "", "submit")
    return job, True


def describe(job: Job) -> str:
    """The request in words: ``16 GPUs (2 hosts × 8), within one block (required)``."""
    if job.kind == JobKind.MIG:
        what = f"{job.count} MIG slice{'s' if job.count != 1 else ''} {job.mig_profile}"
    elif job.kind == JobKind.FRACTION:
        what = f"{job.memory_mib} MiB + {job.compute_pct} % of one GPU"
    else:
        what = f"{job.count} GPU{'s' if job.count != 1 else ''}"
        if job.gpus_per_host:
            hosts = job.count // job.gpus_per_host
            what += f" ({hosts} host{'s' if hosts != 1 else ''} × {job.gpus_per_host})"
        if job.segments:
            what += f", {job.segments} segments of {job.segment_hosts} hosts each in one {TIER_NAMES[job.segment_tier]}"
    if job.gpu_model:
        what += f", model {job.gpu_model}"
    if job.tier is not None:
        what += f", within one {TIER_NAMES[job.tier]} ({job.tier_mode})"
    return what


def _locked(job_id: int) -> Job:
    job = Job.objects.select_for_update(of=("self",)).select_related("pool", "tenant").get(pk=job_id)
    _lock_pools([job.pool_id])
    return job


def cancel(job_id: int, *, user=None, reason: str = "", now: datetime | None = None) -> Job:
    """Cancel a pending, placed or running job (its GPUs are released). Raises
    :class:`JobConflict` for an ended job, ``Job.DoesNotExist``."""
    now = now or timezone.now()
    with transaction.atomic():
        job = _locked(job_id)
        _end(job, JobState.CANCELLED, reason or "cancelled", now, user, "cancel")
    return job


def start(job_id: int, *, user=None, now: datetime | None = None) -> Job:
    """A placed job is running (its prolog, or an Operator, says so). Raises :class:`JobConflict`."""
    now = now or timezone.now()
    with transaction.atomic():
        job = _locked(job_id)
        if job.state != JobState.PLACED:  # (degraded → running is the fault service's)
            raise JobConflict(f"job {job.pk} is {job.state}: it cannot become running", state=job.state)
        job.state, job.started_at, job.reason = JobState.RUNNING, now, ""
        job.save(update_fields=["state", "started_at", "reason"])
        _record_decision(job, JobState.RUNNING, ["started"], {}, now)
        job_event(job, "job.started", f"{job}: running on {len(job.placement)} hosts", now)
        audit.record("job.start", job, {"state": [JobState.PLACED, JobState.RUNNING]}, user=user)
        _send(job, JobState.PLACED, "start")
    return job


def finish(job_id: int, *, ok: bool = True, reason: str = "", user=None, now: datetime | None = None) -> Job:
    """A placed or running job ended: ``completed`` (``ok``) or ``failed``; its GPUs are
    released. Raises :class:`JobConflict`, ``Job.DoesNotExist``."""
    now = now or timezone.now()
    with transaction.atomic():
        job = _locked(job_id)
        to = JobState.COMPLETED if ok else JobState.FAILED
        _end(job, to, reason or ("completed" if ok else "failed"), now, user, "finish")
    return job


def allocation_lost(allocation_id: int, allocation_state: str, *, now: datetime | None = None) -> Job | None:
    """The pools ended the allocation of a placed or running job themselves (``reclaimed`` for
    another pool's guarantee, ``expired``, released through the pools API): the job is
    ``preempted`` with that reason. No-op (None) when no holding job owns it."""
    now = now or timezone.now()
    with transaction.atomic():
        job = (
            Job.objects.select_for_update(of=("self",))
            .select_related("pool", "tenant")
            .filter(allocation_id=allocation_id, state__in=HOLDING)
            .first()
        )
        if job is None:
            return None
        _lock_pools([job.pool_id])
        _end(
            job,
            JobState.PREEMPTED,
            f"its allocation {allocation_id} was {allocation_state} by the pools",
            now,
            None,
            "pools",
        )
    return job


def move(
    job_id: int,
    placed: dict[str, int],
    loc,
    *,
    expected_allocation: int | None,
    expected_placement: dict[str, int],
    reason: str,
    details: dict | None = None,
    user=None,
    now: datetime | None = None,
) -> Job:
    """Move a placed or running whole-GPU job to ``placed`` (host → GPUs, on hosts of ``loc``), in
    one transaction: its allocation released, the free GPUs of those hosts allocated (the lowest
    ids matching the pool's and the job's models), the job ``placed`` there (a running job
    starts again on its new hosts: its prolog reports it running), history, a ``job.moved``
    event and a ``job.move`` audit entry, signal on commit; a job with its own partition (job
    isolation) gets one of its new hosts instead (the PKey freed first, so usually the same). The
    rebalancer's defragmenting moves
    (``scheduler.services.rebalance``); ``reason`` says why, ``details`` go into the decision.

    Raises :class:`JobConflict` when the job is no longer holding ``expected_allocation`` on
    ``expected_placement`` (changed since it was planned) or a host has fewer free GPUs than
    planned; ``pools.services.allocation.AllocationError`` when the pools refuse;
    ``Job.DoesNotExist``."""
    now = now or timezone.now()
    with transaction.atomic():
        job = _locked(job_id)
        if (
            job.state not in HOLDING
            or job.kind != JobKind.GPU
            or job.allocation_id != expected_allocation
            or job.placement != expected_placement
        ):
            raise JobConflict(f"{job} changed since the move was planned", state=job.state)
        previous, old = job.state, job.allocation_id
        release(old, user=user, reason=f"{job.reference} moved: {reason}"[:200], now=now)
        try:
            gpu_ids = _pick_gpus(job, placed, loc)
        except _Refused as exc:
            raise JobConflict(str(exc), state=job.state) from None
        alloc = allocate(
            job.pool_id,
            AllocationRequest(kind=job.kind, count=job.count, job=job.reference, tenant_id=job.tenant_id, gpu_ids=gpu_ids),
            user=user, now=now,
        )  # fmt: skip
        if job.partition_id or job.pool.job_isolation:  # its own partition follows it to its new hosts
            _close_partition(job, user)
            try:
                part = open_job_partition(job.pool, job.pk, alloc.pk, user=user)
            except NoJobPKey as exc:
                raise JobConflict(str(exc), state=job.state) from None
            job.partition, job.pkey = part, part.pkey
        job.state, job.started_at, job.allocation, job.placement = JobState.PLACED, None, alloc, dict(placed)
        job.decision = (details or {}) | {"code": "moved", "reasons": [reason], "allocation": alloc.pk}
        job.decided_at, job.reason = now, f"moved: {reason}"[:300]
        job.save(
            update_fields=[
                "state",
                "started_at",
                "allocation",
                "placement",
                "decision",
                "decided_at",
                "reason",
                "partition",
                "pkey",
            ]
        )
        _record_decision(
            job, "moved", [reason], {"from": expected_placement, "to": placed, "allocation": alloc.pk}, now
        )
        job_event(
            job, "job.moved", f"{job}: moved ({reason})", now,
            {"from": expected_placement, "to": placed, "allocation": alloc.pk, "released_allocation": old, "reason": reason},
        )  # fmt: skip
        audit.record(
            "job.move", job,
            {"state": [previous, JobState.PLACED], "from": expected_placement, "to": placed, "allocation": alloc.pk,
             "released_allocation": old, "reason": reason},
            user=user,
        )  # fmt: skip
        _send(job, previous, "rebalance")
    return job


def sync_job_partitions(fabric_id: int) -> int:
    """After a discovery of fabric ``fabric_id`` (a host's HCA replaced: new port GUIDs; a port
    gone or back): recompute the members of the partition of every job holding GPUs with its own
    partition on that fabric, through the pools' partitions service
    (``pools.services.partitions.sync_allocation_partition``, the writer of job partition
    members, as ``sync_fabric_pools`` is for pools' after the same discovery). Each job in its
    own transaction, its row locked first (the queue's lock order: job, then partition) and
    checked still holding that partition, so a job that ended or moved meanwhile is left alone.
    Returns how many jobs' members changed."""
    jobs = list(
        Job.objects.filter(state__in=HOLDING, partition__fabric_id=fabric_id, allocation__isnull=False)
        .order_by("pk")
        .values_list("pk", "partition_id", "allocation_id")
    )
    changed = 0
    for job_id, partition_id, allocation_id in jobs:
        with transaction.atomic():
            still = (
                Job.objects.select_for_update()
                .filter(pk=job_id, state__in=HOLDING, partition_id=partition_id, allocation_id=allocation_id)
                .exists()
            )
            if still and sync_allocation_partition(partition_id, allocation_id) is not None:
                changed += 1
    return changed


def expire_time_limits(now: datetime | None = None) -> int:
    """End every running job past its time limit as ``timeout`` (Slurm's ``TIMEOUT`` state: the
    limit counts from ``started_at``, the job's prolog report; a job without ``time_limit_s`` is
    never ended), each in its own transaction: its allocation released through the pools'
    allocation service (``_end``), its own partition closed, a ``job.timeout`` event (details:
    ``limit_s``, ``started_at``, ``ran_s``), audit ``job.timeout``, and ``job_changed`` on commit
    (its runner sees the state; the freed GPUs queue a pass). Run at the start of every pass
    (:func:`run_pass`, also the beat's periodic pass). A job that ended or was requeued between
    the read and its lock is left alone. Returns how many jobs timed out."""
    now = now or timezone.now()
    n = 0
    overdue = (
        Job.objects.filter(state__in=RUNNING_STATES, time_limit_s__isnull=False, started_at__lt=now)
        .order_by("pk")
        .values_list("pk", "started_at", "time_limit_s")
    )
    for pk, started, limit in overdue:
        if started + timedelta(seconds=limit) > now:
            continue
        with transaction.atomic():
            job = _locked(pk)
            if job.state not in RUNNING_STATES or job.started_at != started:
                continue
            ran = (now - started).total_seconds()
            _end(
                job, JobState.TIMEOUT, f"time limit of {limit} s reached", now, None, "pass",
                {"limit_s": limit, "started_at": started.isoformat(), "ran_s": round(ran, 3)},
            )  # fmt: skip
            n += 1
    return n


def end_previous_run(fabric: Fabric, reason: str, *, now: datetime | None = None) -> list[int]:
    """End the jobs that hold GPUs (placed, running, degraded) in pools of ``fabric`` as ``failed``
    with ``reason``: for a fabric whose hosts are new (the demo restarted on an existing database
    with a new lab: the previous run's jobs cannot be running there). Each job in its own
    transaction through :func:`_end` (allocation released, own partition closed, ``job.failed``
    event with ``reason``, audit, ``job_changed`` on commit); pending jobs stay queued. A job
    that ended between the read and its lock is left alone. Returns the ended jobs' ids."""
    now = now or timezone.now()
    ended: list[int] = []
    held = (
        Job.objects.filter(state__in=HOLDING, pool__fabric=fabric).order_by("pk").values_list("pk", flat=True)
    )
    for pk in held:
        with transaction.atomic():
            job = _locked(pk)
            if job.state not in HOLDING:
                continue
            _end(job, JobState.FAILED, reason, now, None, "restart", {"previous_run": True})
            ended.append(pk)
    return ended


# --- the pass ------------------------------------------------------------------------------------


def queued_job(job: Job) -> QueuedJob:
    """The planner's view of a pending job (with the start of the reservation the last pass gave
    it: the planner counts its quota then, ``scheduler.planner`` step 6)."""
    return QueuedJob(
        job_id=job.pk, tenant_id=job.tenant_id, pool_id=job.pool_id, priority=job.priority, kind=job.kind,
        count=job.count, gpu_model=(job.gpu_model or "").lower(), mig_profile=job.mig_profile,
        memory_mib=job.memory_mib, compute_pct=job.compute_pct, gpus_per_host=job.gpus_per_host,
        segments=(job.segments, job.segment_hosts, job.segment_tier) if job.segments else None,
        tier=job.tier, tier_required=job.tier_mode == TopologyMode.REQUIRED,
        time_limit_s=float(job.time_limit_s or settings.WEFT_SCHEDULER_DEFAULT_TIME_LIMIT_S),
        submitted=job.submitted_at.timestamp(),
        reserved_start=job.reserved_start.timestamp() if job.reserved_start else None,
    )  # fmt: skip


def queue_order(now: datetime | None = None) -> list[Job]:
    """Pending jobs in the order the next pass considers them (``scheduler.planner.fair_order``)."""
    now = now or timezone.now()
    jobs = {
        j.pk: j for j in Job.objects.filter(state=JobState.PENDING).select_related("pool", "tenant", "owner")
    }
    order = fair_order([queued_job(j) for j in jobs.values()], state.fair_shares(now))
    return [jobs[q.job_id] for q in order]


def pass_inputs(
    loc, pending: list[Job], now: datetime, *, more_pools=(), more_fraction_pools=()
) -> dict[str, Any]:
    """What ``plan_pass`` reads besides the queue and the inventory, for the ``pending`` jobs (and
    the pools ``more_pools``; ``more_fraction_pools``: where a fraction is asked too):
    ``{"pools": {id: PoolInfo}, "held", "shares", "unusable", "congestion", "now": epoch s}``
    (``scheduler.services.state``). A pass and the dry run (``scheduler.services.whatif``) read
    the same."""
    fractions = {j.pool_id for j in pending if j.kind == JobKind.FRACTION} | set(more_fraction_pools)
    return dict(
        pools=state.pool_infos({j.pool_id for j in pending} | set(more_pools), fractions),
        held=state.held_jobs(loc), shares=state.fair_shares(now), unusable=state.unusable_hosts(loc),
        congestion=state.congestion_marks(loc), now=now.timestamp(),
    )  # fmt: skip


def request_pass() -> None:
    """Ask for a pass while one may be running: the running pass goes round again."""
    try:
        cache.set(PASS_WANTED, 1, timeout=PASS_LIMIT_S)
    except Exception as exc:  # the cache is down: the periodic pass catches up
        log.warning("could not mark a pass as wanted: %s", exc)


def _take_wanted() -> bool:
    try:
        return bool(cache.delete(PASS_WANTED))
    except Exception:
        return False


def run_pass(*, now: datetime | None = None) -> dict[str, Any]:
    """One scheduling pass (module docstring), unless one is running (then it asks that one to
    go round again and returns ``{"skipped": …}``). Returns a summary: ``pending`` (jobs
    considered), ``placed``, ``preempted``, ``backfilled``, pending counts per code,
    ``expired`` (time limits), ``bind_failed``, ``engine_calls``, seconds spent loading the
    state (``load_s``), planning (``plan_s``), binding (``bind_s``), writing the pending
    decisions (``write_s``) and in all (``duration_s``), ``reclaimed`` (jobs placed on GPUs reclaimed
    for their pool's guarantee), and ``rounds``."""
    with single_instance(PASS_LOCK, PASS_LIMIT_S) as mine:
        if not mine:
            request_pass()
            return {"skipped": "a scheduling pass is already running"}
        summary: dict[str, Any] = {}
        for rounds in range(1, MAX_ROUNDS + 1):
            _take_wanted()
            summary = _one_pass(now)
            summary["rounds"] = rounds
            if now is not None or not _take_wanted():
                break
        return summary


def _no_reclaim(now: datetime) -> list[dict]:
    return []


#: the pass's reclaim step: ``scheduler.services.rebalance.reclaim_for_guarantees`` (one dict per
#: action, ``outcome`` ``done`` when it bound), set by ``SchedulerConfig.ready`` (:func:`set_reclaimer`)
_reclaimer: Callable[[datetime], list[dict]] = _no_reclaim


def set_reclaimer(reclaim: Callable[[datetime], list[dict]]) -> None:
    """Make every pass end with ``reclaim(now)`` when a pending job may reclaim borrowed GPUs. The
    rebalancer imports this module (it binds and moves jobs through the queue, the one writer of
    jobs), so it is handed over at start instead of imported here."""
    global _reclaimer
    _reclaimer = reclaim


def _no_replace(now: datetime) -> dict[str, int]:
    return {"replaced": 0, "requeued": 0}


#: a pass's first step: degraded jobs with ``on_fault=replace`` get healthy hosts
#: (``scheduler.services.faults.replace_faulted``), set by ``SchedulerConfig.ready``
_replacer: Callable[[datetime], dict[str, int]] = _no_replace


def set_replacer(replace: Callable[[datetime], dict[str, int]]) -> None:
    """Make every pass begin with ``replace(now)`` (the fault service imports this module, the
    one writer of jobs, so it is handed over at start instead of imported here)."""
    global _replacer
    _replacer = replace


def _one_pass(now: datetime | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    now = now or timezone.now()
    expired = expire_time_limits(now)
    replaced = _replacer(now)  # before the free state is read: a host goes to one of them
    pending = list(Job.objects.filter(state=JobState.PENDING).select_related("pool", "tenant").order_by("pk"))
    if not pending:
        Job.objects.filter(reserved_start__isnull=False).update(reserved_start=None, reserved_hosts=[])
        return {
            "pending": 0,
            "placed": 0,
            "expired": expired,
            **replaced,
            "duration_s": round(time.perf_counter() - t0, 4),
        }
    loc = state.current_locality()
    inputs = pass_inputs(loc, pending, now)
    inv = state.load_inventory(loc, {j.kind for j in pending})
    t1 = time.perf_counter()
    plan = plan_pass(loc, inv, [queued_job(j) for j in pending], **inputs)
    t2 = time.perf_counter()
    jobs = {j.pk: j for j in pending}
    pending_out: list[Outcome] = []
    failed = 0
    batch: list[Outcome] = []

    def refuse(out: Outcome, refused: tuple[str, list[str]]) -> None:
        nonlocal failed
        failed += 1
        out.code, out.reasons = str(refused[0]), refused[1] + out.reasons
        out.placed, out.victims, out.backfilled = {}, [], False
        pending_out.append(out)

    def flush() -> None:
        refused = _bind_many(batch, loc, now) if batch else {}
        for out in batch:
            if out.job_id in refused:
                refuse(out, refused[out.job_id])
        batch.clear()

    for out in plan.outcomes:  # in plan order: a job may use GPUs an earlier preemption freed
        if not out.ok:
            pending_out.append(out)
            continue
        if _batchable(out, jobs[out.job_id]):
            batch.append(out)
            if len(batch) >= BIND_BATCH:
                flush()
            continue
        flush()
        refused = bind_job(out, loc, now)
        if refused is not None:
            refuse(out, refused)
    flush()
    t3 = time.perf_counter()
    _write_pending(pending_out, jobs, plan, now, placed=[o.job_id for o in plan.outcomes if o.ok])
    reclaimed = 0
    infos = inputs["pools"]
    if (
        any(_may_reclaim(jobs[o.job_id], infos) for o in pending_out if o.code in _RECLAIMABLE)
        and Allocation.objects.filter(state=AllocationState.ACTIVE, borrowed=True).exists()
    ):
        reclaimed = sum(a["outcome"] == "done" for a in _reclaimer(now))
    t4 = time.perf_counter()
    summary = {
        "pending": len(pending),
        "expired": expired,
        "bind_failed": failed,
        "placed": 0,
        **plan.summary(),
        "reclaimed": reclaimed,
        **replaced,
    }
    summary["engine_calls"] = plan.engine_calls
    summary |= {
        "load_s": t1 - t0,
        "plan_s": t2 - t1,
        "bind_s": t3 - t2,
        "write_s": t4 - t3,
        "duration_s": t4 - t0,
    }
    return {k: round(v, 4) if isinstance(v, float) else v for k, v in summary.items()}


#: pending codes for which a job within its pool's guarantee may reclaim borrowed GPUs
_RECLAIMABLE = (PendingCode.CAPACITY, PendingCode.FRAGMENTATION, PendingCode.CONGESTION)


def _may_reclaim(job: Job, infos) -> bool:
    """Cheap first check (the rebalancer checks exactly): a job that fits in its pool's
    guaranteed share on top of what the pool held before the pass — whole GPUs and a fraction
    (one GPU more) against ``guaranteed_gpus``, MIG slices against ``guaranteed_slices``."""
    info = infos.get(job.pool_id)
    if job.kind == JobKind.MIG:
        used = info.used_slices if info is not None else 0
        return bool(job.pool.guaranteed_slices) and used + job.count <= job.pool.guaranteed_slices
    used = info.used_gpus if info is not None else 0
    more = job.count if job.kind == JobKind.GPU else 1
    return bool(job.pool.guaranteed_gpus) and used + more <= job.pool.guaranteed_gpus


def _decision_dict(out: Outcome) -> dict[str, Any]:
    d = dict(out.decision or {})
    d["code"], d["reasons"] = out.code, list(out.reasons)
    if out.victims:
        d["victims"] = list(out.victims)
    if out.backfilled:
        d["backfilled"] = True
    if out.reservation is not None:
        d["reservation"] = {
            "start": datetime.fromtimestamp(out.reservation.start, tz=UTC).isoformat(),
            "hosts": sorted(out.reservation.hosts),
            "waits_for": list(out.reservation.waits_for),
        }
    return d


def bind_job(
    out: Outcome,
    loc,
    now: datetime,
    *,
    victim_reason: Callable[[Job, Job], str] | None = None,
    source: str = "pass",
    user=None,
    also: Callable[[Job], None] | None = None,
) -> tuple[str, list[str]] | None:
    """Place one planned job (module docstring: one transaction). None when placed, else the
    pending code and reasons (nothing written then).

    The rebalancer (``scheduler.services.rebalance``) binds its reclaims here too: its
    ``victim_reason(job, victim)`` says why a victim loses its GPUs (default: preempted for the
    job's priority), ``source`` goes with the signals, ``user`` into the audit entries, and
    ``also(job)`` writes its own event and audit entry in the same transaction once the job is
    placed."""
    try:
        with transaction.atomic():
            ids = sorted({out.job_id, *out.victims})
            rows = {
                j.pk: j
                for j in Job.objects.select_for_update(of=("self",)).select_related("pool", "tenant").filter(pk__in=ids).order_by("pk")
            }  # fmt: skip
            job = rows.get(out.job_id)
            if job is None or job.state != JobState.PENDING:
                return PendingCode.CONFLICT.value, ["the job changed since the pass planned it"]
            victims = [rows.get(v) for v in out.victims]
            if any(v is None or v.state not in HOLDING for v in victims):
                return PendingCode.CONFLICT.value, [
                    "a job chosen for preemption ended or changed since the pass planned it; the next pass tries again"
                ]
            if victims:  # several pools: locked in pk order here (one pool: the service locks it)
                _lock_pools([job.pool_id, *(v.pool_id for v in victims)])
            for v in victims:
                why = (
                    victim_reason(job, v)
                    if victim_reason
                    else f"preempted by {seen_by(job, v)} ({job.priority_class} priority)"
                )
                _end(v, JobState.PREEMPTED, why, now, user, source)
            req = AllocationRequest(
                kind=job.kind, count=job.count, job=job.reference, tenant_id=job.tenant_id
            )
            if job.kind == JobKind.GPU:
                req.gpu_ids = _pick_gpus(job, out.placed, loc)
            elif job.kind == JobKind.MIG:
                req.mig_profile = job.mig_profile
            else:
                req.gpu_ids, req.memory_mib, req.compute_pct = (
                    list(out.gpu_ids),
                    job.memory_mib,
                    job.compute_pct,
                )
            alloc = allocate(job.pool_id, req, now=now)
            placement = dict(out.placed)
            reasons = list(out.reasons)
            if job.kind == JobKind.MIG:  # the pools' service picks the slices by profile
                placement = _placement_of(alloc, loc)
                if placement != out.placed:
                    reasons.append(
                        "MIG slices were picked by the pools' allocation service by profile: "
                        + ", ".join(f"{h}: {n}" for h, n in sorted(placement.items()))
                    )
            decision = _decision_dict(out) | {"reasons": reasons, "allocation": alloc.pk}
            if job.pool.job_isolation:  # the job's own partition of its hosts (applied on commit)
                try:
                    part = open_job_partition(job.pool, job.pk, alloc.pk)
                except NoJobPKey as exc:
                    raise _Refused(f"{exc}; the next pass tries again") from None
                job.partition, job.pkey = part, part.pkey
                decision["pkey"] = part.pkey_hex
                reasons.append(f"isolated in its own partition {part.name} (PKey {part.pkey_hex})")
            _mark_placed(job, alloc, placement, decision, now)
            job.save(update_fields=["state", "placed_at", "allocation", "placement", "decision", "decided_at",
                                    "reason", "pending_code", "reserved_start", "reserved_hosts", "partition",
                                    "pkey"])  # fmt: skip
            _record_decision(
                job, "placed", reasons, {k: v for k, v in decision.items() if k != "reasons"}, now, trim=False
            )
            record_events(
                _fabric_for(job), [_placed_event(job, out, alloc, placement, reasons, decision)], at=now
            )
            audit.record("job.place", job, _place_changes(out, alloc, placement, decision), user=user)
            if also is not None:
                also(job)
            _send(job, JobState.PENDING, source)
    except _Refused as exc:
        return PendingCode.CONFLICT.value, [str(exc)]
    except (AllocationError, JobConflict) as exc:
        return _refused_by_pools(exc)
    return None


def _refused_by_pools(exc: Exception) -> tuple[str, list[str]]:
    """The pending code and reason of a placement the pools refused: ``quota`` for
    ``QuotaExceeded``, else ``conflict`` (a GPU taken meanwhile; the next pass tries again)."""
    if isinstance(exc, QuotaExceeded):
        return PendingCode.QUOTA.value, [str(exc)]
    return PendingCode.CONFLICT.value, [f"the pools refused the binding ({exc}); the next pass tries again"]


#: the fields :func:`_mark_placed` sets (``allocation`` as its id)
_PLACED_FIELDS = ("state", "placed_at", "allocation_id", "placement", "decision", "decided_at", "reason",
                  "pending_code", "reserved_start", "reserved_hosts")  # fmt: skip


def _mark_placed(job: Job, alloc, placement: dict[str, int], decision: dict, now: datetime) -> None:
    """Set ``job``'s placed state in memory (the caller saves it, alone or in bulk)."""
    job.state, job.placed_at, job.allocation, job.placement = JobState.PLACED, now, alloc, placement
    job.decision, job.decided_at, job.reason, job.pending_code = decision, now, "", ""
    job.reserved_start, job.reserved_hosts = None, []


def _placed_event(
    job: Job, out: Outcome, alloc, placement: dict[str, int], reasons: list[str], decision: dict
) -> EventSpec:
    """The ``job.placed`` event of a bound placement (both bind paths)."""
    return _event_spec(
        job, "job.placed",
        f"{job}: placed on {len(placement)} host{'s' if len(placement) != 1 else ''} ({reasons[0]})",
        {"allocation": alloc.pk, "hosts": sorted(placement), "victims": list(out.victims),
         "pkey": decision.get("pkey")},
    )  # fmt: skip


def _place_changes(out: Outcome, alloc, placement: dict[str, int], decision: dict) -> dict:
    """The ``job.place`` audit entry's changes (both bind paths)."""
    return {
        "state": [JobState.PENDING, JobState.PLACED], "allocation": alloc.pk, "placement": placement,
        "victims": list(out.victims), "backfilled": out.backfilled, "pkey": decision.get("pkey"),
    }  # fmt: skip


def _batchable(out: Outcome, job: Job) -> bool:
    """Whether a placement is bound in bulk (:func:`_bind_many`): whole GPUs, no victims to
    preempt first, no job partition to open (those take :func:`bind_job`, one transaction each)."""
    return job.kind == JobKind.GPU and not out.victims and not job.pool.job_isolation


def _bind_many(outs: list[Outcome], loc, now: datetime) -> dict[int, tuple[str, list[str]]]:
    """Place a batch of planned whole-GPU jobs without victims in one transaction (module
    docstring), with the GPUs allocated by ``pools.services.allocation.allocate_many``: the job
    rows locked (pk order) and checked still pending, each placement's free GPUs picked (one
    read per model filter; a GPU goes to one job of the batch), then the allocations, the jobs,
    their history rows, events and audit entries written in bulk. A job the pools refuse (quota,
    a GPU taken meanwhile) stays pending and the others are placed. Returns ``{job id: (pending
    code, reasons)}`` of the jobs not placed (nothing written for them)."""
    refused: dict[int, tuple[str, list[str]]] = {}
    with transaction.atomic():
        rows = {
            j.pk: j
            for j in Job.objects.select_for_update(of=("self",)).select_related("pool", "tenant")
            .filter(pk__any=sorted(o.job_id for o in outs)).order_by("pk")
        }  # fmt: skip
        free: dict[tuple[str, str], dict[int, list[int]]] = {}
        for out in outs:
            job = rows.get(out.job_id)
            if job is not None:
                hosts = free.setdefault((job.pool.gpu_model, job.gpu_model), {})
                hosts.update({loc.hosts[h].host_id: [] for h in out.placed})
        for key, hosts in free.items():
            free[key] = state.free_gpu_ids(hosts, *key)
        todo, requests = [], []
        for out in outs:
            job = rows.get(out.job_id)
            # (a pool given job isolation since the pass loaded it: the next pass opens the partition)
            if job is None or job.state != JobState.PENDING or not _batchable(out, job):
                refused[out.job_id] = (
                    PendingCode.CONFLICT.value,
                    ["the job changed since the pass planned it"],
                )
                continue
            try:
                gpu_ids = _pick_gpus(job, out.placed, loc, free[(job.pool.gpu_model, job.gpu_model)])
            except _Refused as exc:
                refused[out.job_id] = (PendingCode.CONFLICT.value, [str(exc)])
                continue
            todo.append((out, job))
            requests.append((job.pool_id, AllocationRequest(
                kind=job.kind, count=job.count, gpu_ids=gpu_ids, job=job.reference, tenant_id=job.tenant_id
            )))  # fmt: skip
        placed, history, audits, events = [], [], [], {}
        for (out, job), alloc in zip(todo, allocate_many(requests, now=now), strict=True):
            if isinstance(alloc, AllocationError):
                refused[job.pk] = _refused_by_pools(alloc)
                continue
            placement, reasons = dict(out.placed), list(out.reasons)
            decision = _decision_dict(out) | {"reasons": reasons, "allocation": alloc.pk}
            _mark_placed(job, alloc, placement, decision, now)
            placed.append(job)
            history.append(JobDecision(job_id=job.pk, at=now, last_at=now, code="placed", reasons=reasons,
                                       details={k: v for k, v in decision.items() if k != "reasons"}))  # fmt: skip
            fabric_id = job.pool.fabric_id or _fabric_id_of(alloc)
            events.setdefault(fabric_id, []).append(
                _placed_event(job, out, alloc, placement, reasons, decision)
            )
            audits.append(("job.place", job, _place_changes(out, alloc, placement, decision)))
            _send(job, JobState.PENDING, "pass")
        # one UPDATE: each row written once (the placed state set by _mark_placed, its own
        # allocation and decision)
        update_rows(Job, _PLACED_FIELDS, [(j.pk, *(getattr(j, f) for f in _PLACED_FIELDS)) for j in placed])
        create_objects(history)
        for fabric_id, specs in events.items():
            record_events(Fabric(pk=fabric_id) if fabric_id else None, specs, at=now)
        audit.record_many(audits)
    return refused


def _fabric_id_of(alloc) -> int | None:
    return (
        AllocationItem.objects.filter(allocation_id=alloc.pk)
        .values_list("gpu__host__fabric_id", flat=True)
        .first()
    )


class _Refused(Exception):
    """A binding that cannot go on (rolls its transaction back); the message is the reason."""


def _pick_gpus(job: Job, placed: dict[str, int], loc, free: dict[int, list[int]] | None = None) -> list[int]:
    """The free GPUs a placement gets: on each placed host, the lowest ids that match the pool's
    and the job's model filters (read in the binding's transaction, after its victims ended;
    ``free``: host id → those ids read already for a batch, from which the ones picked are
    removed so the next job of the batch cannot get them). Raises :class:`_Refused` when a host
    has fewer than planned (taken meanwhile); nothing is removed from ``free`` then."""
    sites = {loc.hosts[h].host_id: h for h in placed}
    if free is None:
        free = state.free_gpu_ids(sites, job.pool.gpu_model, job.gpu_model)
    picks = []
    for host_id, name in sorted(sites.items(), key=lambda kv: kv[1]):
        have = free.get(host_id, [])
        if len(have) < placed[name]:
            raise _Refused(
                f"{name} has {len(have)} free GPUs, the plan counted {placed[name]} (taken meanwhile); "
                "the next pass tries again"
            )
        picks.append((host_id, placed[name]))
    out = []
    for host_id, n in picks:
        out.extend(free[host_id][:n])
        del free[host_id][:n]
    return out


def _placement_of(alloc, loc) -> dict[str, int]:
    names = {s.host_id: n for n, s in loc.hosts.items()}
    out: dict[str, int] = {}
    for host_id, host_name in alloc.items.filter(active=True).values_list("gpu__host_id", "gpu__host__name"):
        name = names.get(host_id, host_name)
        out[name] = out.get(name, 0) + 1
    return out


def _write_pending(outs: list[Outcome], jobs: dict[int, Job], plan, now: datetime, placed=()) -> None:
    """Record the pass's pending decisions in one transaction: changed ones on the job and as a
    new history row, unchanged ones bump their history row; the head's reservation; and cap the
    history of the jobs it placed."""
    head = plan.reservation.job_id if plan.reservation is not None else None
    if not outs and not placed:
        Job.objects.filter(reserved_start__isnull=False).update(reserved_start=None, reserved_hosts=[])
        return
    with transaction.atomic():
        changed, same = [], []
        for out in outs:
            job = jobs[out.job_id]
            d = _decision_dict(out)
            res = out.reservation
            reserved = (datetime.fromtimestamp(res.start, tz=UTC), sorted(res.hosts)) if res else (None, [])
            if (
                job.pending_code == out.code
                and (job.decision or {}).get("reasons") == d["reasons"]
                and (job.reserved_start, job.reserved_hosts) == reserved
            ):
                same.append(job.pk)
                continue
            job.pending_code, job.reason, job.decision, job.decided_at = (
                out.code,
                d["reasons"][0][:300] if d["reasons"] else "",
                d,
                now,
            )
            job.reserved_start, job.reserved_hosts = reserved
            changed.append(job)
        still = set(
            Job.objects.select_for_update(of=("self",))
            .filter(pk__any=sorted([j.pk for j in changed] + same), state=JobState.PENDING)
            .order_by("pk")
            .values_list("pk", flat=True)
        )  # a job cancelled or placed meanwhile keeps what its writer wrote
        changed = [j for j in changed if j.pk in still]
        same = [pk for pk in same if pk in still]
        update_rows(
            Job,
            ["pending_code", "reason", "decision", "decided_at", "reserved_start", "reserved_hosts"],
            [(j.pk, j.pending_code, j.reason, j.decision, j.decided_at, j.reserved_start, j.reserved_hosts)
             for j in changed],
        )  # fmt: skip
        create_objects(
            [
                JobDecision(job_id=j.pk, at=now, last_at=now, code=j.pending_code, reasons=j.decision["reasons"],
                            details={k: v for k, v in j.decision.items() if k != "reasons"})
                for j in changed
            ],
        )  # fmt: skip
        if changed or placed:
            _trim([j.pk for j in changed] + list(placed))
        if same:
            last = (
                JobDecision.objects.filter(job_id__any=same)
                .values("job_id")
                .annotate(m=Max("id"))
                .values_list("m", flat=True)
            )
            JobDecision.objects.filter(pk__any=list(last)).update(count=F("count") + 1, last_at=now)
            Job.objects.filter(pk__any=same).update(decided_at=now)
        stale = Job.objects.filter(reserved_start__isnull=False)
        if head is not None:
            stale = stale.exclude(pk=head)
        stale.update(reserved_start=None, reserved_hosts=[])


__all__ = [
    "InvalidJob",
    "JobConflict",
    "JobError",
    "JobSpec",
    "allocation_lost",
    "cancel",
    "check_capacity",
    "describe",
    "expire_idempotency_keys",
    "expire_time_limits",
    "key_expired",
    "finish",
    "move",
    "pass_inputs",
    "queue_order",
    "request_pass",
    "run_pass",
    "start",
    "submit",
]
