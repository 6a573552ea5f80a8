"""``fabric.collectors.tools.run_process``: the one way Weft runs a child with a timeout. A tool
that forks a helper and hangs is killed with the helper within its timeout, whichever caller ran it
(the diags runner, the one-shot MAD poller, the lab)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabric.collectors.tools import run_process

TIMEOUT_S = 2.0
#: What a timed-out call may take beyond its timeout (kill, reap, collect the output).
SLACK_S = 3.0


def _hanging_tool(tmp_path: Path) -> tuple[Path, Path]:
    """An executable that starts a grandchild (which keeps stdout open), says so, and hangs."""
    marker = tmp_path / "grandchild.pid"
    tool = tmp_path / "hangs"
    tool.write_text(f"#!/bin/sh\nsleep 120 &\necho $! > {marker}\necho started\nsleep 120\n")
    tool.chmod(0o755)
    return tool, marker


def _wait_dead(pid: int, within_s: float = 5.0) -> bool:
    """True once ``pid`` is gone or a zombie (killed, waiting to be reaped), polled up to ``within_s``."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_output_status_input_and_text():
    code = "import sys; data = sys.stdin.read(); print(data.upper(), end='\\r\\n'); sys.exit(4)"
    proc = run_process([sys.executable, "-c", code], input=b"abc", timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (4, b"ABC\r\n", b"")
    proc = run_process([sys.executable, "-c", code], input=b"abc", timeout=30, text=True)
    assert proc.stdout == "ABC\n"


def test_a_hanging_tool_is_killed_with_its_grandchild(tmp_path):
    tool, marker = _hanging_tool(tmp_path)
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as info:
        run_process([str(tool)], timeout=TIMEOUT_S)
    assert time.monotonic() - t0 < TIMEOUT_S + SLACK_S
    assert info.value.output == b"started\n"
    assert _wait_dead(int(marker.read_text()))


def test_the_one_shot_mad_poller_is_killed_with_its_grandchild(tmp_path, monkeypatch):
    from telemetry.collectors.counters import CollectorError, run_madpoll

    tool, marker = _hanging_tool(tmp_path)
    monkeypatch.setattr(sys, "executable", str(tool))  # the poller child is "python -m ...madpoll"
    t0 = time.monotonic()
    with pytest.raises(CollectorError, match="did not finish within 2 s"):
        run_madpoll([("N", 1)], env=dict(os.environ), ca_args=[], timeout=TIMEOUT_S, persistent=False)
    assert time.monotonic() - t0 < TIMEOUT_S + SLACK_S
    assert _wait_dead(int(marker.read_text()))


def test_a_lab_tool_is_killed_with_its_grandchild(small_lab, tmp_path):
    from lab.core import LabError

    tool, marker = _hanging_tool(tmp_path)
    t0 = time.monotonic()
    with pytest.raises(LabError, match="timed out"):
        small_lab.run([str(tool)], timeout=TIMEOUT_S)
    assert time.monotonic() - t0 < TIMEOUT_S + SLACK_S + 5  # + freeing ibsim client slots
    assert _wait_dead(int(marker.read_text()))
