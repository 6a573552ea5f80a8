"""Celery tasks of the events app: thin wrappers around the services (STYLE.md)."""

from __future__ import annotations

from celery import shared_task

from fabric.models import Fabric
from telemetry.models import Sweep

from .alerting import resend_firing, send_pending_targets
from .engine import process_pending_events
from .health import run_report
from .models import Alarm, Event
from .notify import send_digest, send_pending
from .realtime import publish_summary_changed
from .roles import check_roles
from .rules.counters import evaluate_sweep
from .rules.topology import evaluate_discovery
from .services import prune


@shared_task(name="events.tasks.evaluate_discovery_task")
def evaluate_discovery_task(fabric_id: int, discovery_id: int | None = None) -> dict:
    """Rules after a discovery/import committed (``events.rules.topology.evaluate_discovery``)."""
    try:
        summary = evaluate_discovery(fabric_id, discovery_id).summary()
    except Fabric.DoesNotExist:  # deleted since the discovery committed
        return {"skipped": f"fabric {fabric_id} no longer exists"}
    publish_summary_changed(fabric_id, "discovery")
    return summary


@shared_task(name="events.tasks.evaluate_sweep_task")
def evaluate_sweep_task(fabric_id: int, sweep_id: int) -> dict:
    """Rules after a counter sweep committed (``events.rules.counters.evaluate_sweep``)."""
    try:
        summary = evaluate_sweep(fabric_id, sweep_id).summary()
    except (Fabric.DoesNotExist, Sweep.DoesNotExist):  # deleted since the sweep committed
        return {"skipped": f"fabric {fabric_id} or sweep {sweep_id} no longer exists"}
    publish_summary_changed(fabric_id, "sweep")
    return summary


@shared_task(name="events.tasks.process_pending_task")
def process_pending_task(fabric_id: int) -> dict:
    """Apply a fabric's pending events now (``events.engine.process_pending_events``)."""
    try:
        return process_pending_events(fabric_id).summary()
    except Fabric.DoesNotExist:  # deleted since the events were written
        return {"skipped": f"fabric {fabric_id} no longer exists"}


@shared_task(name="events.tasks.send_notifications_task")
def send_notifications_task() -> dict:
    """Send pending alert mail (``events.notify.send_pending``) and alert-target messages
    (``events.alerting.send_pending_targets``); also the periodic flush."""
    return {**send_pending(), "targets": send_pending_targets()}


@shared_task(name="events.tasks.flush_notifications_task")
def flush_notifications_task() -> dict:
    """Every minute: apply pending events, expire alarms past their TTL, send held mail and
    target messages, re-post the firing alarms to Alertmanager targets."""
    fabric_ids = set(Alarm.objects.open().filter(ttl_s__gt=0).values_list("fabric_id", flat=True))
    # Events written outside a discovery/sweep flow (a failed discovery, another app) too.
    fabric_ids |= set(Event.objects.filter(evaluated=False).values_list("fabric_id", flat=True).distinct())
    for fabric_id in fabric_ids & set(Fabric.objects.values_list("pk", flat=True)):
        process_pending_events(fabric_id)
    resend_firing()
    return {**send_pending(), "targets": send_pending_targets()}


@shared_task(name="events.tasks.daily_digest_task")
def daily_digest_task() -> dict:
    """Daily digest mail (``events.notify.send_digest``)."""
    return send_digest()


@shared_task(name="events.tasks.health_report_task")
def health_report_task(fabric_id: int | None = None) -> list[dict]:
    """Scheduled health report of one or every fabric (``events.health.run_report``)."""
    fabrics = Fabric.objects.filter(pk=fabric_id) if fabric_id else Fabric.objects.all()
    return [{"fabric": f.name, "report": run_report(f, trigger="scheduled").pk} for f in fabrics]


@shared_task(name="events.tasks.prune_task")
def prune_task() -> dict:
    """Daily: delete events, cleared alarms, sent mail rows and health reports past retention
    (``events.services.prune``)."""
    return prune()


@shared_task(name="events.tasks.role_watch_task")
def role_watch_task() -> list[dict]:
    """Every watchdog interval: roles without a live leader (``events.roles.check_roles``)."""
    return [{"role": s.role, "up": s.up, "wrote": s.wrote} for s in check_roles()]
