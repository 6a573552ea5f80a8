"""Receivers of the events app (connected in ``EventsConfig.ready()``; the signals it sends are
declared in ``events/signals.py``).

Received here:

* ``fabric.signals.discovery_committed`` → ``evaluate_discovery_task`` (topology rules);
* ``telemetry.signals.sweep_committed`` → ``evaluate_sweep_task`` (counter rules);
* ``fabric.signals.sm_state_changed`` → ``process_pending_task`` (the SM service's events);
* ``fabric.signals.partitions_changed`` → ``process_pending_task`` (the partitions service's);
* ``alarms_changed`` → the mail task (when mail was queued) and the alarms pages over Channels;
* ``post_migrate`` of this app → ``ensure_policies()`` (a policy row per registered type).
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models.signals import post_migrate
from django.dispatch import receiver

from fabric.signals import discovery_committed, partitions_changed, sm_state_changed
from telemetry.signals import sweep_committed

from . import tasks
from .policies import ensure_policies
from .realtime import publish_alarm_changes
from .signals import alarms_changed

__all__ = ["alarms_changed"]

log = logging.getLogger(__name__)


@receiver(discovery_committed, dispatch_uid="events.evaluate_discovery")
def on_discovery_committed(sender, fabric_id: int, discovery_id: int | None = None, **kwargs) -> None:
    """Queue the topology rules (deferred to commit again: harmless, and covers direct sends)."""
    transaction.on_commit(lambda: tasks.evaluate_discovery_task.delay(fabric_id, discovery_id))


@receiver(sweep_committed, dispatch_uid="events.evaluate_sweep")
def on_sweep_committed(sender, fabric_id: int, sweep_id: int, **kwargs) -> None:
    """Queue the counter rules of the committed sweep."""
    transaction.on_commit(lambda: tasks.evaluate_sweep_task.delay(fabric_id, sweep_id))


@receiver(sm_state_changed, dispatch_uid="events.sm_state_changed")
def on_sm_state_changed(sender, fabric_id: int, events: list[str] | tuple = (), **kwargs) -> None:
    """Apply the SM service's events (e.g. ``sm.master_lost``) now rather than on the minute flush."""
    if events:
        transaction.on_commit(lambda: tasks.process_pending_task.delay(fabric_id))


@receiver(partitions_changed, dispatch_uid="events.partitions_changed")
def on_partitions_changed(sender, fabric_id: int, events: list[str] | tuple = (), **kwargs) -> None:
    """Apply the partitions service's events (``partition.drift``...) now, not on the minute flush."""
    if events:
        transaction.on_commit(lambda: tasks.process_pending_task.delay(fabric_id))


@receiver(alarms_changed, dispatch_uid="events.alarms_changed")
def on_alarms_changed(sender, outcome, **kwargs) -> None:
    """Send the queued mail (through the task; the minute flush retries) and publish the changes."""
    if outcome.notifications:
        try:
            tasks.send_notifications_task.delay()
        except Exception:  # the broker may be down: the periodic flush sends them later
            log.warning("could not enqueue the notification task", exc_info=True)
    publish_alarm_changes(outcome)


@receiver(post_migrate, dispatch_uid="events.sync_policies")
def on_post_migrate(sender, **kwargs) -> None:
    """Create missing policy rows once the events tables exist (after this app's migrations)."""
    if getattr(sender, "name", "") == "events":
        ensure_policies()
