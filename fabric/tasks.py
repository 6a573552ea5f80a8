"""Celery tasks of the fabric app: thin wrappers around ``fabric.services`` (STYLE.md).

A fabric is *live-discoverable* when ``discovery_enabled`` is on and it has live access configured:
a non-empty ``tool_env`` (e.g. a lab's ``LD_PRELOAD``/``IBSIM_SOCKNAME``) or ``ca_name`` (the local
HCA the diags use); see ``fabric.collectors.tools.is_live``. Fabrics created by a file import have
neither and are skipped by the beat schedule.

Locks (``core.locks.single_instance``) are leases renewed while the task runs: a worker killed
mid-discovery frees ``fabric.discover.<id>`` within ``WEFT_LOCK_TTL_S``; the renewal stops after
the longest a discovery may take (:func:`_discovery_limit_s`). A SIGTERM-ed worker stops a hanging
``ibnetdiscover`` after ``WEFT_SHUTDOWN_GRACE_S`` (``weft.worker``), so the task records the failed
discovery and the worker exits within its grace period.
"""

from __future__ import annotations

import dataclasses
import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from core.locks import single_instance

log = logging.getLogger(__name__)


def _discovery_limit_s(fabric) -> float:
    """The longest one discovery of ``fabric`` may take: ``ibnetdiscover`` (``discovery_timeout_s``),
    the ``sminfo`` after it (at most ``WEFT_TOOL_TIMEOUT_S``) and 60 s to store the topology.
    The timeout is taken within the model's bounds (a row written before them cannot make the lock
    renewal overflow)."""
    from .models import DISCOVERY_TIMEOUT_MAX_S, DISCOVERY_TIMEOUT_MIN_S

    try:
        timeout = float(fabric.discovery_timeout_s)
    except (TypeError, ValueError):
        timeout = DISCOVERY_TIMEOUT_MAX_S
    if not DISCOVERY_TIMEOUT_MIN_S <= timeout <= DISCOVERY_TIMEOUT_MAX_S:  # NaN included
        timeout = DISCOVERY_TIMEOUT_MAX_S
    return timeout + min(timeout, float(settings.WEFT_TOOL_TIMEOUT_S)) + 60.0


def _unexpected_discovery_failure(fabric, exc: BaseException) -> dict:
    """One fabric's periodic discovery raised something :func:`discover` does not handle (a bug,
    a setting no check caught): that fabric's ``system.discovery_failing`` alarm at once, the
    traceback in the log (a server fault, not a user's mistake), and the run goes on with the
    next fabric. Returns the fabric's summary ``{"fabric", "error"}``."""
    from .services.discovery import record_failure

    reason = f"unexpected error: {type(exc).__name__}: {exc}"
    log.error("periodic discovery of %s failed: %s", fabric.name, reason, exc_info=exc)
    try:
        record_failure(fabric, reason)
    except Exception as record_exc:  # the database itself is failing: the log line above stays
        log.error("could not record the failed discovery of %s: %s", fabric.name, record_exc)
    return {"fabric": fabric.name, "error": reason}


@shared_task(name="fabric.tasks.discover_fabric_task")
def discover_fabric_task(fabric_id: int) -> dict:
    """Discover one fabric live (``fabric.services.discovery.discover``) unless a discovery of it is
    already running (lock ``fabric.discover.<id>``). Returns the command's JSON summary, or
    ``{"skipped": reason}`` / ``{"error": reason}``."""
    from .collectors.ibnetdiscover import DiscoveryError
    from .models import Fabric
    from .services.discovery import discover
    from .services.ingest import summary

    fabric = Fabric.objects.filter(pk=fabric_id).first()
    if fabric is None:
        return {"skipped": f"no fabric {fabric_id}"}
    try:
        with single_instance(f"fabric.discover.{fabric_id}", _discovery_limit_s(fabric)) as mine:
            if not mine:
                return {"fabric": fabric.name, "skipped": "a discovery of this fabric is already running"}
            try:
                return summary(discover(fabric))
            except DiscoveryError as exc:
                log.warning("discovery of %s failed: %s", fabric.name, exc.reason)
                return {"fabric": fabric.name, "error": exc.reason}
    except SoftTimeLimitExceeded:
        raise  # the task's own limit: the worker's business, not this fabric's
    except Exception as exc:
        return _unexpected_discovery_failure(fabric, exc)


@shared_task(name="fabric.tasks.discover_all_task")
def discover_all_task() -> list[dict]:
    """Beat task (every ``settings.WEFT_DISCOVERY_INTERVAL_S``, queue ``control``): queue one
    :func:`discover_fabric_task` per live-discoverable fabric, each to its site's queue
    (``core.sites.fan_out``: fabrics are discovered in parallel by their sites' workers; a fabric
    whose site has no live worker is skipped). Never overlaps itself (lock ``fabric.discover_all``).
    One fabric's error is that fabric's alarm and summary; the others are discovered."""
    from core.sites import fan_out

    from .collectors.tools import is_live
    from .models import Fabric

    fabrics = [f for f in Fabric.objects.filter(discovery_enabled=True).order_by("name") if is_live(f)]
    limit = sum(_discovery_limit_s(f) for f in fabrics) or None  # eager runs discover in here
    with single_instance("fabric.discover_all", limit) as mine:
        if not mine:
            return [{"skipped": "discover_all is already running"}]
        return fan_out(discover_fabric_task, fabrics, log=log)


@shared_task(name="fabric.tasks.sm_watch_fabric_task")
def sm_watch_fabric_task(fabric_id: int) -> dict:
    """Read one fabric's master SM (``sminfo``) and its other SMs (``saquery -s``)
    (``fabric.services.sm.watch``), at the fabric's site; lock ``fabric.sm_watch.<id>``."""
    from .models import Fabric
    from .services.sm import watch

    fabric = Fabric.objects.filter(pk=fabric_id).first()
    if fabric is None:
        return {"skipped": f"no fabric {fabric_id}"}
    with single_instance(f"fabric.sm_watch.{fabric_id}", 120) as mine:
        if not mine:
            return {"fabric": fabric.name, "skipped": "an SM watch of this fabric is already running"}
        return watch(fabric).as_dict()


@shared_task(name="fabric.tasks.sm_watch_task")
def sm_watch_task() -> list[dict]:
    """Beat task (every ``WEFT_SM_WATCH_INTERVAL_S``, queue ``control``): one
    :func:`sm_watch_fabric_task` per live fabric, at its site (``core.sites.fan_out``).
    Never overlaps itself (lock ``fabric.sm_watch``). Returns one summary per fabric."""
    from core.sites import fan_out

    from .collectors.tools import is_live
    from .models import Fabric

    with single_instance("fabric.sm_watch", 120) as mine:
        if not mine:
            return []
        # same rule as live discovery: imported fabrics are not polled
        fabrics = [f for f in Fabric.objects.filter(discovery_enabled=True).order_by("name") if is_live(f)]
        return fan_out(sm_watch_fabric_task, fabrics, log=log)


@shared_task(name="fabric.tasks.discovery_watchdog_task", soft_time_limit=60, time_limit=90)
def discovery_watchdog_task() -> dict:
    """Beat task (every ``WEFT_WATCHDOG_INTERVAL_S``): ``system.discovery_stalled`` for every
    live-discoverable fabric without a finished live discovery for too long,
    ``system.discovery_resumed`` when they are back (``fabric.services.watchdog.check_discovery``);
    and kills the diags and pollers whose Weft owner died (``tools.reap_orphans``). Returns
    ``{"fabrics": [summary per fabric], "orphans_killed": n}``."""
    from .collectors.tools import reap_orphans
    from .services.watchdog import check_discovery

    with single_instance("fabric.discovery_watchdog", 90) as mine:
        if not mine:
            return {"skipped": "the discovery watchdog is already running"}
        orphans = reap_orphans()
        if orphans:
            log.warning("killed %d diags/poller process group(s) whose owner died: %s", len(orphans), orphans)
        return {"fabrics": [c.as_dict() for c in check_discovery()], "orphans_killed": len(orphans)}


@shared_task(name="fabric.tasks.apply_partitions_task")
def apply_partitions_task(
    fabric_id: int, force: bool = False, request: str = "", apply_id: int | None = None
) -> dict:
    """Apply the partitions of one fabric (``fabric.services.partitions.apply_pending``: coalesced,
    one apply per fabric at a time). Queued by ``queue_apply`` after a change, or by
    ``request_apply`` with the ``apply_id`` of its ``PartitionApply`` record (``run_apply`` runs
    it and writes the outcome there). ``request`` is a token per queued call (unused here: it
    keeps the embedded worker from dropping the call as a duplicate of a running one). Returns
    the service's summary or ``{"skipped": reason}``."""
    from .models import Fabric
    from .services.partitions import apply_pending, run_apply

    if apply_id is not None:
        return run_apply(apply_id)
    fabric = Fabric.objects.filter(pk=fabric_id).first()
    if fabric is None:
        return {"skipped": f"no fabric {fabric_id}"}
    return apply_pending(fabric, force=force)


@shared_task(name="fabric.tasks.reconcile_fabric_task")
def reconcile_fabric_task(fabric_id: int) -> dict:
    """Compare one fabric's stored partitions with what its master SM applies and re-apply on
    drift or a change pending too long (``fabric.services.partitions.reconcile``), at the
    fabric's site; lock ``fabric.partitions_reconcile.<id>``."""
    from .models import Fabric
    from .services.partitions.reconcile import reconcile

    fabric = Fabric.objects.filter(pk=fabric_id).first()
    if fabric is None:
        return {"skipped": f"no fabric {fabric_id}"}
    with single_instance(f"fabric.partitions_reconcile.{fabric_id}", 900) as mine:
        if not mine:
            return {"fabric": fabric.name, "skipped": "a reconcile of this fabric is already running"}
        return reconcile(fabric).as_dict()


@shared_task(name="fabric.tasks.reconcile_partitions_task")
def reconcile_partitions_task() -> list[dict]:
    """Beat task (every ``WEFT_PARTITIONS_RECONCILE_INTERVAL_S``, queue ``control``): one
    :func:`reconcile_fabric_task` per fabric, at its site (``core.sites.fan_out``). One fabric's
    error is logged and in its summary, the others go on. Never overlaps itself (lock
    ``fabric.partitions_reconcile``)."""
    from core.sites import fan_out

    from .models import Fabric

    with single_instance("fabric.partitions_reconcile", 900) as mine:
        if not mine:
            return []
        return fan_out(reconcile_fabric_task, Fabric.objects.order_by("name"), log=log)


@shared_task(name="fabric.tasks.port_action_task", ignore_result=False)
def port_action_task(
    fabric_id: int, port_id: int, action: str, user_id: int | None = None, via: str = "page"
) -> dict:
    """Run a port action (``fabric.services.portactions.run_port_action``, asked ``via`` the port
    page or the UFM API) on a worker of the fabric's site (``request_port_action`` waits for this
    result: the one task whose result is kept). Returns ``{"done": result}``, ``{"refused": why}`` or ``{"failed": why}``."""
    from django.contrib.auth import get_user_model

    from .models import Port
    from .services.portactions import PortActionFailed, PortActionRefused, run_port_action

    port = Port.objects.filter(pk=port_id, node__fabric_id=fabric_id).first()
    if port is None:
        return {"failed": f"no port {port_id} in fabric {fabric_id} (removed by a discovery?)"}
    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    try:
        return {"done": dataclasses.asdict(run_port_action(port, action, user=user, via=via))}
    except PortActionRefused as exc:
        return {"refused": str(exc)}
    except PortActionFailed as exc:
        return {"failed": str(exc)}


@shared_task(name="fabric.tasks.compare_reference_task")
def compare_reference_task(fabric_id: int) -> dict | None:
    """Compare a fabric with its reference after a discovery and raise the events
    (``fabric.services.reference.compare_after_discovery``); the counts, or None when off."""
    from .services.reference import compare_after_discovery

    return compare_after_discovery(fabric_id)


def _read_one_fabric(fabric_id: int, lock: str, busy: str, collect) -> dict:
    """``{"fabric": name, **collect(fabric)}`` under the lock ``<lock>.<fabric_id>`` (one read of
    a fabric at a time); ``skipped`` with why when the fabric is gone or ``busy`` (a read runs)."""
    from .models import Fabric

    fabric = Fabric.objects.filter(pk=fabric_id).first()
    if fabric is None:
        return {"skipped": f"no fabric {fabric_id}"}
    with single_instance(f"{lock}.{fabric_id}", 3600) as mine:
        if not mine:
            return {"fabric": fabric.name, "skipped": busy}
        return {"fabric": fabric.name, **collect(fabric)}


def _fan_out_reads(lock: str, task, tool_field: str) -> list[dict]:
    """One ``task`` per fabric whose ``tool_field`` is set, at its site (``core.sites.fan_out``),
    never overlapping itself (lock ``lock``): the beat's side of the per-fabric reads."""
    from core.sites import fan_out

    from .models import Fabric

    with single_instance(lock, 3600) as mine:
        if not mine:
            return []
        fabrics = Fabric.objects.exclude(**{tool_field: ""}).order_by("name")
        return fan_out(task, fabrics, log=log)


@shared_task(name="fabric.tasks.collect_switch_health_fabric_task")
def collect_switch_health_fabric_task(fabric_id: int) -> dict:
    """Read the switch health of one fabric (``fabric.services.switchhealth.collect``), at the
    fabric's site (issue 25 §2); lock ``fabric.switch_health.<id>``."""
    from .services.switchhealth import collect

    return _read_one_fabric(
        fabric_id, "fabric.switch_health", "a switch health read of this fabric is running", collect
    )


@shared_task(name="fabric.tasks.collect_switch_health_task")
def collect_switch_health_task() -> list[dict]:
    """Beat task (every ``WEFT_SWITCH_HEALTH_INTERVAL_S``, queue ``control``): one
    :func:`collect_switch_health_fabric_task` per fabric whose ``switch_info_tool`` is set, at
    its site (``core.sites.fan_out``). One fabric's error is logged and in its summary; never
    overlaps itself (lock ``fabric.switch_health``)."""
    return _fan_out_reads("fabric.switch_health", collect_switch_health_fabric_task, "switch_info_tool")


@shared_task(name="fabric.tasks.collect_cable_info_fabric_task")
def collect_cable_info_fabric_task(fabric_id: int) -> dict:
    """Read the cables and transceivers of one fabric (``fabric.services.cables.collect``), at the
    fabric's site; lock ``fabric.cable_info.<id>``."""
    from .services.cables import collect

    return _read_one_fabric(fabric_id, "fabric.cable_info", "a cable read of this fabric is running", collect)


@shared_task(name="fabric.tasks.collect_cable_info_task")
def collect_cable_info_task() -> list[dict]:
    """Beat task (every ``WEFT_CABLE_INFO_INTERVAL_S``, queue ``control``): one
    :func:`collect_cable_info_fabric_task` per fabric whose ``cable_info_tool`` is set, at its
    site (``core.sites.fan_out``); never overlaps itself (lock ``fabric.cable_info``)."""
    return _fan_out_reads("fabric.cable_info", collect_cable_info_fabric_task, "cable_info_tool")
