"""Children of the collectors (``fabric.collectors.tools``): every one runs in its own process group
and dies with it, whatever interrupts its caller; children of a dead owner are reaped; a worker
shutdown stops them. Real processes, bounded waits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from core.procs import owner_tag
from fabric.collectors.tools import reap_orphans, run_tool
from tests.process_support import alive, children_tagged, no_children_left, wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_an_interrupted_tool_dies_with_its_whole_group(soft_limit_in, tmp_path):
    """Before: ``SoftTimeLimitExceeded`` in ``communicate`` left the tool running (10 leftover
    madpoll children after 28 minutes of a hung fabric)."""
    script = tmp_path / "tool.sh"
    script.write_text('#!/bin/sh\nsleep 60 &\necho $$ $! > "$1"\nsleep 60\n')
    script.chmod(0o755)
    pidfile = tmp_path / "child.pid"
    soft_limit_in(1.0)
    t0 = time.monotonic()
    with pytest.raises(SoftTimeLimitExceeded):
        run_tool([str(script), str(pidfile)], timeout=60)
    assert time.monotonic() - t0 < 10
    tool, grandchild = map(int, pidfile.read_text().split())
    assert wait_for(lambda: not alive(tool), timeout=5), "the tool survived"
    assert wait_for(lambda: not alive(grandchild), timeout=5), "the tool's background child survived"


def test_a_timed_out_tool_keeps_what_it_printed(tmp_path):
    from fabric.collectors.tools import ToolTimeout

    script = tmp_path / "slow.sh"
    script.write_text('#!/bin/sh\necho partial\necho $$ > "$1"\nsleep 60\n')
    script.chmod(0o755)
    pidfile = tmp_path / "tool.pid"
    with pytest.raises(ToolTimeout) as info:
        run_tool([str(script), str(pidfile)], timeout=1)
    assert info.value.stdout == "partial\n"
    assert wait_for(lambda: not alive(int(pidfile.read_text())), timeout=5)


OWNER_DIES = textwrap.dedent(
    """
    import os, sys
    sys.path.insert(0, sys.argv[1])
    from fabric.collectors.tools import spawn
    proc = spawn(["sleep", "120"])
    print(proc.pid, flush=True)
    os._exit(0)  # like SIGKILL: no cleanup, the child is left behind
    """
)


def test_children_of_a_dead_owner_are_reaped():
    out = subprocess.run(
        [sys.executable, "-c", OWNER_DIES, str(ROOT)], capture_output=True, text=True, timeout=60, check=True
    )
    orphan = int(out.stdout.split()[0])
    assert alive(orphan)
    mine = subprocess.Popen(["sleep", "120"], start_new_session=True)  # not Weft's: left alone
    try:
        killed = reap_orphans()
        assert orphan in killed and mine.pid not in killed
        assert wait_for(lambda: not alive(orphan), timeout=5)
        assert mine.poll() is None
    finally:
        mine.kill()
        mine.wait()


def test_another_installations_orphans_are_left_to_it(tmp_path):
    # the same dead-owner child, started by a Weft with another data directory (another
    # deployment or checkout on this host): not this installation's to kill
    env = {**os.environ, "WEFT_DATA_DIR": str(tmp_path / "elsewhere")}
    out = subprocess.run(
        [sys.executable, "-c", OWNER_DIES, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=env,
    )
    orphan = int(out.stdout.split()[0])
    try:
        assert alive(orphan)
        assert orphan not in reap_orphans() and alive(orphan)
    finally:
        os.killpg(orphan, signal.SIGKILL)


ABORT = textwrap.dedent(
    """
    import os, sys, threading, time
    sys.path.insert(0, sys.argv[1])
    from fabric.collectors import tools
    threading.Timer(1.0, tools.abort_all, args=("the worker is shutting down",)).start()
    t0 = time.monotonic()
    try:
        tools.run_tool(["sleep", "120"], timeout=120)
    except tools.ToolAborted as exc:
        print("aborted", round(time.monotonic() - t0, 1), exc, flush=True)
    try:
        tools.run_tool(["true"], timeout=10)
    except tools.ToolAborted as exc:
        print("refused", exc, flush=True)
    """
)


def test_abort_all_stops_running_tools_and_refuses_new_ones():
    out = subprocess.run(
        [sys.executable, "-c", ABORT, str(ROOT)], capture_output=True, text=True, timeout=60, check=True
    )
    lines = out.stdout.splitlines()
    assert lines[0].startswith("aborted ") and "sleep stopped: the worker is shutting down" in lines[0]
    assert float(lines[0].split()[1]) < 10
    assert lines[1] == "refused /usr/bin/true: not started: the worker is shutting down"


def test_spawned_children_carry_the_owner_tag():
    from fabric.collectors.tools import kill_group, spawn

    marker = f"WEFT_TEST_MARK={time.monotonic_ns()}"
    proc = spawn(["sleep", "60"], env={**os.environ, marker.split("=")[0]: marker.split("=")[1]})
    try:
        assert children_tagged(owner_tag(), also=marker) == [proc.pid]
        assert os.getpgid(proc.pid) == proc.pid  # its own process group
    finally:
        kill_group(proc)
    assert proc.returncode == -signal.SIGKILL and no_children_left(owner_tag(), also=marker)
