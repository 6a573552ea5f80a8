"""Fabric I/O and control work run apart (issue 22: a hung discovery and hung sweeps occupied both
worker processes; scheduling passes and watchdogs waited minutes). ``weft.queues`` sends every
fabric I/O task to its fabric's site queue (``fabric`` for the default site) and the rest to
``control``; the embedded deployment's
in-process worker keeps one pool per queue, as production runs ``-Q control`` and ``-Q fabric``
workers."""

from __future__ import annotations

import time

import pytest
from django.conf import settings

from fabric.models import Fabric
from lab.pytest_plugin import small_netfile
from weft import inprocess, queues
from weft.celery import app


def _names() -> set[str]:
    app.loader.import_default_modules()
    return {name for name in app.tasks if not name.startswith("celery.")}


@pytest.mark.django_db
def test_every_task_has_its_queue_and_the_beat_schedule_splits_io_from_control():
    names = _names()
    assert queues.FABRIC_IO_TASKS <= names  # no stale name in the routing table
    fabric = Fabric.objects.create(name="one")  # the default site: the fabric queue
    routed = {name: app.amqp.router.route({}, name, (fabric.pk,), {})["queue"].name for name in names}
    assert {n for n, q in routed.items() if q == "fabric"} == set(queues.PER_FABRIC_TASKS)
    assert {q for q in routed.values()} == {"control", "fabric"}
    beat = {entry["task"]: routed[entry["task"]] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    for control in (
        "scheduler.tasks.run_pass_task",
        "telemetry.tasks.poller_watchdog_task",
        "fabric.tasks.discovery_watchdog_task",
        "events.tasks.flush_notifications_task",
        "pools.tasks.expire_leases_task",
        # the periodic fan-outs only queue one task per fabric, at its site (issue 25 §2)
        "fabric.tasks.discover_all_task",
        "telemetry.tasks.poll_all_task",
        "fabric.tasks.sm_watch_task",
    ):
        assert beat[control] == "control", control
    # one fabric's task goes through the one function that names its site's queue (issue 25)
    assert queues.queue_for("fabric.tasks.discover_fabric_task", (), {"fabric_id": fabric.pk}) == (
        queues.fabric_queue(fabric.pk)
    )
    Fabric.objects.filter(pk=fabric.pk).update(site="hall-b")
    assert app.amqp.router.route({}, "telemetry.tasks.poll_fabric_task", (fabric.pk,), {})["queue"].name == (
        "fabric.hall-b"
    )
    # a worker started without -Q consumes both queues
    assert set(app.amqp.queues) >= {"control", "fabric"}


@pytest.mark.lab
@pytest.mark.django_db(transaction=True)
def test_a_hung_fabric_does_not_hold_up_a_scheduling_pass_in_the_embedded_worker(lab_factory):
    lab = lab_factory(small_netfile())
    fabric = Fabric.objects.create(name="hung", tool_env=lab.tool_env, discovery_timeout_s=20)
    lab.hang()  # every MAD of the diags now waits: ibnetdiscover runs into its 20 s timeout
    from fabric.tasks import discover_fabric_task
    from scheduler.tasks import run_pass_task
    from telemetry.tasks import poll_fabric_task

    inprocess.start(workers=1, beat=False)  # one thread per queue: the hung one is taken
    try:
        t0 = time.monotonic()
        discovery = inprocess.submit(discover_fabric_task, (fabric.pk,), {})
        inprocess.submit(poll_fabric_task, (fabric.pk,), {})  # waits behind it, as a beat sweep would
        scheduling = inprocess.submit(run_pass_task, (), {})
        scheduling.result(timeout=15)  # before: behind the discovery's 20 s and the sweep's budget
        assert time.monotonic() - t0 < 15
        assert not discovery.done()  # the fabric's discovery was still hanging meanwhile
    finally:
        lab.stop()  # ibsim gone: the diags end at once
        inprocess.stop(wait=True)
