"""Task locks (``core.locks``): leases renewed by their holder, gone with a dead holder.

The local backend (embedded deployment) is tested in this process; the Redis backend with real
processes: a holder killed with SIGKILL leaves a lock that expires within one lease, and a process
on the same host takes it over at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from core.locks import lock_remaining_s, single_instance

pytestmark = pytest.mark.backend  # the lease locks (Redis in production)

ROOT = Path(__file__).resolve().parents[1]


def wait_for(condition, timeout: float, interval: float = 0.05):
    """Poll ``condition()`` until it returns a true value (returned) or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def test_lease_is_renewed_while_the_holder_runs():
    key = f"test.renew.{uuid.uuid4().hex}"
    with single_instance(key, ttl_s=0.6) as mine:
        assert mine
        t_end = time.monotonic() + 2.0  # more than three leases
        while time.monotonic() < t_end:
            with single_instance(key, ttl_s=0.6) as other:
                assert not other
            remaining = lock_remaining_s(key)
            assert remaining is not None and 0 < remaining <= 0.6
            time.sleep(0.1)
    assert lock_remaining_s(key) is None
    with single_instance(key, ttl_s=0.6) as again:
        assert again


def test_a_holder_past_its_limit_stops_renewing():
    key = f"test.limit.{uuid.uuid4().hex}"
    with single_instance(key, 0.3, ttl_s=0.5) as mine:
        assert mine

        def taken_by_another() -> bool:
            with single_instance(key, ttl_s=5) as other:
                return other

        # the limit (0.3 s) + one lease (0.5 s), with room for a loaded machine
        t0 = time.monotonic()
        assert wait_for(taken_by_another, timeout=5)
        assert time.monotonic() - t0 < 3


HOLDER = """
import os, sys, time, django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "weft.settings")
django.setup()
from core.locks import single_instance
with single_instance(sys.argv[1]) as mine:
    print("held" if mine else "busy", flush=True)
    time.sleep(600)
"""


@pytest.mark.integration
def test_lock_of_a_killed_holder_is_free_within_one_lease_and_taken_over_on_this_host(tmp_path):
    """A worker killed with SIGKILL mid-task held ``telemetry.poll_all`` for 5 minutes before."""
    key = f"test.killed.{uuid.uuid4().hex}"
    env = {**os.environ, "WEFT_LOCK_TTL_S": "3", "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, key], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with single_instance(key) as mine:
            assert not mine  # a living holder keeps it
        t_hold = time.monotonic() + 4  # longer than its 3 s lease: renewed
        while time.monotonic() < t_hold:
            remaining = lock_remaining_s(key)
            assert remaining is not None and remaining <= 3.0
            time.sleep(0.2)
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        # Nobody renews it any more: it expires within one lease wherever its holder was ...
        remaining = lock_remaining_s(key)
        assert remaining is not None and remaining <= 3.0
        # ... and a process of the same host sees that the holder is gone and takes it now.
        with single_instance(key) as mine:
            assert mine
    finally:
        holder.kill()
        holder.wait(10)
    assert lock_remaining_s(key) is None
