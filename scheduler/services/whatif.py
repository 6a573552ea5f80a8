"""Dry-run placement: where would a job go if it were submitted now? (issue 12, Demo: "place a
64-GPU job shows the explanation").

:func:`dry_run` loads the same state a pass loads (``scheduler.services.queue.pass_inputs``), adds the asked
job to the pending queue (submitted now, id 0) and plans the pass with
``scheduler.planner.plan_pass`` — the queue's own planner, so the answer (order, quota, placement,
preemption victims, reservation) is what the next pass would decide if nothing changed meanwhile.
Nothing is bound, written or signalled.

When the pool's quota is what keeps the job pending, the engine never looked at the fabric; the
answer then also carries the placement the pass would choose with that pool's quota lifted
(``without_quota``: the asked job alone in a copy of its pool without quota; the pool's other
pending jobs still wait for the quota), so people see where the job would go on the fabric.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

from pools.models import Pool

from ..choices import PRIORITY, JobKind, JobState
from ..models import Job
from ..planner import PENDING_QUOTA, plan_pass
from . import state
from .queue import InvalidJob, JobSpec, check_capacity, describe, pass_inputs, queued_job

#: the id the asked job has in the plan (real jobs have positive ids)
DRY_RUN_ID = 0
#: the pool id of the asked job's pool copy without quota (real pools have positive ids)
LIFTED_POOL_ID = -1


def _outcome_dict(out, loc) -> dict[str, Any]:
    d = out.decision or {}

    def named(keys) -> list[str]:  # unit keys as the admin knows them (leaf or rail pod names)
        return [loc.domains[k].name if k in loc.domains else k for k in keys or ()]

    return {
        "code": out.code,
        "position": out.position,
        "reasons": list(out.reasons),
        "placed": dict(sorted(out.placed.items())),
        "hosts": len(out.placed),
        "victims": list(out.victims),
        "backfilled": out.backfilled,
        "tier_name": d.get("tier_name"),
        "units": d.get("units"),
        "lower_bound": d.get("lower_bound"),
        "congested": named(d.get("congested")),
        "avoided": named(d.get("avoided")),
        "scoring": d.get("scoring", ""),
        "hot_ports": list(d.get("hot_ports") or ()),
        "avoided_ports": list(d.get("avoided_ports") or ()),
        "reservation": None
        if out.reservation is None
        else {
            "start": datetime.fromtimestamp(out.reservation.start, tz=UTC).isoformat(),
            "hosts": sorted(out.reservation.hosts),
        },
    }


def dry_run(spec: JobSpec, *, now: datetime | None = None) -> dict[str, Any]:
    """Plan ``spec`` as if submitted now, with the pending queue (module docstring).

    Returns ``{"request": str (``queue.describe``), "pool": name, "pending_ahead": int (pending
    jobs the pass considers first), "outcome": {"code": "placed" | pending code, "position",
    "reasons": [str], "placed": {host: GPUs}, "hosts", "victims": [job id], "backfilled",
    "tier_name", "units", "lower_bound", "congested", "avoided" (unit names), "scoring" ("paths":
    congestion scored by the hot ports on the hosts' routes, "leaf": by the leaf/spine-block marks,
    the fabric's routes not read yet), "hot_ports"/"avoided_ports" ([{"key", "name", "utilisation",
    "congestion"}]: hot ports its routes may cross / that an equal placement's would have crossed),
    "reservation": {"start",
    "hosts"} | None}, "without_quota": the same outcome with the pool's quota lifted | None}``.

    Raises :class:`~scheduler.services.queue.InvalidJob` (naming the field) and
    ``Pool.DoesNotExist``, as :func:`~scheduler.services.queue.submit` would.
    """
    tier, seg_tier = spec.validate()
    now = now or timezone.now()
    pool = Pool.objects.get(pk=spec.pool_id)
    tenant_id = pool.tenant_id or spec.tenant_id
    if tenant_id is None:
        raise InvalidJob(f"pool {pool.name} is shared: name the tenant the job is for", field="tenant")
    check_capacity(spec, pool)
    probe = Job(
        name=spec.name, tenant_id=tenant_id, pool=pool, kind=spec.kind, count=spec.count,
        gpu_model=spec.gpu_model, mig_profile=spec.mig_profile, memory_mib=spec.memory_mib,
        compute_pct=spec.compute_pct, gpus_per_host=spec.gpus_per_host, segments=spec.segments,
        segment_hosts=spec.segment_hosts, segment_tier=seg_tier, priority_class=spec.priority_class,
        priority=PRIORITY[spec.priority_class], preemptible=spec.preemptible, tier=tier,
        tier_mode=spec.tier_mode, time_limit_s=spec.time_limit_s, submitted_at=now, state=JobState.PENDING,
        pk=DRY_RUN_ID,
    )  # fmt: skip
    asked = queued_job(probe)  # the queue's own view of a job, as for the pending ones
    pending = list(Job.objects.filter(state=JobState.PENDING).select_related("pool", "tenant").order_by("pk"))
    queued = [queued_job(j) for j in pending] + [asked]
    loc = state.current_locality()
    inputs = pass_inputs(
        loc, pending, now, more_pools={pool.pk},
        more_fraction_pools={pool.pk} if spec.kind == JobKind.FRACTION else (),
    )  # fmt: skip
    pools = inputs.pop("pools")
    kinds = {j.kind for j in pending} | {spec.kind}

    def plan(jobs, pool_infos):
        inv = state.load_inventory(loc, kinds)
        result = plan_pass(loc, inv, jobs, pools=pool_infos, **inputs)
        return next(o for o in result.outcomes if o.job_id == DRY_RUN_ID)

    out = plan(queued, pools)
    answer: dict[str, Any] = {
        "request": describe(probe),
        "pool": pool.name,
        "pending_ahead": out.position,
        "outcome": _outcome_dict(out, loc),
        "without_quota": None,
    }
    if out.code == PENDING_QUOTA:
        # the asked job alone in a copy of its pool without quota: the pool's other pending
        # jobs keep waiting for its quota as they would
        alone = dataclasses.replace(
            pools[pool.pk], pool_id=LIFTED_POOL_ID, quota_gpus=None, quota_slices=None
        )
        jobs = queued[:-1] + [dataclasses.replace(asked, pool_id=LIFTED_POOL_ID)]
        answer["without_quota"] = _outcome_dict(plan(jobs, {**pools, LIFTED_POOL_ID: alone}), loc)
    return answer
