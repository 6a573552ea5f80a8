"""The binder: a planned placement made real, one transaction each, shared by the scheduling pass,
the rebalancer's reclaims (``scheduler.services.rebalance``) and the fault service's replacements.

* :func:`bind_job` — one planned job: the job row (and its victims' rows) locked and checked still
  pending (still holding), the victims preempted (:func:`~.ends.end_job`), the job's GPUs, MIG slices
  or fraction allocated (``pools.services.allocation.allocate``), its own partition opened in a pool
  with ``job_isolation``, the job placed, its decision, event and audit entry. Returns None when
  placed, else the pending code and reasons (nothing written then).
* :func:`bind_many` — a batch of plain whole-GPU placements without victims (:func:`batchable`) in
  one transaction, the GPUs allocated by ``pools.services.allocation.allocate_many``; a job the pools
  refuse stays pending, the others are placed.
* :func:`move` — a placed or running whole-GPU job moved to other hosts (the rebalancer's
  defragmenting moves, the fault service's replacements): allocation released and a new one bound.

:func:`decision_dict` is a planner outcome as the job's ``decision`` (the pass writes its pending
ones with it too).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts import audit
from core.bulk import create_objects, update_rows
from events.services import EventSpec, record_events
from fabric.models import Fabric
from pools.models import AllocationItem
from pools.services.allocation import (
    AllocationError,
    AllocationRequest,
    QuotaExceeded,
    allocate,
    allocate_many,
    release,
)
from pools.services.partitions import NoJobPKey, open_job_partition

from ...choices import HOLDING, JobKind, JobState, PendingCode
from ...models import Job, JobDecision
from ...planner import Outcome
from .. import state
from .ends import close_partition, end_job
from .records import (
    event_spec,
    fabric_for,
    job_event,
    lock_pools,
    locked,
    record_decision,
    seen_by,
    send_changed,
)
from .spec import JobConflict


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
        job = locked(job_id)
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
            close_partition(job, user)
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
        record_decision(
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
        send_changed(job, previous, "rebalance")
    return job


def decision_dict(out: Outcome) -> dict[str, Any]:
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
                lock_pools([job.pool_id, *(v.pool_id for v in victims)])
            for v in victims:
                why = (
                    victim_reason(job, v)
                    if victim_reason
                    else f"preempted by {seen_by(job, v)} ({job.priority_class} priority)"
                )
                end_job(v, JobState.PREEMPTED, why, now, user, source)
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
            decision = decision_dict(out) | {"reasons": reasons, "allocation": alloc.pk}
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
            record_decision(
                job, "placed", reasons, {k: v for k, v in decision.items() if k != "reasons"}, now, trim=False
            )
            record_events(
                fabric_for(job), [_placed_event(job, out, alloc, placement, reasons, decision)], at=now
            )
            audit.record("job.place", job, _place_changes(out, alloc, placement, decision), user=user)
            if also is not None:
                also(job)
            send_changed(job, JobState.PENDING, source)
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
    return event_spec(
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


def batchable(out: Outcome, job: Job) -> bool:
    """Whether a placement is bound in bulk (:func:`bind_many`): whole GPUs, no victims to
    preempt first, no job partition to open (those take :func:`bind_job`, one transaction each)."""
    return job.kind == JobKind.GPU and not out.victims and not job.pool.job_isolation


def bind_many(outs: list[Outcome], loc, now: datetime) -> dict[int, tuple[str, list[str]]]:
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
            if job is None or job.state != JobState.PENDING or not batchable(out, job):
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
            decision = decision_dict(out) | {"reasons": reasons, "allocation": alloc.pk}
            _mark_placed(job, alloc, placement, decision, now)
            placed.append(job)
            history.append(JobDecision(job_id=job.pk, at=now, last_at=now, code="placed", reasons=reasons,
                                       details={k: v for k, v in decision.items() if k != "reasons"}))  # fmt: skip
            fabric_id = job.pool.fabric_id or _fabric_id_of(alloc)
            events.setdefault(fabric_id, []).append(
                _placed_event(job, out, alloc, placement, reasons, decision)
            )
            audits.append(("job.place", job, _place_changes(out, alloc, placement, decision)))
            send_changed(job, JobState.PENDING, "pass")
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
