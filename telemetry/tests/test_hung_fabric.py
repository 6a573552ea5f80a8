"""Counter sweeps of a hung fabric (ibsim frozen: every MAD waits forever) on the real lab.

Before: the serving poller timed out (``WEFT_TOOL_TIMEOUT_S``), then a one-shot retry did again: two
budgets = the task's soft limit, so every sweep died with ``SoftTimeLimitExceeded``, wrote no Sweep
row, and left a hung ``telemetry.collectors.madpoll`` child behind.
"""

from __future__ import annotations

import time

import pytest
from django.conf import settings

from core.procs import owner_tag
from fabric.models import Fabric
from fabric.services.discovery import discover
from lab.pytest_plugin import small_netfile
from telemetry import tasks
from telemetry.models import Sweep
from telemetry.services.sweep import poll_fabric
from tests.process_support import no_children_left

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def hung(lab_factory):
    """A discovered, once-swept fabric (serving poller running) whose lab is then frozen; returns
    ``(fabric, "IBSIM_SOCKNAME=<socket>")``, the environment item every child aimed at it carries."""
    lab = lab_factory(small_netfile())
    fabric = Fabric.objects.create(name="hung", tool_env=lab.tool_env)
    discover(fabric, timeout=60)
    fabric.refresh_from_db()
    assert poll_fabric(fabric, timeout=30).status == "ok"
    lab.hang()
    fabric.refresh_from_db()
    return fabric, f"IBSIM_SOCKNAME={lab.socket_name}"


def test_a_hung_fabric_costs_one_budget_and_leaves_its_failed_sweep(hung):
    fabric, aimed_at_lab = hung
    t0 = time.monotonic()
    sweep = poll_fabric(fabric, timeout=4)
    elapsed = time.monotonic() - t0
    assert sweep.status == "failed" and sweep.ports == 0 and sweep.stale > 0
    assert "MAD poller did not" in sweep.error and "within" in sweep.error, sweep.error
    # serving poller (half the budget) + one-shot retry (the rest) = one budget, not two
    assert 3.5 < elapsed < 4 + 3, elapsed
    assert Sweep.objects.filter(fabric=fabric, status="failed").count() == 1
    # the serving poller, the one-shot one and sminfo: all killed with their process groups
    assert no_children_left(owner_tag(), also=aimed_at_lab, timeout=10)


def test_a_soft_time_limit_mid_collection_still_writes_the_failed_sweep(hung, soft_limit_in):
    fabric, aimed_at_lab = hung
    soft_limit_in(1.5)
    t0 = time.monotonic()
    sweep = poll_fabric(fabric, timeout=60)
    assert time.monotonic() - t0 < 6
    assert sweep.status == "failed" and "time limit was reached while collecting" in sweep.error
    assert Sweep.objects.get(pk=sweep.pk).status == "failed"
    # the poller dies at once; the sminfo beside it by its own 10 s timeout
    assert no_children_left(owner_tag(), also=aimed_at_lab, timeout=20)


def test_the_sweep_task_limits_leave_room_for_the_collector_budget():
    """One time budget: the soft limit is derived from the collector budget, not set beside it."""
    assert tasks.SWEEP_BUDGET_S == settings.WEFT_TOOL_TIMEOUT_S
    assert tasks.POLL_SOFT_LIMIT_S >= tasks.SWEEP_BUDGET_S + 30
    assert tasks.POLL_HARD_LIMIT_S > tasks.POLL_SOFT_LIMIT_S
    for task in (tasks.poll_fabric_task, tasks.poll_all_task):
        assert task.soft_time_limit == tasks.POLL_SOFT_LIMIT_S
