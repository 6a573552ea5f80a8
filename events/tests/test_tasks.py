"""Wiring: discovery/sweep signals → thin tasks → rules (eager here: no worker runs in tests)."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.utils import timezone

from events.models import Alarm, Event
from events.services import EventSpec, record_events
from events.tasks import evaluate_discovery_task, evaluate_sweep_task

pytestmark = pytest.mark.django_db(transaction=True)


def test_discovery_signal_on_commit_runs_rules(topo):
    from fabric.models import Discovery
    from fabric.signals import discovery_committed

    with transaction.atomic():
        d = Discovery.objects.create(fabric=topo.fabric, source="file", status="ok")
        record_events(
            topo.fabric,
            [
                EventSpec(
                    code="node.removed",
                    message="gone",
                    object_type="node",
                    object_key="0x00000000000000ff",
                    object_repr="host99",
                )
            ],
        )
        transaction.on_commit(
            lambda: discovery_committed.send(sender=Discovery, fabric_id=topo.fabric.pk, discovery_id=d.pk)
        )
        assert not Alarm.objects.exists()  # nothing before commit
    alarm = Alarm.objects.get()
    assert alarm.code == "node.removed" and alarm.severity == "minor"
    assert not Event.objects.filter(evaluated=False).exists()


def test_sweep_signal_on_commit_runs_rules(topo):
    from telemetry.models import PortCounters, Sweep
    from telemetry.signals import sweep_committed

    with transaction.atomic():
        s = Sweep.objects.create(
            fabric=topo.fabric,
            started=timezone.now(),
            interval_s=5.0,
            status="failed",
            error="perfquery: not found",
        )
        PortCounters.objects.create(port=topo.ports[("leaf01", 2)], sweep=s)
        transaction.on_commit(
            lambda: sweep_committed.send(sender=Sweep, fabric_id=topo.fabric.pk, sweep_id=s.pk)
        )
    alarm = Alarm.objects.get(code="system.poller_failing")
    assert "perfquery: not found" in alarm.message


def test_tasks_skip_deleted_objects(db):
    assert "no longer exists" in evaluate_discovery_task(987654, 1)["skipped"]
    assert "no longer exists" in evaluate_sweep_task(987654, 1)["skipped"]
