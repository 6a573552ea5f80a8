"""Ctrl-C stops the demo promptly, also while its start-up work is still running in the in-process
worker (a partitions apply, a sweep or a discovery against the lab): the tools those tasks run are
killed (``fabric.collectors.tools.abort_all``) before the lab goes, so the interpreter's exit does
not wait for their timeouts. The real ``manage.py demo`` in a subprocess, on a small lab."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.migrated import seed_sqlite

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


def _demo_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of demo runs on their own data folder (``tmp_path/data``, its database a
    copy of the migrated template: the demo's ``migrate`` finds nothing to apply), embedded."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(WEFT_DATA_DIR=str(tmp_path / "data"), WEFT_PRODUCTION="0", PYTHONUNBUFFERED="1", **extra)
    seed_sqlite(tmp_path / "data" / "weft.sqlite3")
    return env


@contextlib.contextmanager
def _demo(env: dict[str, str], *args: str, **popen) -> Iterator[subprocess.Popen]:
    """``manage.py demo --port <free> *args`` in its own session, output (stderr too) on a text
    pipe; its whole session is killed on the way out if it still runs."""
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "demo", "--port", str(_free_port()), *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True, **popen,
    )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _ctrl_c(proc: subprocess.Popen) -> str:
    """Send the demo SIGINT (Ctrl-C); its remaining output once it exited (at most 60 s)."""
    proc.send_signal(signal.SIGINT)
    return proc.communicate(timeout=60)[0]


def test_ctrl_c_during_start_up_stops_the_demo_and_its_lab(tmp_path):
    """Also when the demo was started with SIGINT ignored (``bin/demo &`` in a script, nohup)."""
    env = _demo_env(tmp_path)
    # started as `demo &` from a script would be: SIGINT ignored (the demo restores its handler)
    with _demo(env, "--fat-tree", "2:leaves=2,spines=1,hosts=4", "--poll-interval", "1",
               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) as proc:  # fmt: skip
        # the seed has queued the partitions apply and the worker sweeps: work in flight on the lab
        _wait_for_line(proc, "Seeded", timeout=240)
        t0 = time.monotonic()
        out = _ctrl_c(proc)
        took = time.monotonic() - t0
    assert "Demo stopped; lab processes ended." in out, out[-2000:]
    assert took < 60
    assert "Traceback" not in out, out[-3000:]


def test_ctrl_c_while_the_lab_starts_stops_the_demo_cleanly(tmp_path):
    """Ctrl-C while ibsim and OpenSM start (the demo takes it from its first step): no
    traceback, no lab process left, the lab's work folder gone."""
    (tmp_path / "tmp").mkdir()
    env = _demo_env(tmp_path, TMPDIR=str(tmp_path / "tmp"))
    with _demo(env, "--fat-tree", "2:leaves=2,spines=1,hosts=4") as proc:
        _wait_for_line(proc, "Starting the lab fabric", timeout=120)
        out = _ctrl_c(proc)
    left = subprocess.run(
        ["ps", "-o", "pid=,args=", "-s", str(proc.pid)], capture_output=True, text=True
    ).stdout
    assert not left.strip(), left  # ibsim, OpenSM: in the demo's session
    assert "Traceback" not in out, out[-3000:]
    assert "Demo stopped; lab processes ended." in out, out[-2000:]
    assert not list((tmp_path / "tmp").glob("weft-demo-lab-*"))


def _demo_jobs(database: Path) -> dict:
    """The demo's jobs as stored: ``{"submitted", "decided", "pools"}``, read from its SQLite file
    (read-only, beside the running demo; a poll costs no Django start-up)."""
    import sqlite3

    con = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=10)
    try:
        rows = con.execute(
            "SELECT j.state, p.name FROM scheduler_job j JOIN pools_pool p ON p.id = j.pool_id "
            "WHERE j.name LIKE 'demo-%'"
        ).fetchall()
    finally:
        con.close()
    return {
        "submitted": len(rows),
        "decided": sum(1 for state, _ in rows if state != "pending"),
        "pools": sorted({pool for _, pool in rows}),
    }


def test_the_demo_submits_jobs_and_no_jobs_leaves_them_out(tmp_path):
    """The demo's job stream, on the demo's default fabric (a rail-optimised pod): its first jobs
    are submitted and placed by the in-process worker's pass within seconds of the start;
    ``--no-jobs`` starts no stream."""

    env = _demo_env(tmp_path)

    def jobs() -> dict:
        return _demo_jobs(tmp_path / "data" / "weft.sqlite3")

    def run_demo(*extra: str, until=lambda s: True) -> tuple[str, dict]:
        with _demo(env, "--poll-interval", "5", "--no-traffic", "--no-faults", *extra) as proc:
            seen = "".join(_wait_for_line(proc, "Weft demo: open", timeout=240))
            state = jobs()
            deadline = time.monotonic() + 60
            while not until(state) and time.monotonic() < deadline:  # the stream's step, the worker's pass
                time.sleep(0.2)
                state = jobs()
            out = _ctrl_c(proc)
        assert "Traceback" not in out, out[-3000:]
        return seen, state

    # the demo's default fabric (lab.netgen.DEMO_SPEC), counts read from the generated netfile
    from lab import netgen
    from lab.netfile import parse_netfile
    from scheduler.demo import FILL_POOL

    net = parse_netfile(netgen.parse_spec(netgen.DEMO_SPEC))
    hosts = len({ca.description.split()[0] for ca in net.cas})
    seen, state = run_demo(until=lambda s: s["decided"] >= 1)
    assert (
        f'"switches": {len(net.switches)}, "cas": {len(net.cas)}, "routers": 0, "links": {len(net.links)}'
        in seen
    )
    assert f"Seeded GPUs: {8 * hosts} on {hosts} hosts, rail-aligned" in seen, seen[-2000:]
    assert "Submitting demo jobs every 20 s" in seen, seen[-2000:]
    assert state["submitted"] >= 1 and state["decided"] >= 1, state
    # the demo pools, and on a fabric this size the fill jobs' shared pool too
    assert set(state["pools"]) <= {"research-h100", "inference-h100", "burst", FILL_POOL}, state
    seen, _ = run_demo("--no-jobs", "--fat-tree", "2:leaves=2,spines=1,hosts=4")
    assert "Submitting demo jobs" not in seen and "Weft demo: open" in seen
    # restarted on another fabric: the previous run's partitions are not applied to the new lab
    # before it is discovered (their hosts' PKey reads waited out a 60 s verification)
    assert "apply failed" not in seen and "applying the partitions of lab failed" not in seen, seen[-2000:]
