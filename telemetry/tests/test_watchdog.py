"""Poller watchdog (real lab): sweeps that stop happening raise ``system.poller_stalled`` once; it
clears when sweeps are back.

Before: a worker killed mid-sweep left the poll locks for ~5 minutes; 58 beat ticks were skipped
with no sign of it anywhere.
"""

from __future__ import annotations

import pytest

from core.locks import single_instance
from events.engine import process_pending_events
from events.models import Alarm, Event
from fabric.models import Fabric
from fabric.services.discovery import discover
from telemetry import tasks
from telemetry.services.watchdog import check_poller, poller_threshold_s
from tests.process_support import wait_for

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]


def test_poller_stalled_while_the_sweeps_are_blocked_and_resumed_after(small_lab, settings):
    settings.WEFT_POLL_INTERVAL_S = 0.5
    settings.WEFT_STALL_INTERVALS = 2
    settings.WEFT_TOOL_TIMEOUT_S = 1.0
    assert poller_threshold_s() == 2.0  # 2 intervals + the collector budget
    fabric = Fabric.objects.create(name="watched", tool_env=small_lab.tool_env)
    Fabric.objects.create(name="imported")  # no live access: not polled, not watched
    discover(fabric, timeout=60)
    assert tasks.poll_all_task()[0]["status"] == "ok"
    (check,) = check_poller()
    assert check.fabric == "watched" and not check.stalled and check.event == ""

    with single_instance("telemetry.poll_all") as held:  # as a wedged holder would
        assert held

        def stalled():
            assert tasks.poll_all_task() == [{"skipped": "poll_all is already running"}]
            (c,) = check_poller()
            return c.event == "system.poller_stalled" and c

        check = wait_for(stalled, timeout=15, interval=0.2)
        assert check and check.age_s > check.threshold_s == 2.0
        assert check_poller()[0].event == ""  # once, not per check
    event = Event.objects.get(fabric=fabric, code="system.poller_stalled")
    assert event.severity == "minor" and event.object_key == "watched"
    assert "No counter sweep of fabric watched for" in event.message and "worker and beat" in event.message
    process_pending_events(fabric.pk)
    assert Alarm.objects.get(fabric=fabric, code="system.poller_stalled").state == "active"

    assert tasks.poll_all_task()[0]["status"] == "ok"
    (check,) = check_poller()
    assert not check.stalled and check.event == "system.poller_resumed"
    process_pending_events(fabric.pk)
    assert Alarm.objects.get(fabric=fabric, code="system.poller_stalled").state == "cleared"
    assert list(
        Event.objects.filter(fabric=fabric, code__startswith="system.poller_")
        .order_by("at", "id")
        .values_list("code", flat=True)
    ) == ["system.poller_stalled", "system.poller_resumed"]


def test_poller_watchdog_task_reports_every_polled_fabric(small_lab):
    Fabric.objects.create(name="live", tool_env=small_lab.tool_env)
    Fabric.objects.create(name="off", tool_env=small_lab.tool_env, polling_enabled=False)
    (only,) = tasks.poller_watchdog_task()
    assert only["fabric"] == "live" and only["stalled"] is False and only["event"] == ""
