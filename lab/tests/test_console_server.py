"""A running lab's cables pulled from another process: ``manage.py lab_console`` through the lab's
console socket (``lab.console_server``), as an admin in a second shell does with the demo's lab."""

from __future__ import annotations

import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from core.hints import manage_py
from lab import netgen
from lab.console_server import ConsoleServer, example
from lab.tests.ibtext import ports_summary

pytestmark = [pytest.mark.lab]

ROOT = Path(__file__).resolve().parents[2]


def _lab_console(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "lab_console", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_lab_console_pulls_and_puts_back_a_cable_from_another_process(lab_factory, tmp_path):
    lab = lab_factory(netgen.two_switch_four_ca())
    sock = tmp_path / "console.sock"
    server = ConsoleServer(lab, sock).start()
    try:
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600  # the lab's owner only
        guid = f"0x{lab.node('Hca4').port_guid(1):016x}"
        before = ports_summary(lab.run(["ibnetdiscover", "-p"]).stdout)
        assert guid in before["cas"]

        out = _lab_console(str(sock), "unlink", "Hca4", "1")
        assert out.returncode == 0 and out.stdout.strip() == "ok", out
        after = ports_summary(lab.run(["ibnetdiscover", "-p"]).stdout)
        assert guid not in after["cas"] and len(after["links"]) == len(before["links"]) - 1

        out = _lab_console(str(sock), "relink", "Hca4", "1")
        assert out.returncode == 0, out
        assert ports_summary(lab.run(["ibnetdiscover", "-p"]).stdout)["links"] == before["links"]

        # a raw ibsim command answers with ibsim's text
        out = _lab_console(str(sock), "raw", "Attached")
        assert out.returncode == 0 and out.stdout.startswith("ok:") and "Client" in out.stdout, out

        # mistakes: exit 1 with the reason, no traceback; the lab is untouched
        for args, said in [
            (("unlink", "NoSuchNode", "1"), "no node 'NoSuchNode'"),
            (("unlink", "Hca4", "x"), "port 'x' is not a number"),
            (("unlink", "Hca4", "9"), "has ports 1..2, not 9"),
        ]:
            out = _lab_console(str(sock), *args)
            assert out.returncode == 1 and said in out.stderr and "Traceback" not in out.stderr, (args, out)
        assert ports_summary(lab.run(["ibnetdiscover", "-p"]).stdout)["links"] == before["links"]

        # the line the demo prints pulls a real leaf-to-host cable, not the tools' or the SM's host
        # (that would cut the management host off: every link would look down)
        line = example(lab, sock)
        assert line.startswith(f"{manage_py()} lab_console {sock} unlink ") and line.split()[-1].isdigit()
        out = _lab_console(*shlex.split(line)[3:])
        assert out.returncode == 0, out
        cut = ports_summary(lab.run(["ibnetdiscover", "-p"]).stdout)
        assert len(cut["switches"]) == len(before["switches"]) and len(cut["cas"]) == len(before["cas"]) - 1
    finally:
        server.stop()
    assert not sock.exists()
    out = _lab_console(str(sock), "unlink", "Hca4", "1")
    assert out.returncode == 1 and "no lab answers on" in out.stderr and "Traceback" not in out.stderr


def test_lab_console_sends_its_line_without_starting_django(tmp_path):
    """Issue 26 §4: one cable pull took 13-17 s in the demo; ``manage.py lab_console`` no longer
    starts Django (every app, the settings) to send one line over a socket: the modules it
    imports (``python -X importtime``) include no Django."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "manage.py", "lab_console", str(tmp_path / "none.sock"), "unlink",
         "Hca4", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 1 and "no lab answers on" in out.stderr, out.stderr[-500:]
    modules = [
        line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")
    ]
    assert "lab.console_client" in modules and not [m for m in modules if m.split(".")[0] == "django"], (
        modules
    )
    bad = subprocess.run([sys.executable, "manage.py", "lab_console", str(tmp_path / "none.sock"), "explode", "x"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert bad.returncode == 2 and "invalid choice: 'explode'" in bad.stderr, bad.stderr


def test_printed_command_lines_use_this_interpreter(monkeypatch):
    """A bare ``python`` in the admin's new shell is not the virtualenv's (no Django): the lines
    the demo prints name the interpreter, relative to the project when it lies inside it."""
    from core import hints

    monkeypatch.setattr(hints.sys, "executable", str(hints.BASE_DIR / ".venv" / "bin" / "python"))
    assert hints.manage_py() == ".venv/bin/python manage.py"
    monkeypatch.setattr(hints.sys, "executable", "/usr/local/bin/python3.11")
    assert hints.manage_py() == "/usr/local/bin/python3.11 manage.py"
    monkeypatch.setattr(hints.sys, "executable", "/opt/my env/bin/python")
    assert hints.manage_py() == "'/opt/my env/bin/python' manage.py"


def test_the_console_lock_serves_a_one_off_command_before_a_looping_player():
    """The ibsim console's lock is first-come, first-served: a one-off command (``lab_console``)
    waiting while the traffic player loops on the console gets it after at most the player's
    command in progress (``threading.Lock`` promises no order: the player, taking it again right
    after releasing it, may win it several times in a row)."""
    import threading
    import time

    from lab.core import FairLock

    lock = FairLock()
    stop = threading.Event()
    player_turns = 0
    asked_at: list[int] = []
    got_at: list[int] = []

    def player():
        nonlocal player_turns
        while not stop.is_set():
            with lock:
                player_turns += 1
                time.sleep(0.0005)  # the console round trip (the GIL released, as in a pipe read)

    thread = threading.Thread(target=player, daemon=True)
    thread.start()
    try:
        for _ in range(20):
            while player_turns < (asked_at[-1] + 5 if asked_at else 5):
                time.sleep(0.0005)  # let the player run a few commands
            asked_at.append(player_turns)
            with lock:
                got_at.append(player_turns)
    finally:
        stop.set()
        thread.join(5)
    waited = [g - a for a, g in zip(asked_at, got_at, strict=True)]
    assert max(waited) <= 1, waited  # served after the command in progress, every time
