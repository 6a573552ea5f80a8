"""The ``replace`` / ``requeue`` actions for degraded jobs whose hosts lost their fabric: what the
job's ``on_fault`` does, by the scheduler's own rule (``scheduler.services.faults.plan_replacement``).
Plans only (:func:`plan_faults`); the running module executes through the fault service.
"""

from __future__ import annotations

from ...choices import JobState, OnFault
from .. import faults
from .common import REPLACE, REQUEUE, Action, Snapshot, label, take


def plan_faults(st: Snapshot) -> list[Action]:
    """The ``replace`` / ``requeue`` actions for degraded jobs whose hosts lost their fabric
    (module docstring): what the job's ``on_fault`` does, by the scheduler's own rule
    (``faults.plan_replacement``: a healthy host of the same placement unit with the GPUs),
    executed by a real run; for a ``notify`` job the same, proposed as the admin's option
    (``POST /api/scheduler/jobs/{id}/replace/``). The hosts a replacement takes are taken from
    this plan's free GPUs, so no later action counts them."""
    out: list[Action] = []
    taken: dict[str, int] = {}
    degraded = sorted(
        (j for j in st.jobs.values() if j.state == JobState.DEGRADED and j.allocation_id and faults.failing_hosts(j)),
        key=lambda j: (-j.priority, j.submitted_at, j.pk),
    )  # fmt: skip
    for job in degraded:
        policy = job.effective_on_fault
        plan = faults.plan_replacement(job, st.loc, st.unusable, st.inv, taken)
        head = f"{label(job)} is degraded ({plan.causes}); its on_fault is {policy}"
        where = {
            h: st.loc.domains[s.unit].name
            for h in plan.failed
            if (s := st.loc.hosts.get(h)) and s.unit in st.loc.domains
        }
        swaps = "; ".join(
            f"{h} by {p}" + (f" in {where[h]}" if h in where else "") for h, p in sorted(plan.picks.items())
        )  # fmt: skip
        details = {
            "on_fault": policy, "failed": plan.failed, "picks": plan.picks, "placement": plan.placement,
            "new": plan.new, "causes": [f.get("code") for f in job.faults or ()], "summary": plan.causes, "allocation": job.allocation_id,
        }  # fmt: skip
        if policy == OnFault.REQUEUE:
            a = Action(REQUEUE, job.pk, f"{head}: release its GPUs and queue it again with its submit time and "
                       "priority", True, before=dict(plan.placement), details=details)  # fmt: skip
        elif plan.ok:
            if policy == OnFault.REPLACE:
                reason = f"{head}: replace {swaps}"
            else:
                reason = (f"{head} (it keeps running degraded); admin option: replace {swaps} "
                          f"(POST /api/scheduler/jobs/{job.pk}/replace/)")  # fmt: skip
                details["apply"] = f"/api/scheduler/jobs/{job.pk}/replace/"
            a = Action(REPLACE, job.pk, reason, policy == OnFault.REPLACE, placed=dict(plan.new),
                       before=dict(plan.placement), details=details)  # fmt: skip
            key = st.key(job)
            for h, p in plan.picks.items():
                take(st.inv, {p: plan.placement[h]}, key)
        elif policy == OnFault.REPLACE:
            a = Action(REQUEUE, job.pk, f"{head}, but {plan.why}: requeue it, as the scheduler does", True,
                       before=dict(plan.placement), details=details)  # fmt: skip
        else:
            a = Action(REQUEUE, job.pk, f"{head} (it keeps running degraded); {plan.why}; admin option: "
                       "requeue it", False, before=dict(plan.placement), details=details)  # fmt: skip
        if not a.execute:
            a.label = f"{a.kind} (admin option)"
        st.touched.add(job.pk)
        out.append(a)
    return out
