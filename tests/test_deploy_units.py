"""The systemd units of ``deploy/systemd`` (issue 25: the README shipped a unit for the notice
listener only): one per long-running role of the README's production block, plus the SNMP trap
receiver, each running exactly the README's command; valid for ``systemd-analyze verify`` (Debian's
systemd, when installed); stopped the way a worker stops cleanly (``KillMode=mixed``)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UNITS = ROOT / "deploy" / "systemd"
#: where the units expect the checkout (``WorkingDirectory``) and the environment file
INSTALL = "/opt/weft"
ENV_FILE = "/etc/weft/weft.env"


def unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """``{section: {key: [values]}}`` of a unit file (systemd.syntax(7): ``#``/``;`` comments,
    repeated keys kept in order, no line continuations used here)."""
    out: dict[str, dict[str, list[str]]] = {}
    section = None
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            out.setdefault(section, {})
            continue
        assert section and "=" in line and not line.endswith("\\"), f"{path.name}:{n}: {line!r}"
        key, value = line.split("=", 1)
        out[section].setdefault(key.strip(), []).append(value.strip())
    return out


def readme_roles() -> set[str]:
    """The README's long-running commands: the daphne, celery and listen_notices lines of the
    production block (as ``bin/prod-smoke`` picks them) and the ``snmp_traps`` it names beside it."""
    text = (ROOT / "README.md").read_text()
    start = text.index("<!-- prod-commands")
    block = re.search(r"```sh\n(.*?)```", text[start:], re.S).group(1)
    lines = {line.split("#")[0].strip() for line in block.splitlines() if line.strip()}
    roles = {
        line
        for line in lines
        if Path(line.split()[0]).name in ("daphne", "celery") or "listen_notices" in line
    }
    traps = re.findall(r"`(\.venv/bin/python manage\.py snmp_traps)`", text)
    assert traps, "README: no `.venv/bin/python manage.py snmp_traps`"
    return roles | {traps[0]}


def as_readme(exec_start: str) -> str:
    """A unit's ``ExecStart`` as the README writes it: relative to the checkout, systemd's ``%%``
    specifier escape undone, ``${PORT}`` (``Environment=PORT=8000``) as the shell's default."""
    command = exec_start.replace(f"{INSTALL}/", "").replace("%%", "%")
    return command.replace("${PORT}", '"${PORT:-8000}"')


def services() -> dict[str, dict]:
    return {p.name: unit(p) for p in sorted(UNITS.glob("*.service"))}


def test_one_unit_per_role_running_the_readme_command():
    units = services()
    commands = {}
    for name, u in units.items():
        (exec_start,) = u["Service"]["ExecStart"]
        commands[as_readme(exec_start)] = name
    assert set(commands) == readme_roles(), sorted(commands)
    assert len(commands) == len(units) == 6


def test_units_restart_stop_cleanly_and_belong_to_the_target():
    target = unit(UNITS / "weft.target")
    wanted = set(target["Unit"]["Wants"][0].split())
    assert wanted == set(services())
    for name, u in services().items():
        s = u["Service"]
        # SIGTERM to the main process (a worker's warm shutdown), not to its pool processes
        assert s["KillMode"] == ["mixed"], name
        assert s["Restart"] == ["always"] and s["WorkingDirectory"] == [INSTALL], name
        assert s["EnvironmentFile"] == [ENV_FILE], name
        assert int(s["TimeoutStopSec"][0]) > 10 + 20, name  # the worker's grace, then its tasks' end
        assert u["Install"]["WantedBy"] == ["weft.target"] and u["Unit"]["PartOf"] == ["weft.target"], name


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verify_finds_nothing(tmp_path):
    """The units, installed as the README says (here: the checkout instead of /opt/weft, so that
    the executables exist), give no warning and no error."""
    (tmp_path / "weft.env").write_text("")
    for path in UNITS.iterdir():
        text = path.read_text().replace(INSTALL, str(ROOT)).replace(ENV_FILE, str(tmp_path / "weft.env"))
        (tmp_path / path.name).write_text(text)
    names = sorted(p.name for p in tmp_path.iterdir() if p.suffix in (".service", ".target"))
    done = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *names],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout + done.stderr) == (0, ""), done.stderr
    # and it does complain about a broken one (so the check can fail)
    (tmp_path / "weft-broken.service").write_text(
        (tmp_path / "weft-beat.service").read_text().replace("KillMode=mixed", "KillMode=mixd")
    )
    broken = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", "weft-broken.service"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "mixd" in broken.stderr
