"""Which Celery queue a task goes to: fabric I/O apart from control work (issue 22), and each
fabric's I/O at its collector site (issue 25 §2).

A hung fabric (an ``ibnetdiscover`` waiting out its 300 s timeout, sweeps waiting out theirs) used
to occupy every worker process, and the scheduler's passes, the watchdogs and the alarm mail
waited minutes behind it. And only a host cabled to a fabric can run its diags. So:

* :data:`CONTROL_QUEUE` (``control``): everything that is not one fabric's I/O — scheduling passes
  and rebalancing, watchdogs, alarm evaluation and mail, leases, rollups, pruning, and the
  periodic *fan-outs* (``discover_all_task``, ``poll_all_task``, ``sm_watch_task``,
  ``reconcile_partitions_task``, ``collect_all_task``, ``collect_switch_health_task``, ``collect_cable_info_task``,
  ``poll_devices_task`` without a site),
  which only queue one task per fabric (or per device group of a site) and return.
* a **site queue** per collector site (``core.sites.site_queue``: ``fabric`` for the default
  site, ``fabric.<site>`` for the others): every task that talks to one fabric or to the managed
  devices of one site — the diags, PerfMgt MADs, SMPs, OpenSM, SNMP — and may take minutes:
  :data:`PER_FABRIC_TASKS` (by the fabric's ``Fabric.site``) and :data:`PER_SITE_TASKS` (by their
  ``site`` argument).

Production runs workers with ``-Q control`` and, on each host cabled to fabrics, with the queues
of their sites (README "Production deployment"); a worker started without ``-Q`` consumes
``control`` and ``fabric`` (``settings.CELERY_TASK_QUEUES``). The embedded deployment's in-process
worker keeps one thread pool for control and one for every site (``weft.inprocess``).
"""

from __future__ import annotations

from typing import Any

from core.sites import FABRIC_QUEUE, site_queue

CONTROL_QUEUE = "control"
__all__ = ["CONTROL_QUEUE", "FABRIC_QUEUE", "fabric_queue", "queue_for", "route_task"]

#: tasks of one fabric, by name: the fabric's id is the first argument or ``fabric_id``
PER_FABRIC_TASKS = frozenset(
    {
        "fabric.tasks.discover_fabric_task",
        "fabric.tasks.apply_partitions_task",
        "fabric.tasks.sm_watch_fabric_task",
        "fabric.tasks.reconcile_fabric_task",
        "fabric.tasks.port_action_task",
        "fabric.tasks.collect_switch_health_fabric_task",
        "fabric.tasks.collect_cable_info_fabric_task",
        "telemetry.tasks.poll_fabric_task",
        "routing.tasks.collect_routes_task",
    }
)
#: tasks of one site's devices: the site is the ``site`` keyword argument (None: the fan-out)
PER_SITE_TASKS = frozenset({"devices.tasks.poll_devices_task"})
#: every task that does fabric (or managed-device) I/O
FABRIC_IO_TASKS = PER_FABRIC_TASKS | PER_SITE_TASKS


def fabric_site(fabric_id: int | None) -> str | None:
    """``Fabric.site`` of fabric ``fabric_id`` (None for None or a fabric that no longer exists)."""
    if fabric_id is None:
        return None
    from fabric.models import Fabric

    try:
        return Fabric.objects.filter(pk=int(fabric_id)).values_list("site", flat=True).first()
    except (TypeError, ValueError):
        return None


def fabric_queue(fabric_id: int | None) -> str:
    """The queue of fabric ``fabric_id``'s I/O: its site's (``core.sites.site_queue``); the default
    site's ``fabric`` queue for None or an unknown fabric (the task then finds no fabric and ends)."""
    return site_queue(fabric_site(fabric_id))


def queue_for(name: str, args: tuple | list | None = None, kwargs: dict | None = None) -> str:
    """The queue of a call of task ``name`` with ``args``/``kwargs`` (see the module docstring)."""
    kwargs = kwargs or {}
    if name in PER_FABRIC_TASKS:
        return fabric_queue(kwargs.get("fabric_id", args[0] if args else None))
    if name in PER_SITE_TASKS:
        site = kwargs.get("site")
        return CONTROL_QUEUE if site is None else site_queue(site)
    return CONTROL_QUEUE


def route_task(name: str, args: Any, kwargs: Any, options: dict, task=None, **kw) -> dict:
    """Celery router (``settings.CELERY_TASK_ROUTES``): ``{"queue": queue_for(...)}``."""
    return {"queue": queue_for(name, args, kwargs)}
