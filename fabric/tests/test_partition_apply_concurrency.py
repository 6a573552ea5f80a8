"""One coalesced apply path on PostgreSQL + Redis (the apply lock in Redis, real parallel
connections): an apply requested while another runs joins it (``coalesced``) and gets the
holder's result; the request returned at once (issue 27). Runs in the PostgreSQL phase."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from fabric.models import Fabric, Partition, PartitionApply
from fabric.services.partitions import run_apply, save_partition, set_members
from tests.support.waits import wait_for


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_an_apply_requested_while_one_runs_joins_it_and_gets_its_result(tmp_path):
    assert connection.vendor == "postgresql"
    started, go = tmp_path / "started", tmp_path / "go"
    fabric = Fabric.objects.create(
        name="co",
        partitions_path=str(tmp_path / "partitions.conf"),
        # the "reload" holds the apply (and its lock) until the test lets it go
        sm_reload_command=["sh", "-c", f"touch {started}; while [ ! -e {go} ]; do sleep 0.05; done"],
    )
    part = save_partition(Partition(fabric=fabric, name="t", pkey=0x0A30))
    set_members(part, ["0xdeadbeefdeadbeef"])  # not in the fabric: no port to read, "partial"
    # two recorded requests (``request_apply`` makes them and queues ``run_apply``; here the test
    # runs them itself, in two threads, to hold the first one open)
    first = PartitionApply.objects.create(fabric=fabric, source="api", force=True)
    second = PartitionApply.objects.create(fabric=fabric, source="command", force=True)
    results: dict[str, dict] = {}

    def holder() -> None:
        try:
            results["first"] = run_apply(first.pk)
        finally:
            connections.close_all()

    t = threading.Thread(target=holder)
    t.start()
    try:
        wait_for(started.exists, 30, "the first apply to signal OpenSM (holding the lock)")
        assert PartitionApply.objects.get(pk=first.pk).state == "running"
        joined = run_apply(second.pk)  # returns at once: the holder applies this request too
        assert joined["skipped"], joined
        assert PartitionApply.objects.get(pk=second.pk).state == "coalesced"
    finally:
        go.touch()
        t.join(60)
    assert not t.is_alive()
    a, b = PartitionApply.objects.get(pk=first.pk), PartitionApply.objects.get(pk=second.pk)
    assert (a.state, a.ok, b.state, b.ok) == ("done", True, "done", True), (a.result, b.result)
    assert b.result == a.result and a.result["applies"] == 1 and a.result["state"] == "applied"
    part.refresh_from_db()
    assert part.applied_status == "applied to 0 of 1 members, 1 not verifiable"
