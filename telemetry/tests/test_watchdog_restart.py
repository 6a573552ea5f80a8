"""The poller watchdog after a restart (issue 26 §4): a restarted demo found its fabric's last
sweep hours old (the previous run's) and called the poller stalled at the beat's first tick,
before its first sweep could run. The stall clock starts when this process's watchdog first
looks; a real stall is still raised one threshold later."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from events.models import Event
from fabric.models import Fabric
from fabric.services import watchdog
from telemetry.models import Sweep
from telemetry.services.watchdog import check_poller, poller_threshold_s

pytestmark = pytest.mark.django_db


def test_a_restarted_system_is_not_stalled_before_its_first_sweeps(monkeypatch, settings):
    settings.WEFT_POLL_INTERVAL_S = 5.0
    hours_ago = timezone.now() - timedelta(hours=3)
    fabric = Fabric.objects.create(name="lab", tool_env={"IBSIM_SOCKNAME": "x"})
    Fabric.objects.filter(pk=fabric.pk).update(created=hours_ago)
    Sweep.objects.create(fabric=fabric, started=hours_ago + timedelta(hours=1), duration_s=1.0)
    monkeypatch.setattr(watchdog, "_WATCHING_SINCE", None)  # this process starts watching now

    (check,) = check_poller()
    assert not check.stalled and check.event == "" and check.age_s < 60
    assert not Event.objects.filter(code="system.poller_stalled").exists()

    # still no sweep one threshold after the start: that is a stall
    later = timezone.now() + timedelta(seconds=poller_threshold_s() + 1)
    (check,) = check_poller(now=later)
    assert check.stalled and check.event == "system.poller_stalled"
