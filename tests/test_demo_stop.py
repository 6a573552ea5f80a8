"""Ctrl-C stops the demo promptly, also while its start-up work is still running in the in-process
worker (a partitions apply, a sweep or a discovery against the lab): the tools those tasks run are
killed (``fabric.collectors.tools.abort_all``) before the lab goes, so the interpreter's exit does
not wait for their timeouts. The real ``manage.py demo`` in a subprocess, on a small lab."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_line(proc: subprocess.Popen, needle: str, timeout: float) -> list[str]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            if proc.poll() is not None:
                break
            continue
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"{needle!r} not printed in {timeout:g} s; output: {''.join(seen)[-2000:]}")


def test_ctrl_c_during_start_up_stops_the_demo_and_its_lab(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(WEFT_DATA_DIR=str(tmp_path / "data"), WEFT_PRODUCTION="0", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "demo", "--fat-tree", "2:leaves=2,spines=1,hosts=4", "--port", str(_free_port()), "--poll-interval", "1"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        # the seed has queued the partitions apply and the worker sweeps: work in flight on the lab
        _wait_for_line(proc, "Seeded", timeout=240)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "Demo stopped; lab processes ended." in out, out[-2000:]
    assert took < 60
    assert "Traceback" not in out, out[-3000:]
