"""Collector sites (issue 25 §2, ``core.sites``): a fabric's I/O goes only to its site's queue,
work for a fabric whose site has no live worker is a 503, and such a site alarms on its fabrics
only. The last test runs two labs and two real workers on two site queues (PostgreSQL + Redis)."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.utils import timezone

from core.leases import Lease
from core.models import Lease as LeaseRow
from core.sites import (
    DEFAULT_SITE,
    SiteDown,
    require_live,
    site_of_queue,
    site_queue,
    site_states,
    worker_role,
)
from events.models import Alarm, AlarmState
from fabric.models import Discovery, Fabric
from weft import queues
from weft.worker import consumed_sites


def test_site_names_and_their_queues():
    assert site_queue(DEFAULT_SITE) == "fabric" and site_queue("") == "fabric"  # one-site installs
    assert site_queue("hall-b") == "fabric.hall-b"
    for queue in ("fabric", "fabric.hall-b"):
        assert site_queue(site_of_queue(queue)) == queue
    assert site_of_queue("control") is None and site_of_queue("fabric.Bad Name") is None
    assert consumed_sites(["control", "fabric.b", "fabric", "fabric.a"]) == ["a", "b", DEFAULT_SITE]
    assert worker_role("hall-b", "fabric@h1") == "worker:hall-b:fabric@h1"


@pytest.mark.django_db
def test_a_site_name_is_validated_and_defaults_to_the_fabric_queue(admin):
    fabric = Fabric.objects.create(name="one")
    assert fabric.site == DEFAULT_SITE and queues.fabric_queue(fabric.pk) == "fabric"
    for bad in ("Hall B", "-x", "a" * 33, "a.b", ""):
        fabric.site = bad
        with pytest.raises(ValidationError) as err:
            fabric.full_clean()
        assert "site" in err.value.message_dict, bad
    resp = admin.patch(f"/api/fabric/fabrics/{fabric.pk}/", {"site": "hall b"}, format="json")
    assert resp.status_code == 400 and "site" in resp.json()
    resp = admin.patch(f"/api/fabric/fabrics/{fabric.pk}/", {"site": "hall-b"}, format="json")
    assert resp.status_code == 200 and resp.json()["site"] == "hall-b"


@pytest.mark.django_db
def test_each_fabric_task_goes_to_its_site_queue_and_the_fan_outs_to_control():
    a = Fabric.objects.create(name="a", site="hall-a")
    b = Fabric.objects.create(name="b")
    for name in queues.PER_FABRIC_TASKS:
        assert queues.queue_for(name, (a.pk,)) == "fabric.hall-a", name
        assert queues.queue_for(name, (), {"fabric_id": b.pk}) == "fabric", name
    assert queues.queue_for("devices.tasks.poll_devices_task", (0, 2), {"site": "hall-a"}) == "fabric.hall-a"
    for fan_out in (
        "devices.tasks.poll_devices_task",
        "fabric.tasks.discover_all_task",
        "telemetry.tasks.poll_all_task",
        "fabric.tasks.sm_watch_task",
        "fabric.tasks.reconcile_partitions_task",
        "routing.tasks.collect_all_task",
        "fabric.tasks.collect_switch_health_task",
        "fabric.tasks.collect_cable_info_task",
    ):
        assert queues.queue_for(fan_out, ()) == "control", fan_out


@pytest.mark.django_db
def test_a_fan_out_queues_no_second_call_while_the_first_still_waits(monkeypatch, settings):
    """A fabric whose calls take longer than the beat's interval (a hung one) has at most one call
    waiting in its site's queue: the fan-out marks it queued, the task deletes the mark when it
    starts (``weft.celery.WeftTask``), and only then is the next one queued."""
    from core.sites import clear_pending
    from fabric import tasks

    settings.WEFT_SITE_CHECK = False
    fabric = Fabric.objects.create(name="slow")
    sent = []
    monkeypatch.setattr(tasks.reconcile_fabric_task, "delay", lambda *a: sent.append(a))
    name = tasks.reconcile_fabric_task.name
    clear_pending(name, (fabric.pk,))
    try:
        assert tasks.reconcile_partitions_task() == [{"fabric": "slow", "site": DEFAULT_SITE, "queued": True}]
        assert tasks.reconcile_partitions_task() == [
            {"fabric": "slow", "site": DEFAULT_SITE, "skipped": "its previous call is still queued"}
        ]
        assert sent == [(fabric.pk,)]
        assert tasks.reconcile_fabric_task(fabric.pk)["fabric"] == "slow"  # a worker started it
        assert tasks.reconcile_partitions_task()[0].get("queued") is True
        assert sent == [(fabric.pk,), (fabric.pk,)]
    finally:
        clear_pending(name, (fabric.pk,))


def _heartbeat(site: str, node: str, *, expired_s: float | None = None) -> None:
    """A worker's heartbeat row as ``core.leases.Lease`` writes it (``expired_s`` ago, or live)."""
    Lease(worker_role(site, node), ttl_s=60).acquire()
    if expired_s is not None:
        LeaseRow.objects.filter(role=worker_role(site, node)).update(
            expires_at=timezone.now() - timedelta(seconds=expired_s)
        )


@pytest.mark.django_db
def test_site_liveness_comes_from_the_workers_heartbeats(settings):
    settings.WEFT_LEASE_TTL_S = 6.0
    _heartbeat("a", "fabric@h1")
    _heartbeat("a", "fabric@h2", expired_s=60)  # one of two workers died: the site still runs
    _heartbeat("b", "fabric@h3", expired_s=60)
    _heartbeat("c", "fabric@h4", expired_s=3)  # within the grace of one TTL
    states = site_states(["a", "b", "c", "d"])
    assert (states["a"].up, states["a"].workers, states["a"].down_since) == (True, ["fabric@h1"], None)
    b = LeaseRow.objects.get(role=worker_role("b", "fabric@h3"))
    assert (states["b"].up, states["b"].workers, states["b"].down_since) == (False, [], b.expires_at)
    assert states["c"].up and not states["d"].up and not states["d"].known
    settings.WEFT_SITE_CHECK = False  # the embedded deployment serves every site itself
    require_live("b", "x")
    settings.WEFT_SITE_CHECK = True
    require_live("a", "x")
    with pytest.raises(SiteDown) as err:
        require_live("b", "The discovery of fabric b was")
    body = err.value.as_dict()
    assert (body["site"], body["queue"], body["up"], body["workers"]) == ("b", "fabric.b", False, [])
    assert body["down_since"] == b.expires_at.isoformat()
    assert "site 'b' has no live worker since" in body["detail"] and "-Q fabric.b" in body["detail"]


@pytest.mark.django_db
def test_work_for_a_fabric_whose_site_is_down_is_a_503_and_queues_nothing(
    settings, operator, admin, monkeypatch, django_capture_on_commit_callbacks
):
    from fabric import tasks
    from fabric.models import PartitionApply

    settings.WEFT_SITE_CHECK = True
    queued = []
    monkeypatch.setattr(
        tasks.discover_fabric_task, "apply_async", lambda args, task_id: queued.append(args[0])
    )
    up = Fabric.objects.create(name="up", site="hall-a", ca_name="mlx5_0")
    down = Fabric.objects.create(name="down", site="hall-b", ca_name="mlx5_1")
    _heartbeat("hall-a", "fabric@h1")
    _heartbeat("hall-b", "fabric@h2", expired_s=120)
    with django_capture_on_commit_callbacks(execute=True):
        resp = operator.post(f"/api/fabric/fabrics/{down.pk}/discover/")
    assert resp.status_code == 503, resp.content
    body = resp.json()
    assert (body["site"], body["queue"], body["up"]) == ("hall-b", "fabric.hall-b", False)
    assert body["down_since"] and "The discovery of fabric down was not queued" in body["detail"]
    resp = admin.post("/api/fabric/partitions/apply/", {"fabric": down.pk}, format="json")
    assert resp.status_code == 503 and resp.json()["site"] == "hall-b"
    assert not PartitionApply.objects.filter(fabric=down).exists()
    with django_capture_on_commit_callbacks(execute=True):
        resp = operator.post(f"/api/fabric/fabrics/{up.pk}/discover/")
    assert resp.status_code == 202 and queued == [up.pk]
    # a fabric created at a site without a live worker is created; its first discovery waits
    with django_capture_on_commit_callbacks(execute=True):
        resp = admin.post(
            "/api/fabric/fabrics/", {"name": "new", "site": "hall-b", "ca_name": "x"}, format="json"
        )
    assert resp.status_code == 201 and queued == [up.pk]


@pytest.mark.django_db
def test_a_site_without_a_live_worker_alarms_on_its_fabrics_only(settings):
    from events.roles import check_roles

    settings.WEFT_SITE_CHECK = True
    a = Fabric.objects.create(name="a", site="hall-a", ca_name="mlx5_0")
    b = Fabric.objects.create(name="b", site="hall-b", ca_name="mlx5_1")
    Fabric.objects.create(name="imported", site="hall-b")  # no live access: nothing to run there
    _heartbeat("hall-a", "fabric@h1")
    _heartbeat("hall-b", "fabric@h2", expired_s=120)
    check_roles()
    open_ = Alarm.objects.filter(code="system.site_down", state=AlarmState.ACTIVE)
    assert [(x.fabric_id, x.object_key) for x in open_.all()] == [(b.pk, "site:hall-b")]
    assert not Alarm.objects.filter(code="system.role_down").exists()  # a worker is no singleton role
    check_roles()
    assert open_.count() == 1  # raised once
    _heartbeat("hall-b", "fabric@h2")
    check_roles()
    assert not open_.exists()
    assert Alarm.objects.filter(code="system.site_down", fabric=b).filter(state=AlarmState.CLEARED).exists()
    assert not Alarm.objects.filter(fabric=a).exists()


# -- two labs, two workers ------------------------------------------------------------------------

TTL_S = 2.0


@pytest.fixture
def two_sites(lab_factory, tmp_path, settings):
    """Two small labs, fabric ``east`` at site ``east`` and ``west`` at site ``west``, and one real
    worker per site (``-Q fabric.east`` / ``-Q fabric.west``); this process sends to Redis."""
    from lab.pytest_plugin import small_netfile
    from tests.support.workers import CeleryWorker
    from weft.celery import app

    if connection.vendor != "postgresql" or not os.environ.get("REDIS_URL"):
        pytest.skip("real workers: PostgreSQL and Redis")
    settings.WEFT_SITE_CHECK = True
    settings.WEFT_LEASE_TTL_S = TTL_S
    eager = app.conf.task_always_eager
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.update(CELERY_TASK_ALWAYS_EAGER=False)  # publish to the broker: the workers run the tasks
    fabrics = {}
    workers = {}
    try:
        for site in ("east", "west"):
            lab = lab_factory(small_netfile())
            fabrics[site] = Fabric.objects.create(name=site, site=site, tool_env=lab.tool_env)
            workers[site] = CeleryWorker(
                tmp_path / f"{site}.log", f"fabric.{site}", site,
                WEFT_LEASE_TTL_S=str(TTL_S), WEFT_LOCK_TTL_S="3", WEFT_TOOL_TIMEOUT_S="60",
            )  # fmt: skip
        yield fabrics, workers
    finally:
        app.conf.update(CELERY_TASK_ALWAYS_EAGER=eager)
        for w in workers.values():
            w.kill()
        import redis

        client = redis.Redis.from_url(os.environ["REDIS_URL"])
        for key in client.keys("fabric*") + client.keys("control*"):
            client.delete(key)


@pytest.mark.integration
@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_sites_each_fabric_runs_only_on_its_worker_and_a_dead_one_stalls_only_its_fabric(
    two_sites, operator
):
    from events.roles import check_roles
    from telemetry.models import Sweep
    from telemetry.tasks import poll_all_task
    from tests.support.waits import wait_for

    fabrics, workers = two_sites
    host = socket.gethostname()
    wait_for(lambda: all(s.up for s in site_states(["east", "west"]).values()), 30, "both sites live")
    for site in ("east", "west"):
        resp = operator.post(f"/api/fabric/fabrics/{fabrics[site].pk}/discover/")
        assert resp.status_code == 202, resp.content

    def done(model, site, n=1):
        rows = model.objects.filter(fabric=fabrics[site]).exclude(status="running")
        return rows.count() >= n and list(rows)

    for site in ("east", "west"):
        (discovery,) = wait_for(lambda s=site: done(Discovery, s), 60, f"the discovery of {site}")
        assert discovery.status == "ok", discovery.error
        assert discovery.worker == f"{site}@{host}"  # the site's worker ran it, not the other
    out = poll_all_task()  # the beat's fan-out: one sweep per fabric, at its site
    assert sorted((r["fabric"], r.get("site"), r.get("queued")) for r in out) == [
        ("east", "east", True),
        ("west", "west", True),
    ]
    for site in ("east", "west"):
        (sweep,) = wait_for(lambda s=site: done(Sweep, s), 60, f"the sweep of {site}")
        assert sweep.status == "ok" and sweep.worker == f"{site}@{host}", (sweep.status, sweep.error)

    # a port action runs on the site's worker; the API waits for its answer
    from fabric.models import Port

    port = Port.objects.filter(node__fabric=fabrics["east"], node__node_type="switch", port_num__gt=0).first()
    resp = operator.post(
        f"/api/fabric/ports/{port.pk}/actions/", {"action": "clear_counters", "confirm": True}, format="json"
    )
    assert resp.status_code == 200, resp.content
    assert "fabric.tasks.port_action_task[" in workers["east"].text()
    assert "fabric.tasks.port_action_task[" not in workers["west"].text()

    # kill -9 the west worker: west's site goes down (its heartbeat lapses), east goes on
    workers["west"].kill()
    wait_for(lambda: not site_states(["west"])["west"].up, 4 * TTL_S + 5, "west's site down")
    resp = operator.post(f"/api/fabric/fabrics/{fabrics['west'].pk}/discover/")
    assert resp.status_code == 503, resp.content
    body = resp.json()
    assert (body["site"], body["queue"], body["up"], body["workers"]) == ("west", "fabric.west", False, [])
    assert body["down_since"] and "no live worker since" in body["detail"]
    west_port = Port.objects.filter(
        node__fabric=fabrics["west"], node__node_type="switch", port_num__gt=0
    ).first()
    resp = operator.post(
        f"/api/fabric/ports/{west_port.pk}/actions/",
        {"action": "clear_counters", "confirm": True},
        format="json",
    )
    assert resp.status_code == 503 and resp.json()["site"] == "west"
    assert operator.post(f"/api/fabric/fabrics/{fabrics['east'].pk}/discover/").status_code == 202
    out = poll_all_task()
    assert {r["fabric"]: ("queued" in r, "skipped" in r) for r in out} == {
        "east": (True, False),
        "west": (False, True),
    }
    wait_for(lambda: done(Sweep, "east", 2), 60, "east's second sweep")
    wait_for(lambda: done(Discovery, "east", 2), 60, "east's second discovery")
    assert Sweep.objects.filter(fabric=fabrics["west"]).count() == 1  # west stalled
    assert Discovery.objects.filter(fabric=fabrics["west"]).count() == 1
    check_roles()
    alarms = Alarm.objects.filter(code="system.site_down", state=AlarmState.ACTIVE)
    assert [(a.fabric_id, a.object_key) for a in alarms] == [(fabrics["west"].pk, "site:west")]
    assert set(Sweep.objects.filter(fabric=fabrics["east"]).values_list("worker", flat=True)) == {
        f"east@{host}"
    }
    # a clean stop (SIGTERM) releases the heartbeat at once: expired before a lapse would have
    assert workers["east"].terminate() == 0
    row = LeaseRow.objects.get(role=worker_role("east", f"east@{host}"))
    assert (row.expires_at - row.renewed_at).total_seconds() < TTL_S - 0.2
    assert "Traceback" not in workers["east"].text() and "ERROR" not in workers["east"].text()
