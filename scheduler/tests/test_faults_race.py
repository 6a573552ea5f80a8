"""A replacement (``on_fault=replace``) racing new submissions and their scheduling pass on
PostgreSQL, over real parallel connections: the pass lock is bypassed on purpose (the
replacement and the pass run at once), so the pools' binding itself must keep every GPU held
once. Runs in bin/test's PostgreSQL phase (``integration``)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections
from django.db.models import Count
from django.utils import timezone

from events.models import Alarm
from fabric.keys import link_key
from fabric.models import Link
from pools.models import AllocationItem, Gpu
from scheduler import receivers as signals
from scheduler.models import Job
from scheduler.services import faults, queue
from scheduler.services.queue import JobSpec, passes, start, submit
from tests.support.jobs import gpu_cluster


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("rnd", range(3))
def test_a_replacement_racing_new_jobs_never_holds_a_gpu_twice(monkeypatch, rnd):
    assert connection.vendor == "postgresql"
    monkeypatch.setattr(signals, "queue_pass", lambda: None)  # nothing runs a pass but the test
    monkeypatch.setattr(signals, "queue_fault_evaluation", lambda job_ids=None: None)
    monkeypatch.setattr(faults, "_queue_pass", lambda: None)
    c = gpu_cluster(1, 3, 8, name=f"frace{rnd}")  # host001-003 on one leaf: one unit
    job = submit(JobSpec(name="victim", pool_id=c.pool.pk, count=8, gpus_per_host=8, on_fault="replace"))
    queue.run_pass()
    start(job.pk)
    job.refresh_from_db()
    (host,) = job.placement
    link = Link.objects.select_related("port_a__node", "port_b__node").filter(
        port_a__node__host__name=host
    ).first() or Link.objects.select_related("port_a__node", "port_b__node").get(
        port_b__node__host__name=host
    )
    a, b = link.port_a, link.port_b
    now = timezone.now()
    Alarm.objects.create(
        fabric=c.fabric, code="link.down", severity="critical", category="topology", object_type="link",
        object_key=link_key((a.node.node_guid, a.port_num), (b.node.node_guid, b.port_num)),
        object_repr=str(link), message="down", first_seen=now, last_seen=now,
    )  # fmt: skip
    assert faults.evaluate()["replace_wanted"] == 1
    # two newcomers want the two healthy hosts the replacement also wants
    for i in range(2):
        submit(JobSpec(name=f"new{i}", pool_id=c.pool.pk, count=8, gpus_per_host=8))
    barrier = threading.Barrier(2)
    results, errors = {}, []

    def run(name, fn) -> None:
        try:
            barrier.wait(timeout=30)
            results[name] = fn()
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [
        threading.Thread(target=run, args=("replace", lambda: faults.replace_faulted(timezone.now()))),
        threading.Thread(target=run, args=("pass", lambda: passes._one_pass(None))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    twice = (
        AllocationItem.objects.filter(active=True).values("gpu_id").annotate(n=Count("pk")).filter(n__gt=1)
    )
    assert twice.count() == 0
    held = list(AllocationItem.objects.filter(active=True).values_list("gpu_id", flat=True))
    assert set(Gpu.objects.filter(state="allocated").values_list("pk", flat=True)) == set(held)
    holding = Job.objects.filter(state__in=["placed", "running", "degraded"])
    assert len(held) == sum(holding.values_list("count", flat=True))
    hosts = [h for j in holding for h in j.placement]
    assert len(hosts) == len(set(hosts)) and host not in hosts  # a host goes to one job, never the bad one
    job.refresh_from_db()
    # the victim was given a healthy host (by the racing replacement or by the pass's own, which
    # runs first in a pass), or it lost the race and was requeued; once, never both, never stuck
    done = {k: results["replace"][k] + results["pass"].get(k, 0) for k in ("replaced", "requeued")}
    assert (job.state, done) in (
        ("placed", {"replaced": 1, "requeued": 0}), ("pending", {"replaced": 0, "requeued": 1}),
    )  # fmt: skip
