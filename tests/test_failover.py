"""Leaders with standbys (issue 25 §1; ``core.leases``): one winner per lease, fencing of a
partitioned leader, and the beat's take-over with real ``celery beat`` processes (PostgreSQL and
Redis; the beat's messages are read from the broker, no worker needed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from core.leases import Lease, LeaseKeeper
from core.models import Lease as LeaseRow
from tests.support.waits import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("leases across processes: PostgreSQL")


def test_one_winner_and_take_over_after_the_lease_lapses():
    first, second = Lease("t:one", ttl_s=1.0), Lease("t:one", ttl_s=1.0)
    results: list[bool] = []
    barrier = threading.Barrier(2)

    def race(lease):
        barrier.wait()
        results.append(lease.acquire())
        connection.close()

    threads = [threading.Thread(target=race, args=(lease,)) for lease in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(results) == [False, True]  # the one statement lets exactly one in
    leader, standby = (first, second) if first.held() else (second, first)
    assert leader.acquire() and not standby.acquire()  # renewal by the holder; the other waits
    row = LeaseRow.objects.get(role="t:one")
    assert (row.holder, row.fencing) == (leader.holder, 1)
    # the leader stops renewing: its local deadline passes before the row's expiry, and only then
    # may the standby take over, with the next fencing number
    wait_for(lambda: not leader.held(), 2, "the leader's local deadline")
    assert timezone.now() < LeaseRow.objects.get(role="t:one").expires_at
    assert not standby.acquire()
    wait_for(standby.acquire, 3, "the standby's take-over")
    row = LeaseRow.objects.get(role="t:one")
    assert (row.holder, row.fencing) == (standby.holder, 2)
    assert not leader.acquire() and not leader.held()


def test_partitioned_leader_stops_before_its_lease_ends():
    """The leader's database connection is terminated (pg_terminate_backend) and its reconnection
    hangs on the lease row (a lock held here, as a network partition would): its fence stops it
    before the lease's expiry, and a standby takes over only after that expiry."""
    from django.db import connections

    lost_at: list = []
    keeper = LeaseKeeper(["t:fence"], ttl_s=3.0, on_lost=lambda role: lost_at.append(timezone.now()))
    keeper.start()
    other = connections.create_connection("default")  # the "partition": holds the row's lock
    try:
        wait_for(lambda: keeper.held("t:fence"), 10, "the keeper to lead")
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND query LIKE %s",
                ["%core_lease%"],
            )
            pids = [r[0] for r in cursor.fetchall()]
        assert pids, "the keeper's backend"
        other.set_autocommit(False)
        with other.cursor() as cursor:
            cursor.execute("SELECT expires_at FROM core_lease WHERE role = 't:fence' FOR UPDATE")
            (expires_at,) = cursor.fetchone()
            cursor.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [pids])
        wait_for(lambda: lost_at, 5, "the leader to stop")
        assert lost_at[0] < expires_at, (lost_at[0], expires_at)  # fenced before its lease ended
        assert not keeper.held("t:fence")
        # meanwhile a standby cannot take the role before that expiry either (it waits on the row)
        other.rollback()  # the partition heals: the same holder leads again, same fencing number
        wait_for(lambda: keeper.held("t:fence"), 10, "the keeper to lead again")
        assert LeaseRow.objects.get(role="t:fence").fencing == 1
    finally:
        other.close()
        keeper.stop()


def _broker_messages(redis_client, queue: str) -> list[tuple[float, str]]:
    out = []
    for key in redis_client.keys(f"{queue}*"):
        if redis_client.type(key) != b"list":
            continue
        while (raw := redis_client.lpop(key)) is not None:
            out.append((time.monotonic(), json.loads(raw)["headers"]["task"]))
    return out


def test_beat_standby_takes_over_after_kill_9(tmp_path):
    """Two ``celery beat -S weft.beat:LeaderScheduler``: only the leader sends (the scheduling
    pass every 2 s, counted in the broker); kill -9 of the leader → the standby's first send within
    one interval + 10 s, and never two sends of the pass closer than half an interval (no two
    leaders at once)."""
    import redis

    redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/7")
    client = redis.Redis.from_url(redis_url)
    client.delete(*client.keys("control*") or ["control"])
    name = connection.settings_dict["NAME"]
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{name}",
        "REDIS_URL": redis_url,
        "WEFT_PRODUCTION": "0",
        "WEFT_DATA_DIR": str(tmp_path),
        "WEFT_LEASE_TTL_S": "3",
        "WEFT_SCHEDULER_PASS_INTERVAL_S": "2",
    }
    env.pop("WEFT_CELERY_EAGER", None)
    interval, task = 2.0, "scheduler.tasks.run_pass_task"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "weft",
                "beat",
                "-S",
                "weft.beat:LeaderScheduler",
                "-s",
                str(tmp_path / f"beat{i}"),
                "--loglevel",
                "WARNING",
            ],
            cwd=ROOT,
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        for i in range(2)
    ]
    sends: list[tuple[float, str]] = []
    try:
        first = wait_for(lambda: LeaseRow.objects.filter(role="beat").first(), 60, "a beat leader")
        leader_pid = int(first.holder.split(":")[1])
        assert leader_pid in {p.pid for p in procs}
        wait_for(
            lambda: sends.extend(_broker_messages(client, "control")) or sum(t == task for _, t in sends) >= 2,
            30, "two passes sent by the leader",
        )  # fmt: skip
        os.kill(leader_pid, signal.SIGKILL)
        killed = time.monotonic()
        before = len(sends)
        wait_for(
            lambda: sends.extend(_broker_messages(client, "control"))
            or any(t == task for _, t in sends[before:]),
            interval + 10, "the standby's first pass",
        )  # fmt: skip
        took_over = next(at for at, t in sends[before:] if t == task) - killed
        assert took_over <= interval + 10
        row = LeaseRow.objects.get(role="beat")
        assert row.fencing == first.fencing + 1 and int(row.holder.split(":")[1]) != leader_pid
        # a few more passes from the new leader: still one sender
        count = sum(t == task for _, t in sends)
        wait_for(
            lambda: sends.extend(_broker_messages(client, "control")) or sum(t == task for _, t in sends) >= count + 2,
            15, "passes from the new leader",
        )  # fmt: skip
        times = [at for at, t in sends if t == task]
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        assert min(gaps) > interval / 2, gaps
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(10)
        client.delete(*client.keys("control*") or ["control"])


@pytest.mark.lab
def test_notice_listener_standby_takes_over_after_kill_9(lab_factory, tmp_path):
    """Two ``manage.py listen_notices`` against a small lab: the leader of the fabric's lease
    listens; kill -9 of it → the standby takes the lease (next fencing number), subscribes, and a
    cable pulled then is alarmed (``link.down``) at most 10 s after the kill."""
    from events.models import Alarm
    from fabric.models import Fabric
    from fabric.services.discovery import discover
    from fabric.services.notice_status import notice_status
    from lab.pytest_plugin import small_netfile

    lab = lab_factory(small_netfile())
    fabric = Fabric.objects.create(name="lab", tool_env=dict(lab.tool_env))
    assert discover(fabric).status == "ok"
    role = f"notices:{fabric.pk}"
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{connection.settings_dict['NAME']}",
        "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/7"),
        "WEFT_PRODUCTION": "0",
        "WEFT_DATA_DIR": str(tmp_path),
        "WEFT_LEASE_TTL_S": "3",
        "WEFT_NOTICE_RESCAN_S": "1",
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "manage.py", "listen_notices"],
            cwd=ROOT,
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        for _ in range(2)
    ]
    try:
        first = wait_for(lambda: LeaseRow.objects.filter(role=role).first(), 60, "a leader of the fabric")
        leader_pid = int(first.holder.split(":")[1])
        assert leader_pid in {p.pid for p in procs}
        wait_for(lambda: (notice_status(fabric.pk) or {}).get("pid"), 30, "the leader's listener child")
        wait_for(lambda: (notice_status(fabric.pk) or {}).get("state") == "subscribed", 60, "subscribed")
        os.kill(leader_pid, signal.SIGKILL)
        killed = time.monotonic()
        os.killpg(leader_pid, signal.SIGKILL)  # its listener child too (the host died)
        row = wait_for(
            lambda: LeaseRow.objects.filter(role=role, fencing=first.fencing + 1).first(), 10, "the take-over"
        )
        assert int(row.holder.split(":")[1]) != leader_pid
        wait_for(
            lambda: (s := notice_status(fabric.pk) or {}).get("state") == "subscribed"
            and s.get("subscribed_at", 0) > time.time() - (time.monotonic() - killed),
            10, "the standby's listener subscribed",
        )  # fmt: skip
        lab.unlink("Switch1", 3)
        wait_for(
            lambda: Alarm.objects.open().filter(fabric=fabric, code="link.down").exists(),
            max(0.5, 10 - (time.monotonic() - killed)), "link.down ≤ 10 s after the kill",
        )  # fmt: skip
        assert time.monotonic() - killed <= 10
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(10)


def test_role_without_a_live_leader_raises_role_down_and_weft_role_up_is_0(settings):
    """A role whose lease lapsed more than ``WEFT_LEASE_TTL_S`` ago: Critical ``system.role_down``
    (once), ``weft_role_up{role}`` 0; a leader again: ``system.role_up`` clears it, the metric 1."""
    from django.test import Client

    from events.models import Alarm
    from events.roles import check_roles

    settings.WEFT_LEASE_TTL_S = 1.0
    lease = Lease("snmp_traps", ttl_s=1.0)
    assert lease.acquire()
    client = Client(REMOTE_ADDR="127.0.0.1")

    def role_up() -> str:
        text = client.get("/metrics", secure=True).content.decode()
        return next(line for line in text.splitlines() if line.startswith('weft_role_up{role="snmp_traps"}'))

    assert lease.acquire() and role_up().endswith(" 1.0")
    assert [s.wrote for s in check_roles()] == [""]
    # the leader dies: no renewal; after its expiry plus the grace, the role is down
    row = LeaseRow.objects.get(role="snmp_traps")
    down_at = row.expires_at + timedelta(seconds=1.0)
    wait_for(lambda: timezone.now() > down_at, 5, "the lease and its grace to pass")
    assert [s.wrote for s in check_roles()] == ["system.role_down"]
    assert [s.wrote for s in check_roles()] == [""]  # raised once, not again at every check
    alarm = Alarm.objects.open().get(code="system.role_down", object_key="snmp_traps")
    assert alarm.severity == "critical" and alarm.fabric_id is None
    assert role_up().endswith(" 0.0")
    standby = Lease("snmp_traps", ttl_s=1.0)
    assert standby.acquire()
    assert [s.wrote for s in check_roles()] == ["system.role_up"]
    assert not Alarm.objects.open().filter(code="system.role_down").exists()
    assert standby.acquire() and role_up().endswith(" 1.0")
    assert LeaseRow.objects.get(role="snmp_traps").fencing == 2


def _udp_port_taken(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def test_trap_receiver_standby_binds_only_after_the_leader_died(tmp_path):
    """Two ``manage.py snmp_traps`` on one address: only the lease holder binds it (the standby
    waits, no "address in use"); kill -9 of the leader → the standby holds the lease (next fencing
    number) and the socket within the lease's time to live plus 10 s."""
    port = 8262
    assert not _udp_port_taken(port)
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{connection.settings_dict['NAME']}",
        "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/7"),
        "WEFT_PRODUCTION": "0",
        "WEFT_DATA_DIR": str(tmp_path),
        "WEFT_LEASE_TTL_S": "2",
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "manage.py", "snmp_traps", "--listen", f"127.0.0.1:{port}"],
            cwd=ROOT,
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / f"traps{i}.log").open("w"),
        )  # fmt: skip
        for i in range(2)
    ]
    try:
        first = wait_for(lambda: LeaseRow.objects.filter(role="snmp_traps").first(), 60, "a leader")
        leader_pid = int(first.holder.split(":")[1])
        wait_for(lambda: _udp_port_taken(port), 30, "the leader's socket")
        assert all(p.poll() is None for p in procs)  # the standby did not fail on "address in use"
        os.kill(leader_pid, signal.SIGKILL)
        killed = time.monotonic()
        row = wait_for(
            lambda: LeaseRow.objects.filter(role="snmp_traps", fencing=first.fencing + 1).first(),
            12,
            "take-over",
        )
        assert int(row.holder.split(":")[1]) != leader_pid
        wait_for(lambda: _udp_port_taken(port), 12 - (time.monotonic() - killed), "the standby's socket")
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(10)
