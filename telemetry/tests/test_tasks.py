"""Celery tasks: non-overlap locks, which fabrics the beat sweeps, group fan-out, rollups."""

from __future__ import annotations

import pytest

from core.locks import single_instance
from fabric.models import Fabric, Port
from fabric.services.discovery import discover
from telemetry import tasks
from telemetry.models import PortCounters, Sweep


@pytest.mark.django_db
def test_poll_task_never_overlaps_itself():
    fabric = Fabric.objects.create(name="busy", tool_env={"X": "1"})
    with single_instance(f"telemetry.poll.{fabric.pk}", 60) as mine:
        assert mine
        out = tasks.poll_fabric_task(fabric.pk)
    assert out == {"fabric": "busy", "skipped": "a sweep of this fabric is already running"}
    assert not Sweep.objects.exists()
    with single_instance("telemetry.poll_all", 60):
        assert tasks.poll_all_task() == [{"skipped": "poll_all is already running"}]
    with single_instance("telemetry.rollup", 60):
        assert tasks.rollup_task() == {"skipped": "a rollup is already running"}


@pytest.mark.django_db
def test_poll_all_skips_imported_and_disabled_fabrics():
    Fabric.objects.create(name="imported")  # no tool_env / ca_name: no live access
    Fabric.objects.create(name="off", tool_env={"X": "1"}, polling_enabled=False)
    assert tasks.poll_all_task() == []
    assert tasks.poll_fabric_task(999999) == {"skipped": "no fabric 999999"}


@pytest.mark.django_db
def test_task_decorators_declare_limits_and_retries():
    for task in (tasks.poll_fabric_task, tasks.rollup_task):
        assert task.time_limit and task.soft_time_limit and task.soft_time_limit < task.time_limit
        assert task.autoretry_for and task.retry_kwargs == {"max_retries": 2}
    assert tasks.rollup_task() == {"minute": 0, "hour": 0, "deleted": 0, "sweeps_deleted": 0}


@pytest.mark.lab
@pytest.mark.django_db(transaction=True)
def test_poll_all_and_switch_groups_cover_every_port_once(small_lab, settings):
    fabric = Fabric.objects.create(name="lab", tool_env=small_lab.tool_env)
    discover(fabric)
    (summary,) = tasks.poll_all_task()
    n_ports = Port.objects.filter(node__fabric=fabric).count()
    assert summary["ports"] == n_ports and summary["stale"] == 0 and summary["mechanism"] == "mad"
    # two groups (as two workers would run them) read disjoint port sets that cover the fabric
    fabric.refresh_from_db()
    g0 = tasks.poll_fabric_task(fabric.pk, 0, 2)
    g1 = tasks.poll_fabric_task(fabric.pk, 1, 2)
    assert g0["ports"] + g1["ports"] == n_ports and g0["ports"] and g1["ports"]
    assert {g0["mechanism"], g1["mechanism"]} == {"mad 1/2", "mad 2/2"}
    assert PortCounters.objects.filter(port__node__fabric=fabric, stale=False).count() == n_ports
