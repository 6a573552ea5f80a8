"""Discovery watchdog (real lab): live discoveries that stop happening raise
``system.discovery_stalled`` once; the next finished discovery clears it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from events.engine import process_pending_events
from events.models import Alarm, Event
from fabric.models import Fabric
from fabric.services.discovery import discover
from fabric.services.watchdog import check_discovery
from fabric.tasks import discovery_watchdog_task
from tests.process_support import alive, wait_for

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]


def test_discovery_stalled_and_resumed(small_lab, settings):
    settings.WEFT_DISCOVERY_INTERVAL_S = 0.5
    settings.WEFT_STALL_INTERVALS = 2
    settings.WEFT_TOOL_TIMEOUT_S = 1.0
    fabric = Fabric.objects.create(name="watched", tool_env=small_lab.tool_env, discovery_timeout_s=1.0)
    Fabric.objects.create(name="imported")
    discover(fabric)
    (check,) = check_discovery()
    assert check.fabric == "watched" and not check.stalled and check.threshold_s == 3.0

    check = wait_for(
        lambda: check_discovery()[0].event == "system.discovery_stalled", timeout=15, interval=0.2
    )
    assert check
    assert check_discovery()[0].event == ""
    stalled = Event.objects.get(fabric=fabric, code="system.discovery_stalled")
    assert "No live discovery of fabric watched" in stalled.message and stalled.severity == "minor"
    process_pending_events(fabric.pk)
    assert Alarm.objects.get(fabric=fabric, code="system.discovery_stalled").state == "active"

    discover(fabric)
    assert check_discovery()[0].event == "system.discovery_resumed"
    process_pending_events(fabric.pk)
    assert Alarm.objects.get(fabric=fabric, code="system.discovery_stalled").state == "cleared"


ORPHAN = (
    "import os, sys; sys.path.insert(0, sys.argv[1]); from fabric.collectors.tools import install_id, spawn; "
    "print(spawn(['sleep', '120']).pid, install_id(), flush=True); os._exit(0)"
)


def test_discovery_watchdog_task_checks_live_fabrics_and_reaps_orphans(small_lab, tmp_path, monkeypatch):
    """A diags child whose owner died (a pool process killed at its hard limit) is killed. The
    orphan is of an installation of its own (another ``WEFT_DATA_DIR``), which this test's reaper
    takes for its own: the other processes of the run (another xdist worker's reaper, a Celery
    worker's start-up) leave it alone, so the task is the one that kills it."""
    from fabric.collectors import tools

    env = dict(os.environ, WEFT_DATA_DIR=str(tmp_path / "orphan-install"))
    pid, install = subprocess.run(
        [sys.executable, "-c", ORPHAN, str(ROOT)], capture_output=True, text=True, timeout=60, check=True,
        env=env,
    ).stdout.split()  # fmt: skip
    orphan = int(pid)
    assert install != tools.install_id()
    monkeypatch.setattr(tools, "install_id", lambda: install)
    Fabric.objects.create(name="live", tool_env=small_lab.tool_env)
    Fabric.objects.create(name="imported")
    out = discovery_watchdog_task()
    assert [f["fabric"] for f in out["fabrics"]] == ["live"] and out["orphans_killed"] >= 1
    assert wait_for(lambda: not alive(orphan), timeout=5)
