"""A job's history as its page shows it: the timeline of its state changes and the GPUs it holds
now and held before (issue 26 §4: after a requeue or a replacement the page showed the first
placement's time with the replacement's reason, no step for the requeue, and "never placed" for a
requeued job that had held GPUs).

Read only, from the records their writers keep:

* the **timeline** from the queue's per-job history (``JobDecision``: one row per state change,
  written by ``scheduler.services.queue`` and ``scheduler.services.faults`` with the same ``now``
  they store in the job's fields), its state-change codes only (not the pending codes a pass
  repeats); the history is capped per job (``WEFT_SCHEDULER_DECISION_HISTORY``), so the job's own
  fields (``submitted_at``, ``placed_at``, ``started_at``, ``degraded_at``, ``ended_at``) add the
  steps the cap trimmed away;
* the **allocations** from the pools' records (``pools.Allocation`` rows whose ``job`` is the
  job's reference, ``Job.reference``; their GPUs from ``AllocationItem``, inactive ones
  included): the one the job holds now, and the ones it held before (released by a requeue,
  a move or a replacement, or at its end).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from typing import Any

from django.db.models import Q

from pools.models import Allocation, AllocationItem

from ..choices import FINAL, HOLDING
from ..models import Job
from . import faults

#: the history codes that are steps of the timeline (the pending codes are not)
STEP_CODES = frozenset(
    {"placed", "running", "degraded", "recovered", "requeued", "moved", *(str(s) for s in FINAL)}
)
#: two records of one step are at most this far apart (a field and a history row share their ``now``)
_SAME = timedelta(seconds=1)


def job_timeline(job: Job) -> list[dict[str, Any]]:
    """The job's steps, oldest first: ``[{"code": "submitted" | "placed" | "running" |
    "degraded" | "recovered" | "requeued" | "moved" | a final state, "at": datetime, "reason":
    str}]``. ``reason`` is the first of the history row's reasons ("" for ``running``), the
    fabric faults' summary for a degraded step known from the job's field only."""
    steps: list[dict[str, Any]] = [{"code": "submitted", "at": job.submitted_at, "reason": ""}]
    for code, at, reasons in (
        job.decisions.filter(code__in=sorted(STEP_CODES)).order_by("at", "id").values_list("code", "at", "reasons")
    ):  # fmt: skip
        reason = (reasons or [""])[0] if code != "running" else ""
        steps.append({"code": code, "at": at, "reason": reason if isinstance(reason, str) else str(reason)})
    decision = job.decision or {}  # the last decision: the placement's only while it is the last
    placed_why = (decision.get("reasons") or [""])[0] if decision.get("code", "placed") == "placed" else ""
    fields = [
        ("placed", job.placed_at, placed_why),
        ("running", job.started_at, ""),
        ("degraded", job.degraded_at, faults.summary(job.faults) or job.reason),
        (job.state, job.ended_at, job.reason),
    ]
    for code, at, reason in fields:
        if at is None or any(s["code"] == code and abs(s["at"] - at) <= _SAME for s in steps):
            continue
        steps.append({"code": code, "at": at, "reason": reason})
    steps.sort(key=lambda s: (s["at"], s["code"] != "submitted"))
    return steps


def allocation_hosts(allocation_ids) -> dict[int, list[dict[str, Any]]]:
    """The hosts of allocations, by allocation id: ``{id: [{"name", "host_id", "gpus": [GPU
    index], "units": ["GPU3", "GPU7 MIG 1g.10gb gi1", "GPU2 (20480 MiB, 50 %)", …]}]}`` by host
    name, from all their items (a released allocation's too: what it held). One query."""
    out: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
    for item in (
        AllocationItem.objects.filter(allocation_id__in=list(allocation_ids))
        .select_related("gpu__host", "mig_slice")
        .order_by("gpu__host__name", "gpu__index", "pk")
    ):
        gpu = item.gpu
        hosts = out[item.allocation_id]
        h = hosts.setdefault(
            gpu.host.name, {"name": gpu.host.name, "host_id": gpu.host_id, "gpus": [], "units": []}
        )
        if gpu.index not in h["gpus"]:
            h["gpus"].append(gpu.index)
        unit = f"GPU{gpu.index}"
        if item.mig_slice_id:
            unit += f" MIG {item.mig_slice.profile or '?'} gi{item.mig_slice.gpu_instance_id}"
        elif item.memory_mib:
            unit += f" ({item.memory_mib} MiB, {item.compute_pct} %)"
        h["units"].append(unit)
    return {a: [hosts[n] for n in sorted(hosts)] for a, hosts in out.items()}


def job_allocations(job: Job) -> dict[str, Any]:
    """The job's allocations: ``{"current": allocation | None, "past": [allocation, newest
    first]}``, an allocation being ``{"id", "state", "started_at", "ended_at", "end_reason",
    "hosts": [{"name", "host_id", "gpus", "units"}]}``. ``current`` is the one it holds
    (placed, running, degraded); a pending job (requeued) and an ended one hold none: every
    allocation it had is past, the last one first."""
    allocations = list(
        Allocation.objects.filter(Q(job=job.reference) | Q(pk=job.allocation_id or 0)).order_by("-id")
    )
    hosts = allocation_hosts(a.pk for a in allocations)
    current, past = None, []
    for a in allocations:
        entry = {
            "id": a.pk, "state": a.state, "started_at": a.started_at or a.created, "ended_at": a.ended_at,
            "end_reason": a.end_reason, "hosts": hosts.get(a.pk, []),
        }  # fmt: skip
        if a.pk == job.allocation_id and job.state in HOLDING:
            current = entry
        else:
            past.append(entry)
    return {"current": current, "past": past}
