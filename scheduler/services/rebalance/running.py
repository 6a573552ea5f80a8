"""Planning and running the rebalancer: :func:`plan_rebalance` (every planner, in execution order, on
one snapshot; writes nothing), :func:`run_rebalance` (a dry run, or a real one under the pass lock
executing each action: reclaims bound through the queue's binder, ``scheduler.services.queue.binder``;
moves through ``queue.binder.move``; replacements and requeues through the fault service; proposals
and reports as events, once each) and :func:`reclaim_for_guarantees` (a scheduling pass's last
step).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts import audit
from core.locks import single_instance
from events.models import Event
from pools.services.allocation import AllocationError

from ...choices import HOLDING
from ...models import Job
from ...placement import PLACED
from ...planner import Outcome
from .. import faults, state

# the queue stays the one writer of jobs: the rebalancer binds and moves them through its binder
from ..queue.binder import bind_job, move
from ..queue.passes import PASS_LIMIT_S, PASS_LOCK
from ..queue.records import job_event, seen_by
from ..queue.spec import JobError
from .common import CONGESTED, RECLAIM, REPLACE, REQUEUE, Action, load_snapshot
from .congestion import plan_congested
from .faulted import plan_faults
from .moves import plan_moves
from .reclaims import plan_reclaims

log = logging.getLogger(__name__)


_SOURCE = "rebalance"


def plan_rebalance(now: datetime | None = None) -> list[Action]:
    """The actions a rebalancing run takes now (module docstring), in execution order. Reads the
    database, writes nothing; the same stored state gives the same list."""
    st = load_snapshot(now or timezone.now())
    return [*plan_faults(st), *plan_reclaims(st), *plan_moves(st), *plan_congested(st)]


def run_rebalance(dry_run: bool = True, user=None, *, now: datetime | None = None) -> dict[str, Any]:
    """Plan (:func:`plan_rebalance`) and, unless ``dry_run``, execute. Returns ``{"dry_run",
    "actions": [Action.as_dict() + "outcome"], "counts": {kind: n}}``; ``outcome`` is ``would
    execute`` / ``proposed`` / ``reported`` in a dry run, and ``done`` / ``refused: …`` /
    ``proposed`` / ``reported`` in a real one. A real run holds the pass lock; when a pass (or
    another run) holds it, nothing is done and ``{"skipped": …}`` is returned. A dry run reads
    only and takes no lock."""
    now = now or timezone.now()
    if dry_run:
        actions = plan_rebalance(now)
        return _result(True, actions, ["would execute" if a.execute else _passive(a) for a in actions])
    with single_instance(PASS_LOCK, PASS_LIMIT_S) as mine:
        if not mine:
            return {
                "dry_run": False,
                "skipped": "a scheduling pass or rebalancing run is running",
                "actions": [],
            }
        actions = plan_rebalance(now)
        loc = state.current_locality()
        outcomes = [_execute(a, loc, now, user) for a in actions]
    return _result(False, actions, outcomes)


def reclaim_for_guarantees(now: datetime, user=None) -> list[dict[str, Any]]:
    """Plan and take only the ``reclaim`` actions (module docstring), for a caller that holds the
    pass lock: a scheduling pass, after binding its own plan, so that a pool's guarantee is
    served at once rather than at the next rebalancing run. Returns the actions' dicts with
    their ``outcome``."""
    st = load_snapshot(now)
    return [a.as_dict() | {"outcome": _execute(a, st.loc, now, user)} for a in plan_reclaims(st)]


def _passive(a: Action) -> str:
    return "reported" if a.kind == CONGESTED else "proposed"


def _result(dry_run: bool, actions: list[Action], outcomes: list[str]) -> dict[str, Any]:
    counts: dict[str, int] = defaultdict(int)
    for a in actions:
        counts[a.kind] += 1
    return {
        "dry_run": dry_run,
        "actions": [a.as_dict() | {"outcome": o} for a, o in zip(actions, outcomes, strict=True)],
        "counts": dict(counts),
    }


def _execute(a: Action, loc, now: datetime, user) -> str:
    try:
        if not a.execute:
            _note(a, now)
            return _passive(a)
        if a.kind == RECLAIM:
            return _reclaim(a, loc, now, user)
        if a.kind == REPLACE:
            return _replace(a, loc, now, user)
        if a.kind == REQUEUE:
            ok = faults.requeue_degraded(a.job_id, now, f"fabric fault (rebalance): {a.reason}"[:300])
            return "done" if ok else "refused: the job is no longer degraded"
        return _move(a, loc, now, user)
    except Exception:  # one action's failure must not stop the others; the next run plans again
        log.exception("rebalance action %s of job %s failed", a.kind, a.job_id)
        return "refused: internal error (logged)"


def _reclaim(a: Action, loc, now: datetime, user) -> str:
    decision = dict(a.details["decision"])
    out = Outcome(a.job_id, 0, PLACED, [a.reason, *decision.get("reasons", [])], decision)
    out.placed, out.victims = dict(a.placed), list(a.victims)
    if a.details.get("gpu") is not None:  # a fraction: on the GPU its victims made room on
        out.gpu_ids = [a.details["gpu"]]
    unit = a.details.get("unit", "GPUs")

    def recorded(job: Job) -> None:
        job_event(job, "job.reclaimed", f"{job}: placed on reclaimed {unit} ({a.reason})", now,
               {"victims": a.victims, "hosts": sorted(a.placed), "kind": job.kind,
                "reason": a.reason})  # fmt: skip
        audit.record(
            "job.reclaim", job, {"victims": a.victims, "placement": a.placed, "reason": a.reason}, user=user
        )

    refused = bind_job(
        out, loc, now,
        victim_reason=lambda job, victim: (
            f"reclaimed for {seen_by(job, victim)}: "
            + (f"pool {job.pool.name}'s" if job.tenant_id == victim.tenant_id else "its pool's")
            + f" guaranteed {unit}"
        ),
        source=_SOURCE, user=user, also=recorded,
    )  # fmt: skip
    return "done" if refused is None else f"refused: {' '.join(refused[1])}"


def _replace(a: Action, loc, now: datetime, user) -> str:
    """A degraded job's replacement, through the scheduler's own (``faults.replace_hosts``)."""
    d = a.details
    plan = faults.Replacement(a.job_id, d["failed"], d["picks"], d["placement"], d["new"], "",
                              d.get("summary", ""))  # fmt: skip
    try:
        faults.replace_hosts(plan, loc, now, user=user, source=_SOURCE)
    except JobError as exc:
        return f"refused: {exc}"
    except AllocationError as exc:
        return f"refused: the pools refused the replacement ({exc})"
    except Job.DoesNotExist:
        return "refused: the job is gone"
    return "done"


def _move(a: Action, loc, now: datetime, user) -> str:
    try:
        move(
            a.job_id, a.placed, loc, expected_allocation=a.details.get("allocation"), expected_placement=a.before,
            reason=a.reason, details={**a.details["decision"], "frees": a.frees}, user=user, now=now,
        )  # fmt: skip
    except JobError as exc:
        return f"refused: {exc}"
    except AllocationError as exc:
        return f"refused: the pools refused the move ({exc})"
    except Job.DoesNotExist:
        return "refused: the job is gone"
    return "done"


def _note(a: Action, now: datetime) -> None:
    """A proposal's or report's event, once per job and target since the job was placed (a
    proposed requeue has none: the job's ``job.degraded`` event already says why)."""
    if a.kind == REQUEUE:
        return
    code = "job.congested" if a.kind == CONGESTED else "job.move_proposed"
    with transaction.atomic():
        job = Job.objects.select_related("pool", "tenant").filter(pk=a.job_id, state__in=HOLDING).first()
        if job is None:
            return
        seen = Event.objects.filter(code=code, object_type="job", object_key=str(job.pk))
        if job.placed_at is not None:
            seen = seen.filter(at__gte=job.placed_at)
        if any((d or {}).get("to") == a.placed for d in seen.values_list("details", flat=True)):
            return
        job_event(
            job, code, f"{job}: {a.reason}", now, {"from": a.before, "to": a.placed, "reason": a.reason}
        )
