"""A job submitted while its pool is deleted, over two real PostgreSQL connections: whichever
takes the pool row first decides, and nothing is lost silently. The submit locks the pool row
(``scheduler.services.queue``); the delete locks it and only then counts the queued jobs
(``pools.services.tenancy.delete_pool``). Before, the delete counted outside any lock and a job
committed in between was cascaded away after its submit had answered 201.

Each order is forced: the first side, holding the pool lock, waits (bounded) until the other is
blocked on a lock. Without the locks the other never blocks and the wait fails, saying so."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from pools.models import Pool, Tenant
from pools.services import tenancy
from scheduler.models import Job
from scheduler.services import queue
from scheduler.services.queue import JobSpec, submitting
from tests.support.gpus import make_gpu_fabric
from tests.support.pglocks import backend_pid, waits_for_a_lock
from tests.support.waits import wait_for


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first", ["submit", "delete"])
def test_a_submit_racing_its_pools_delete_is_kept_or_refused_never_lost(first, monkeypatch):
    assert connection.vendor == "postgresql"
    make_gpu_fabric("g", hosts=1, per_host=1)  # the pool can hold the job's GPU (submit refuses more)
    tenant = Tenant.objects.create(name="t")
    pool = Pool.objects.create(name="p", tenant=tenant, quota_gpus=4)
    pids: dict[str, int] = {}
    me = threading.local()

    def hold_then(original, name):
        """Run ``original`` once ``name``'s side holds the pool lock and the other side waits."""

        def wrapped(*args, **kwargs):
            if me.name == name:
                other = pids["delete" if name == "submit" else "submit"]
                wait_for(lambda: waits_for_a_lock(other), 10, f"the {other} side to wait for the pool lock")
            return original(*args, **kwargs)

        return wrapped

    if first == "submit":  # after the job's insert, inside the submit's transaction
        monkeypatch.setattr(submitting, "job_event", hold_then(submitting.job_event, "submit"))
    else:  # the delete's check, after its lock
        monkeypatch.setattr(tenancy, "refuse_if_holding", hold_then(tenancy.refuse_if_holding, "delete"))
    results: dict[str, object] = {}
    ready = threading.Barrier(2)

    def run(name: str) -> None:
        me.name = name
        try:
            pids[name] = backend_pid()
            ready.wait(timeout=30)
            if name != first:  # let the first side take the lock
                wait_for(lambda: first in results or _holds(pids[first]), 10, "the first side to start")
            if name == "submit":
                results[name] = queue.submit(JobSpec(name="j", pool_id=pool.pk, count=1))
            else:
                tenancy.delete_pool(Pool.objects.get(pk=pool.pk))
                results[name] = "deleted"
        except Exception as exc:  # the outcome under test
            results[name] = exc
        finally:
            connections.close_all()

    def _holds(pid: int) -> bool:
        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM pg_locks WHERE pid = %s AND granted AND locktype = 'tuple' OR "
                        "(pid = %s AND granted AND mode LIKE 'Row%%')", [pid, pid])  # fmt: skip
            return cur.fetchone()[0] > 0

    threads = [threading.Thread(target=run, args=(n,)) for n in ("submit", "delete")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if first == "submit":
        assert isinstance(results["submit"], Job), results
        assert isinstance(results["delete"], tenancy.TenancyConflict), results
        assert "1 queued job(s)" in str(results["delete"])
        assert Pool.objects.filter(pk=pool.pk).exists()
        assert Job.objects.filter(pk=results["submit"].pk, state="pending").exists()
    else:
        assert results["delete"] == "deleted", results
        assert isinstance(results["submit"], Pool.DoesNotExist), results
        assert not Pool.objects.filter(pk=pool.pk).exists() and not Job.objects.exists()
