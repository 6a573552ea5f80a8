"""Fencing numbers in the roles' writes (issue 25 §1): a leader whose lease was taken over (a
standby leads with a higher fencing number) has its writes refused by the database check
(``core.leases.check_fence``), even while its own clock still says it leads — the notice
listener's port-state and trap writes, and the beat's sends. PostgreSQL (the lease row is
share-locked by the check); the take-over is a real one (the old lease lapsed, another holder took
it)."""

from __future__ import annotations

import os
import uuid
import warnings

import pytest
from django.db import connection

from core.leases import Fence, Lease, StaleLeader, check_fence
from events.models import Event
from fabric.choices import PortState
from fabric.models import Fabric, Port
from fabric.parsers import parse_ibnetdiscover
from fabric.parsers.ibnetdiscover import derived_guid as G
from fabric.services.ingest import PortObservation, apply_port_states, ingest_topology
from fabric.services.notices import record_error_trap
from tests.support.topologies import BASE

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("fencing against the lease row: PostgreSQL")


def _lapse(role: str) -> None:
    """The leader's lease ran out (its renewals stopped reaching the database)."""
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE core_lease SET expires_at = clock_timestamp() - interval '1 second' WHERE role = %s",
            [role],
        )


def _taken_over(role: str) -> tuple[Lease, Lease]:
    """(old, new): ``old`` led ``role`` and still believes it does (its local deadline has not
    passed); its lease lapsed and ``new`` took the role over."""
    old = Lease(role, ttl_s=60)
    assert old.acquire()
    _lapse(role)
    new = Lease(role, ttl_s=60)
    assert new.acquire() and new.fencing == old.fencing + 1
    assert old.held()  # the old leader's clock: it would act
    return old, new


def test_a_taken_over_notice_listener_writes_nothing_and_the_new_leader_writes():
    fabric = Fabric.objects.create(name="fenced")
    ingest_topology(fabric, parse_ibnetdiscover(BASE, "fenced"), source="file")
    role = f"notices:{fabric.pk}"
    old, new = _taken_over(role)
    down = {(G("leaf1"), 7): PortObservation(PortState.DOWN, 2)}
    before = Event.objects.count()

    with pytest.raises(StaleLeader) as refused:
        apply_port_states(fabric, down, note="trap 128", fence=Fence(role, old.fencing))
    assert (refused.value.fencing, refused.value.current) == (old.fencing, new.fencing)
    with pytest.raises(StaleLeader):
        record_error_trap(fabric, {"lid": 1, "port": 7, "trap": 129}, fence=Fence(role, old.fencing))
    # nothing of either write is stored
    assert Port.objects.get(node__node_guid=G("leaf1"), port_num=7).state != PortState.DOWN
    assert Event.objects.count() == before

    res = apply_port_states(fabric, down, note="trap 128", fence=Fence(role, new.fencing))
    assert res.links_down and Port.objects.get(node__node_guid=G("leaf1"), port_num=7).state == PortState.DOWN
    assert Event.objects.filter(fabric=fabric, code="link.down").count() == 1


def test_check_fence_refuses_a_role_with_no_lease_and_passes_no_fence():
    check_fence(None)  # not a leader's write
    with pytest.raises(StaleLeader):
        check_fence(Fence(f"nobody-{uuid.uuid4().hex[:6]}", 1))


def test_a_taken_over_beat_sends_nothing(tmp_path, caplog):
    """The LeaderScheduler of the old beat still holds its lease locally; its next send is refused
    by the fencing check, and the new leader's goes out (a real Redis queue counts them)."""
    import redis
    from celery.beat import ScheduleEntry

    from weft.beat import ROLE, LeaderScheduler
    from weft.celery import app

    queue = f"weft-fence-{uuid.uuid4().hex[:8]}"
    broker = redis.Redis.from_url(os.environ["REDIS_URL"])
    scheduler = LeaderScheduler(app=app, schedule_filename=str(tmp_path / "schedule"), lazy=True)
    try:
        scheduler.leases.want([ROLE], now=True)  # elected (the renewing thread is not started)
        assert scheduler.leases.held(ROLE)
        entry = ScheduleEntry(
            name="fenced", task="weft.test.fenced", schedule=60, options={"queue": queue}, app=app
        )
        with warnings.catch_warnings():  # the test process is eager; send_task still publishes
            warnings.simplefilter("ignore")
            scheduler.apply_entry(entry, producer=None)
            assert broker.llen(queue) == 1  # the leader's send

            _lapse(ROLE)
            new = Lease(ROLE, ttl_s=60)
            assert new.acquire()
            assert scheduler.leases.held(ROLE)  # its clock says it leads
            scheduler.apply_entry(entry, producer=None)
        assert broker.llen(queue) == 1  # refused: nothing more sent
        assert (
            f"beat: fenced not sent: lease {ROLE}: a write of the leader elected with fencing" in caplog.text
        )
    finally:
        broker.delete(queue)
        scheduler.leases.stop()


def test_a_beat_closed_on_sigterm_says_it_is_stopping(tmp_path, caplog):
    """``celery beat`` closes its scheduler on SIGTERM: the lease is released and the log says the
    beat is stopping, not that it stands by (issue 26 §4 walkthrough)."""
    import logging

    from weft.beat import ROLE, LeaderScheduler
    from weft.celery import app

    scheduler = LeaderScheduler(app=app, schedule_filename=str(tmp_path / "schedule"))  # its shelve open
    scheduler.leases.want([ROLE], now=True)
    scheduler._campaigning = True  # as after the first tick (the threads are not needed here)
    assert scheduler.leases.held(ROLE)
    with caplog.at_level(logging.INFO, logger="weft.beat"):
        scheduler.close()
    assert not scheduler.leases.held(ROLE)
    assert "beat: stopping: lease beat released" in caplog.text
    assert "standing by" not in caplog.text
