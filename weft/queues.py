"""Which Celery queue a task goes to: fabric I/O apart from control work (issue 22).

A hung fabric (an ``ibnetdiscover`` waiting out its 300 s timeout, sweeps waiting out theirs) used
to occupy every worker process, and the scheduler's passes, the watchdogs and the alarm mail
waited minutes behind it. Two queues:

* :data:`FABRIC_QUEUE` (``fabric``): tasks that talk to a fabric or a managed device — the diags,
  PerfMgt MADs, OpenSM, SNMP — and may take minutes: :data:`FABRIC_IO_TASKS`;
* :data:`CONTROL_QUEUE` (``control``): everything else — scheduling passes and rebalancing,
  watchdogs, alarm evaluation and mail, leases, rollups, pruning. Short, database-only work.

Production runs workers with ``-Q control`` and ``-Q fabric`` (README "Production deployment");
a worker started without ``-Q`` consumes both (``settings.CELERY_TASK_QUEUES``). The embedded
deployment's in-process worker keeps one thread pool per queue (``weft.inprocess``).

Every fabric I/O task is routed through :func:`fabric_queue` with its fabric's id (None for the
periodic tasks that go over every fabric): the one place where a fabric's own queue (a collector
site's, issue 25 §2) is to be named.
"""

from __future__ import annotations

from typing import Any

CONTROL_QUEUE = "control"
FABRIC_QUEUE = "fabric"

#: tasks of one fabric, by name: the fabric's id is the first argument or ``fabric_id``
PER_FABRIC_TASKS = frozenset(
    {
        "fabric.tasks.discover_fabric_task",
        "fabric.tasks.apply_partitions_task",
        "telemetry.tasks.poll_fabric_task",
        "routing.tasks.collect_routes_task",
    }
)
#: every task that does fabric (or managed-device) I/O
FABRIC_IO_TASKS = PER_FABRIC_TASKS | frozenset(
    {
        "fabric.tasks.discover_all_task",
        "fabric.tasks.sm_watch_task",
        "fabric.tasks.reconcile_partitions_task",
        "fabric.tasks.collect_switch_health_task",
        "telemetry.tasks.poll_all_task",
        "devices.tasks.poll_devices_task",
        "routing.tasks.collect_all_task",
    }
)


def fabric_queue(fabric_id: int | None) -> str:
    """The queue of fabric ``fabric_id``'s I/O (None: a task over every fabric). Today every
    fabric's I/O shares :data:`FABRIC_QUEUE`."""
    return FABRIC_QUEUE


def queue_for(name: str, args: tuple | list | None = None, kwargs: dict | None = None) -> str:
    """The queue of a call of task ``name`` with ``args``/``kwargs`` (see the module docstring)."""
    if name not in FABRIC_IO_TASKS:
        return CONTROL_QUEUE
    fabric_id = None
    if name in PER_FABRIC_TASKS:
        fabric_id = (kwargs or {}).get("fabric_id", args[0] if args else None)
    return fabric_queue(fabric_id)


def route_task(name: str, args: Any, kwargs: Any, options: dict, task=None, **kw) -> dict:
    """Celery router (``settings.CELERY_TASK_ROUTES``): ``{"queue": queue_for(...)}``."""
    return {"queue": queue_for(name, args, kwargs)}
