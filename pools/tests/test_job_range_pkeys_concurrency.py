"""Two Admin changes at once on PostgreSQL, over real parallel connections: a pool PKey set on a
fabric and another pool's job PKey range brought over it (turning job isolation on). Each passes
its check when judged alone; ``pools.services.partitions.save_pool`` locks the fabric row before
judging, so the second waits for the first, reads its write and is refused: one wins, and no
pool PKey lies in a job range afterwards. Runs in bin/test's PostgreSQL phase (``integration``).

The first change, once its check passed, waits (bounded) until the second is blocked on a lock:
without the fabric lock the second would never block, both would pass their checks, and the
wait would time out (the test fails saying so)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from fabric.services.ingest import import_topology_text
from lab import netgen
from pools.models import Pool, Tenant
from pools.services import partitions as service
from pools.services.partitions import KEEP, PoolPKeyError, job_range_overlaps, save_pool
from tests.support.pglocks import backend_pid, waits_for_a_lock
from tests.support.waits import wait_for


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first", ["pool_pkey", "job_range"])
def test_a_pool_pkey_and_a_job_range_racing_only_one_wins(first, monkeypatch):
    assert connection.vendor == "postgresql"
    fabric = import_topology_text("race", netgen.rail_pod(hosts=1, rails=1), filename="r.net").fabric
    tenant = Tenant.objects.create(name="t")
    plain = Pool.objects.create(name="plain", tenant=tenant, fabric=fabric)
    iso = Pool.objects.create(
        name="iso", tenant=tenant, fabric=fabric, job_pkey_min=0x6000, job_pkey_max=0x60FF
    )

    pids: dict[str, int] = {}
    checked = threading.Event()  # the first change passed its check (and holds its locks)
    waited: set[str] = set()
    me = threading.local()

    def after_check(original):
        def wrapped(*args, **kwargs):
            original(*args, **kwargs)  # a refusal raises here, before any wait
            if me.name == first and me.name not in waited:
                waited.add(me.name)
                checked.set()
                other = pids["job_range" if me.name == "pool_pkey" else "pool_pkey"]
                wait_for(lambda: waits_for_a_lock(other), 10, "the other change to wait for a lock")

        return wrapped

    monkeypatch.setattr(service, "check_pool_pkey", after_check(service.check_pool_pkey))
    monkeypatch.setattr(service, "check_job_range", after_check(service.check_job_range))
    changes = {
        "pool_pkey": lambda: save_pool(Pool.objects.get(pk=plain.pk), {}, pkey=0x6010),
        "job_range": lambda: save_pool(Pool.objects.get(pk=iso.pk), {"job_isolation": True}, pkey=KEEP),
    }
    results: dict[str, object] = {}
    ready = threading.Barrier(2)

    def run(name: str) -> None:
        me.name = name
        try:
            pids[name] = backend_pid()
            ready.wait(timeout=30)
            if name != first:
                assert checked.wait(timeout=30), "the first change never reached its check"
            changes[name]()
            results[name] = "ok"
        except PoolPKeyError as exc:
            results[name] = exc
        except BaseException as exc:  # reported below
            results[name] = exc
        finally:
            if name == first:
                checked.set()  # also when it failed: the other does not wait out its timeout
            connections.close_all()

    threads = [threading.Thread(target=run, args=(name,)) for name in changes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    second = "job_range" if first == "pool_pkey" else "pool_pkey"
    assert results[first] == "ok", results
    refused = results[second]
    assert isinstance(refused, PoolPKeyError), results
    if second == "pool_pkey":
        assert refused.field == "pkey"
        assert "PKey 0x6010 lies in the job PKey range 0x6000-0x60ff of pool iso" in str(refused)
        assert Pool.objects.get(pk=plain.pk).pkey is None and Pool.objects.get(pk=iso.pk).job_isolation
    else:
        assert refused.field == "job_isolation"
        assert "the job PKey range 0x6000-0x60ff holds pool PKeys: 0x6010 (pool plain" in str(refused)
        assert Pool.objects.get(pk=plain.pk).pkey == 0x6010 and not Pool.objects.get(pk=iso.pk).job_isolation
    assert job_range_overlaps() == []
