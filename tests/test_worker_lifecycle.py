"""Real ``celery -A weft worker`` processes against PostgreSQL, Redis and a hung lab fabric: a pool
process or a whole worker killed with SIGKILL mid-task, and a SIGTERM during a hanging discovery.

Before: a worker killed mid-sweep left the locks for ~5 minutes (58 beat ticks skipped) and its
task was redone only after Redis's one-hour visibility timeout; a TERM-ed worker waited for a
hanging discovery up to ``discovery_timeout_s`` (300 s); diags children were left behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
import warnings
from pathlib import Path

import pytest
from django.db import connection

from core.locks import lock_remaining_s
from fabric.choices import DiscoveryStatus
from fabric.models import Discovery, Fabric
from fabric.services.discovery import discover
from lab.pytest_plugin import small_netfile
from tests.process_support import alive, children_tagged, wait_for
from weft.worker import child_pids

pytestmark = [
    pytest.mark.integration,
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

ROOT = Path(__file__).resolve().parents[1]
TTL = 3.0


class Worker:
    """A ``celery -A weft worker`` process (its own session) on the test database and its own queue."""

    def __init__(self, log: Path, queue: str, **env: str) -> None:
        db = connection.settings_dict
        url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        self.queue = queue
        self.log = log
        full = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
        full.update(
            DATABASE_URL=url,
            WEFT_PRODUCTION="0",
            WEFT_CELERY_EAGER="0",
            WEFT_LOCK_TTL_S=str(TTL),
            WEFT_TOOL_TIMEOUT_S="60",
            PYTHONUNBUFFERED="1",
        )
        full.update(env)
        argv = [sys.executable, "-m", "celery", "-A", "weft", "worker", "-l", "info", "-c", "1"]
        argv += ["-Q", queue, "-n", f"{queue}@%h", "--without-heartbeat", "--without-gossip"]
        argv += ["--without-mingle"]
        self._out = log.open("ab")
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env=full, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True
        )
        assert self.wait_log(" ready.", 60), self.text()[-3000:]

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_log(self, needle: str, timeout: float) -> bool:
        return bool(wait_for(lambda: needle in self.text(), timeout, interval=0.2))

    def pool_pid(self) -> int | None:
        pids = child_pids(self.proc.pid)
        return pids[0] if len(pids) == 1 else None

    def send(self, name: str, *args) -> None:
        from weft.celery import app

        with warnings.catch_warnings():  # the test process is eager; send_task still publishes
            warnings.simplefilter("ignore")
            app.send_task(name, args=list(args), queue=self.queue)

    def kill_all(self) -> None:
        """SIGKILL the worker and its pool processes (its session), as ``docker kill`` would."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._out.close()


@pytest.fixture
def worker_factory(tmp_path):
    queue = f"weft-test-{uuid.uuid4().hex[:8]}"
    workers: list[Worker] = []

    def start(**env: str) -> Worker:
        w = Worker(tmp_path / f"worker{len(workers)}.log", queue, **env)
        workers.append(w)
        return w

    yield start
    for w in workers:
        w.kill_all()
    from fabric.collectors.tools import reap_orphans

    reap_orphans()  # what the next worker would do with the pollers of the workers killed here
    import redis

    redis.Redis.from_url(os.environ["REDIS_URL"]).delete(queue)  # no task left for another test


@pytest.fixture
def hung_fabric(lab_factory):
    """A discovered live fabric whose lab is then frozen: sweeps and discoveries of it hang."""
    lab = lab_factory(small_netfile())
    fabric = Fabric.objects.create(name="hung", tool_env=lab.tool_env)
    discover(fabric, timeout=60)
    lab.hang()
    return fabric


def poller_of(pool_pid: int, timeout: float = 30) -> int | None:
    """The pid of a diags or poller child the pool process ``pool_pid`` started (waits for it)."""
    found = wait_for(lambda: children_tagged(f"{pool_pid}:"), timeout, interval=0.1)
    return found[0] if found else None


def test_a_killed_pool_process_is_replaced_and_its_sweep_redone_once_soon(worker_factory, hung_fabric):
    worker = worker_factory()
    worker.send("telemetry.tasks.poll_fabric_task", hung_fabric.pk)
    first_pool = worker.pool_pid()
    first_poller = poller_of(first_pool)
    assert first_poller, worker.text()[-3000:]
    os.kill(first_pool, signal.SIGKILL)
    t0 = time.monotonic()
    # Put back at once (reject on worker lost), run again by the new pool process: the dead
    # process's lock is taken over (same host), not waited for, and its poller is reaped.
    second_pool = wait_for(lambda: (p := worker.pool_pid()) not in (None, first_pool) and p, 30)
    assert second_pool, worker.text()[-3000:]
    second_poller = poller_of(second_pool)
    assert second_poller and time.monotonic() - t0 < 30, worker.text()[-3000:]
    assert "redelivered (its worker died): running it again" in worker.text()
    assert wait_for(lambda: not alive(first_poller), 10)
    assert lock_remaining_s(f"telemetry.poll.{hung_fabric.pk}") is not None  # held by the new run
    # Killed again: not run a third time (a task that kills its worker must not loop).
    os.kill(second_pool, signal.SIGKILL)
    assert worker.wait_log("came back again after its worker died: not run a third time", 30), worker.text()[
        -3000:
    ]
    assert wait_for(lambda: not alive(second_poller), 10)


def test_a_killed_worker_frees_its_locks_within_one_lease_and_its_sweep_comes_back(
    worker_factory, hung_fabric
):
    worker = worker_factory(WEFT_TASK_REDELIVERY_S="5")
    worker.send("telemetry.tasks.poll_fabric_task", hung_fabric.pk)
    poller = poller_of(worker.pool_pid())
    assert poller, worker.text()[-3000:]
    t_delivered = time.monotonic()
    key = f"telemetry.poll.{hung_fabric.pk}"
    remaining = lock_remaining_s(key)
    assert remaining is not None and remaining <= TTL
    worker.kill_all()
    t0 = time.monotonic()
    assert wait_for(lambda: lock_remaining_s(key) is None, TTL + 2)
    assert time.monotonic() - t0 <= TTL + 2
    assert alive(poller)  # its owner died with the worker: an orphan until a worker reaps it
    # The unacknowledged sweep is delivered again once the visibility timeout (5 s here) has passed:
    # kombu restores such messages when a worker starts (and every 10th poll, about 100 s).
    wait_for(lambda: time.monotonic() - t_delivered > 6, 10)
    again = worker_factory(WEFT_TASK_REDELIVERY_S="5")
    assert wait_for(lambda: not alive(poller), 10), again.text()[-3000:]
    assert poller_of(again.pool_pid(), timeout=30), again.text()[-3000:]
    assert "redelivered (its worker died): running it again" in again.text()


def test_sigterm_stops_a_hanging_discovery_within_the_grace_period(worker_factory, hung_fabric):
    hung_fabric.discovery_timeout_s = 300.0
    hung_fabric.save(update_fields=["discovery_timeout_s"])
    worker = worker_factory(WEFT_SHUTDOWN_GRACE_S="2")
    worker.send("fabric.tasks.discover_fabric_task", hung_fabric.pk)
    pool = worker.pool_pid()
    tool = poller_of(pool)
    assert tool and "ibnetdiscover" in Path(f"/proc/{tool}/cmdline").read_text(), worker.text()[-3000:]
    t0 = time.monotonic()
    worker.proc.send_signal(signal.SIGTERM)  # `kill <pid>`, as systemd's first signal
    worker.proc.wait(30)
    elapsed = time.monotonic() - t0
    assert elapsed < 2 + 10, (elapsed, worker.text()[-3000:])  # the grace, then the failed row
    assert worker.proc.returncode == 0
    failed = Discovery.objects.get(fabric=hung_fabric, status=DiscoveryStatus.FAILED)
    assert "the worker is shutting down" in failed.error, failed.error
    assert not alive(tool) and children_tagged(f"{pool}:") == []
    assert lock_remaining_s(f"fabric.discover.{hung_fabric.pk}") is None


def test_sigterm_to_the_process_group_mid_task_logs_no_error(worker_factory, hung_fabric):
    """The whole group gets SIGTERM (``kill -- -<pgid>``, systemd's default
    ``KillMode=control-group``) while a discovery hangs: the pool process ignores it and the main
    process's warm shutdown ends the task after the grace, as for a SIGTERM of the main process
    alone; nothing at ERROR, no traceback (issue 25: the pool process died at once and the worker
    logged ``WorkerLostError: Worker exited prematurely: signal 15 (SIGTERM)``)."""
    hung_fabric.discovery_timeout_s = 300.0
    hung_fabric.save(update_fields=["discovery_timeout_s"])
    worker = worker_factory(WEFT_SHUTDOWN_GRACE_S="2")
    worker.send("fabric.tasks.discover_fabric_task", hung_fabric.pk)
    pool = worker.pool_pid()
    tool = poller_of(pool)
    assert tool and "ibnetdiscover" in Path(f"/proc/{tool}/cmdline").read_text(), worker.text()[-3000:]
    mark = len(worker.text())
    t0 = time.monotonic()
    os.killpg(worker.proc.pid, signal.SIGTERM)
    worker.proc.wait(30)
    elapsed = time.monotonic() - t0
    after = worker.text()[mark:]
    assert elapsed < 2 + 10, (elapsed, after)
    assert worker.proc.returncode == 0, after
    for bad in ("ERROR", "Traceback", "WorkerLostError", "exited prematurely"):
        assert bad not in after, after
    failed = Discovery.objects.get(fabric=hung_fabric, status=DiscoveryStatus.FAILED)
    assert "the worker is shutting down" in failed.error, failed.error  # ended by the main process
    assert not alive(pool) and not alive(tool)
