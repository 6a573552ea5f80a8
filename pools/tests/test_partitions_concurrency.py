"""Concurrent allocations of a pool with a PKey on PostgreSQL + Redis (real parallel connections,
the apply lock in Redis): the partition's members end equal to the CA ports of the hosts the
pool holds, the applies coalesce (fewer than the member changes) and none is lost (the file
OpenSM was last given is what is stored). Runs in bin/test's PostgreSQL phase (``integration``,
Celery eager: each apply runs in the thread whose allocation queued it)."""

from __future__ import annotations

import hashlib
import random
import threading
import time
from collections import Counter

import pytest
from django.db import connection, connections

from accounts.models import AuditEntry
from fabric.choices import NodeType
from fabric.models import PartitionMember, Port
from fabric.services.ingest import import_topology_text
from fabric.services.partitions import conf_digest
from lab import netgen
from pools.lab import seed_lab_gpus
from pools.models import AllocationItem, Gpu, Pool, Tenant
from pools.services.allocation import AllocationError, AllocationRequest, allocate, release
from pools.services.partitions import set_pool_pkey

THREADS = 20
PER_THREAD = 10  # 200 requests: allocations of 1-4 GPUs of one host, releases in between


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_concurrent_allocations_keep_members_exact_and_applies_coalesced(tmp_path, settings):
    assert connection.vendor == "postgresql"
    settings.WEFT_PARTITIONS_VERIFY_TIMEOUT_S = 0.3  # no OpenSM here: the verification finds drift fast
    fabric = import_topology_text("race", netgen.rail_pod(hosts=12, rails=2), filename="r.net").fabric
    fabric.partitions_path = str(tmp_path / "partitions.conf")
    fabric.sm_reload_command = ["true"]
    fabric.save()
    seed_lab_gpus(fabric)  # 96 GPUs
    pool = Pool.objects.create(name="p", tenant=Tenant.objects.create(name="t"), fabric=fabric)
    set_pool_pkey(pool, 0x0A50)
    by_host: dict[int, list[int]] = {}
    for pk, host in Gpu.objects.order_by("pk").values_list("pk", "host_id"):
        by_host.setdefault(host, []).append(pk)
    hosts = list(by_host)
    barrier = threading.Barrier(THREADS)
    outcomes: Counter = Counter()
    errors: list[BaseException] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        rng = random.Random(n)
        held: list[int] = []
        try:
            barrier.wait(timeout=30)
            for _ in range(PER_THREAD):
                if held and rng.random() < 0.4:
                    release(held.pop(rng.randrange(len(held))))
                    key = "released"
                else:
                    gpus = rng.sample(by_host[rng.choice(hosts)], rng.randint(1, 4))
                    try:
                        held.append(allocate(pool.pk, AllocationRequest(count=len(gpus), gpu_ids=gpus)).pk)
                        key = "ok"
                    except AllocationError as exc:
                        key = exc.code
                with lock:
                    outcomes[key] += 1
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connections.close_all()

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    elapsed = time.monotonic() - started
    assert not errors, errors[:3]
    assert outcomes["ok"] >= 40 and outcomes["released"] >= 20, outcomes
    # members = the CA ports of the hosts holding active items, exactly
    held_hosts = AllocationItem.objects.filter(allocation__pool=pool, active=True).values("gpu__host_id")
    expected = sorted(
        Port.objects.filter(node__host_id__in=held_hosts, node__node_type=NodeType.CA).values_list(
            "port_guid", flat=True
        )
    )
    members = sorted(
        PartitionMember.objects.filter(partition__pool=pool, reason="pool").values_list(
            "port_guid", flat=True
        )
    )
    assert members == expected and members
    # the file OpenSM was last given is the stored state: no change lost to the coalescing
    written = hashlib.sha256(open(fabric.partitions_path, "rb").read()).hexdigest()
    assert written == conf_digest(fabric)
    changes = AuditEntry.objects.filter(action="partition.set_members").count()
    applies = AuditEntry.objects.filter(action="partition.apply").count()
    print(
        f"{THREADS * PER_THREAD} requests in {elapsed:.1f} s: {dict(outcomes)}; "
        f"{changes} member changes, {applies} applies"
    )
    assert applies < changes
