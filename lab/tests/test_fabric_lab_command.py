"""``manage.py fabric_lab``: foreground lab, instructions that work, clean stop on SIGINT/SIGTERM."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from lab import Lab, netgen
from lab.core import find_program
from lab.tests.ibtext import alive, ports_summary

pytestmark = pytest.mark.lab
ROOT = Path(__file__).resolve().parents[2]


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _start(args: list[str]) -> tuple[subprocess.Popen, list[str]]:
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "fabric_lab", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if line.startswith("Ctrl-C"):
            return proc, lines
    proc.kill()
    raise AssertionError("fabric_lab did not come up:\n" + "\n".join(lines) + proc.stderr.read())


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_fabric_lab_prints_a_working_environment_and_stops_cleanly(stop_signal, tmp_path):
    proc, lines = _start(["--fat-tree", "2:leaves=2,spines=1,hosts=3,speed=EDR"])
    try:
        text = "\n".join(lines)
        assert "3 switches, 6 CAs, 8 links" in text
        export = next(line for line in lines if line.strip().startswith("export "))
        env = dict(os.environ)
        for item in shlex.split(export.strip()[len("export ") :]):
            key, _, value = item.partition("=")
            env[key] = value
        assert env["LD_PRELOAD"].endswith("libumad2sim.so")
        # the printed environment reaches the lab, as any shell would use it
        out = subprocess.run(
            [find_program("ibnetdiscover"), "-p"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        seen = ports_summary(out.stdout)
        assert (len(seen["switches"]), len(seen["cas"]), len(seen["links"])) == (3, 6, 8)
        assert seen["rates"] == {"4xEDR"}
        assert "manage.py discover --fabric lab" in text
        assert re.search(r"Master SM: 'host001 mlx5_0' port GUID 0x[0-9a-f]{16} LID \d+", text)
        kids = _children(proc.pid)
        assert len(kids) == 2 and all(alive(k) for k in kids)  # ibsim + OpenSM
    finally:
        proc.send_signal(stop_signal)
        rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    summary = json.loads(rest.strip().splitlines()[-1])
    assert summary["status"] == "stopped"
    assert summary["reason"] == f"stopped by {stop_signal.name}"
    assert (summary["switches"], summary["cas"], summary["links"]) == (3, 6, 8)
    assert not any(alive(k) for k in kids)


def test_killing_the_python_process_takes_the_lab_down(tmp_path):
    """SIGKILL leaves no cleanup code to run: the children die with their parent (PR_SET_PDEATHSIG)."""
    proc, lines = _start(["--fat-tree", "2:leaves=1,spines=1,hosts=2"])
    workdir = Path(re.search(r"work directory (\S+)\)", "\n".join(lines))[1])
    kids = _children(proc.pid)
    assert len(kids) == 2
    proc.kill()
    proc.wait(30)
    proc.stdout.close()
    proc.stderr.close()
    deadline = time.monotonic() + 10
    while any(alive(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(k) for k in kids)
    # its temporary directory could not be removed by the dead process; the next lab sweeps it
    assert workdir.is_dir()
    with Lab(netgen.two_switch_four_ca()):
        assert not workdir.exists()


@pytest.mark.django_db
def test_register_stores_the_tool_env_in_a_weft_fabric(django_capture_on_commit_callbacks):
    from accounts.models import AuditEntry
    from fabric.models import Fabric

    out = io.StringIO()

    def stop_when_up():
        deadline = time.monotonic() + 120
        while "Ctrl-C (or SIGTERM)" not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGTERM)  # the command's handler turns it into an orderly stop

    watcher = threading.Thread(target=stop_when_up, daemon=True)
    watcher.start()
    with django_capture_on_commit_callbacks() as queued:  # not run: the lab is gone by then
        call_command(
            "fabric_lab", "--fat-tree", "2:leaves=1,spines=1,hosts=2", "--register", "lab-test", stdout=out
        )
    watcher.join(5)
    text = out.getvalue()
    fabric = Fabric.objects.get(name="lab-test")
    assert fabric.tool_env["LD_PRELOAD"].endswith("libumad2sim.so")
    # its first discovery is queued on commit (not at the next periodic discovery), audited
    assert len(queued) == 1 and "its discovery is queued" in text
    assert AuditEntry.objects.filter(action="fabric.discover", object_id=str(fabric.pk)).count() == 1
    assert f"IBSIM_SOCKNAME={fabric.tool_env['IBSIM_SOCKNAME']}" in text
    assert json.loads(text.strip().splitlines()[-1])["reason"] == "stopped by SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored


def test_bad_arguments_are_command_errors(tmp_path):
    with pytest.raises(CommandError, match="hosts= is required"):
        call_command("fabric_lab", "--fat-tree", "2:leaves=2,spines=1")
    with pytest.raises(CommandError, match="no such file"):
        call_command("fabric_lab", "--topology", str(tmp_path / "none.net"))
    with pytest.raises(CommandError, match="expected KEY=VALUE"):
        call_command("fabric_lab", "--fat-tree", "2:leaves=1,spines=1,hosts=1", "--opensm-conf", "oops")
    bad = tmp_path / "bad.net"
    bad.write_text('Hca 1 "a"\n[1] "ghost"[1]\n')
    with pytest.raises(CommandError, match=r"bad\.net:1: 'a' port 1 links to undeclared node 'ghost'"):
        call_command("fabric_lab", "--topology", str(bad))
