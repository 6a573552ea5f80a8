"""Two scheduling passes at once on PostgreSQL, over real parallel connections: the lock is
bypassed on purpose (``_one_pass``), so the binding itself must keep every job placed once and
every GPU held once. Runs in bin/test's PostgreSQL phase (``integration``)."""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest
from django.db import connection, connections

from pools.models import Allocation, AllocationItem, Gpu
from scheduler import receivers
from scheduler.models import Job
from scheduler.services import queue
from scheduler.services.queue import JobSpec, passes, submit
from tests.support.jobs import gpu_cluster


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_two_passes_at_once_never_place_a_job_twice_nor_share_a_gpu(monkeypatch):
    assert connection.vendor == "postgresql"
    monkeypatch.setattr(receivers, "queue_pass", lambda: None)  # submits queue no pass: both passes race
    c = gpu_cluster(4, 4, 8, name="race")  # 128 GPUs
    rng = random.Random(7)
    for i in range(40):
        n = rng.choice([1, 2, 4, 8, 16])
        submit(JobSpec(name=f"j{i}", pool_id=c.pool.pk, count=n, gpus_per_host=8 if n == 16 else None))
    barrier = threading.Barrier(2)
    results, errors = [], []

    def one() -> None:
        try:
            barrier.wait(timeout=30)
            results.append(passes._one_pass(None))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert len(results) == 2, results
    placed = Job.objects.filter(state="placed")
    active = Allocation.objects.filter(state="active")
    # every placed job holds exactly one active allocation, and nothing else holds one
    assert sorted(placed.values_list("allocation_id", flat=True)) == sorted(
        active.values_list("pk", flat=True)
    )
    assert Counter(active.values_list("job", flat=True)).most_common(1)[0][1] == 1
    items = AllocationItem.objects.filter(active=True)
    gpus = list(items.values_list("gpu_id", flat=True))
    assert len(gpus) == len(set(gpus)) == sum(placed.values_list("count", flat=True))
    assert set(Gpu.objects.filter(state="allocated").values_list("pk", flat=True)) == set(gpus)
    # the two passes together placed each job once; the rest waits, holding nothing
    assert sum(r["placed"] for r in results) == placed.count() > 0
    assert not Job.objects.filter(state="pending", allocation__isnull=False).exists()
    assert set(Job.objects.values_list("state", flat=True)) <= {"placed", "pending"}
    # a third pass changes nothing that is already bound
    before = set(placed.values_list("pk", "allocation_id"))
    queue.run_pass()
    assert before <= set(Job.objects.filter(state="placed").values_list("pk", "allocation_id"))
