"""A real SNMP agent for tests, the benchmark and demos: snmpsim (PyPI) serving ``.snmprec``
recordings on loopback.

``SnmpSim(recordings)`` copies the recordings (plain or gzip) into a fresh world-readable temp
folder (the originals are never changed or copied into the project) and starts
``snmpsim-command-responder`` on ``127.0.0.1:<free port>`` in its own process group. Each
recording is one agent: SNMPv2c community = its name, SNMPv3 context name = its name (with the
v3 user given). :meth:`set_values` rewrites a served copy (snmpsim re-indexes a data file whose
modification time moved past its index's), so counters move between two polls by exactly what a
test says.

snmpsim refuses to run as root: as root it is started with ``--process-user``/``--process-group``
of an unprivileged account (``nobody``/``nogroup``), which then reads the interpreter, snmpsim's
package, the data and cache folders. A virtualenv that account cannot read (one under ``/root``)
cannot serve: then, and only then, snmpsim's own switch ``SNMPSIM_ALLOW_ROOT=true`` keeps it root
(:attr:`SnmpSim.user` says which it was).
"""

from __future__ import annotations

import grp
import gzip
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

UNPRIVILEGED = ("nobody", "nogroup")


def _oid_key(line: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in line.split("|", 1)[0].split("."))
    except ValueError:
        return (1 << 62,)


class SnmpSimError(RuntimeError):
    """snmpsim could not be started (its log's tail is in the message)."""


def snmpsim_available() -> bool:
    """Whether the snmpsim package is importable by this interpreter."""
    try:
        import snmpsim  # noqa: F401
    except ImportError:
        return False
    return True


def free_udp_port() -> int:
    """A UDP port on 127.0.0.1 nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _can_drop_to(user: str) -> bool:
    """Whether ``user`` can import snmpsim with this interpreter (as root: a quick child run as it)."""
    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        return False
    try:
        r = subprocess.run(
            [sys.executable, "-c", "import snmpsim.commands.responder"],
            user=pw.pw_uid,
            group=pw.pw_gid,
            extra_groups=[],
            cwd="/",
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


class SnmpSim:
    """One snmpsim process serving ``recordings`` (``{name: path or snmprec text}``).

    ``v3`` optional ``{"user", "auth_key", "auth_proto", "priv_key", "priv_proto"}`` with snmpsim's
    protocol names (``MD5``/``SHA``/``SHA256``…, ``DES``/``AES``…). Use as a context manager or
    :meth:`start`/:meth:`stop`; ``port`` is the UDP port, ``host`` 127.0.0.1.
    """

    host = "127.0.0.1"

    def __init__(self, recordings: dict[str, str | Path], *, v3: dict | None = None, port: int | None = None,
                 max_varbinds: int = 64) -> None:  # fmt: skip
        self.recordings = recordings
        self.v3 = v3
        self.port = port or free_udp_port()
        self.max_varbinds = max_varbinds
        self.dir: Path | None = None
        self.proc: subprocess.Popen | None = None
        self.user = ""
        self._mtime = int(time.time()) + 1000

    # -- data ------------------------------------------------------------------------------
    def path(self, name: str) -> Path:
        """The served copy of recording ``name``."""
        assert self.dir is not None
        return self.dir / "data" / f"{name}.snmprec"

    def _write(self, name: str, text: str) -> None:
        path = self.path(name)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text, errors="surrogateescape")
        tmp.chmod(0o644)
        os.replace(tmp, path)
        # snmpsim re-indexes a file newer than its index: move the time past any index made so far
        self._mtime += 2
        os.utime(path, (self._mtime, self._mtime))

    def text(self, name: str) -> str:
        """The served snmprec text of ``name`` (as edited so far)."""
        return self.path(name).read_text(errors="surrogateescape")

    def set_values(self, name: str, values: dict[str, tuple[int | str, str]]) -> None:
        """Set OIDs of recording ``name``: ``{oid: (snmprec type tag, value text)}`` (e.g.
        ``{"1.3.6.1.2.1.2.2.1.10.3": ("65", "4294967000")}``); an OID the recording lacks is
        added in OID order. The agent answers the new values from its next request on."""
        lines = self.text(name).splitlines()
        index = {line.split("|", 1)[0]: i for i, line in enumerate(lines)}
        added = False
        for oid, (tag, value) in values.items():
            line = f"{oid}|{tag}|{value}"
            if oid in index:
                lines[index[oid]] = line
            else:
                lines.append(line)
                added = True
        if added:  # snmpsim serves a file in OID order
            lines = [ln for ln in lines if ln.strip()]
            lines.sort(key=_oid_key)
        self._write(name, "\n".join(lines) + "\n")

    def delete_values(self, name: str, prefixes: list[str]) -> None:
        """Remove from recording ``name`` every OID equal to or under one of ``prefixes``."""
        keep = [
            ln
            for ln in self.text(name).splitlines()
            if not any(ln.split("|", 1)[0] == p or ln.startswith(p + ".") for p in prefixes)
        ]
        self._write(name, "\n".join(keep) + "\n")

    # -- process ---------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> SnmpSim:
        """Copy the data, start snmpsim and wait (at most ``timeout`` s) until it listens.

        Raises:
            SnmpSimError: snmpsim exited or did not listen in time.
        """
        self.dir = Path(tempfile.mkdtemp(prefix="weft-snmpsim-"))
        self.dir.chmod(0o755)
        (self.dir / "data").mkdir(mode=0o755)
        cache = self.dir / "cache"
        cache.mkdir(mode=0o755)
        for name, src in self.recordings.items():
            if isinstance(src, Path):
                opener = gzip.open if src.suffix == ".gz" else open
                with opener(src, "rt", encoding="utf-8", errors="surrogateescape") as fh:
                    text = fh.read()
            else:
                text = src
            self._write(name, text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SNMPSIM_")}
        cmd = [
            sys.executable,
            "-c",
            "import sys; from snmpsim.commands.responder import main; sys.exit(main())",
            f"--data-dir={self.dir / 'data'}",
            f"--cache-dir={cache}",
            f"--agent-udpv4-endpoint={self.host}:{self.port}",
            f"--max-var-binds={self.max_varbinds}",
            "--log-level=info",
        ]
        if self.v3:
            cmd += [
                f"--v3-user={self.v3['user']}",
                f"--v3-auth-key={self.v3['auth_key']}",
                f"--v3-auth-proto={self.v3.get('auth_proto', 'SHA')}",
                f"--v3-priv-key={self.v3['priv_key']}",
                f"--v3-priv-proto={self.v3.get('priv_proto', 'AES')}",
            ]
        if os.geteuid() == 0:
            if _can_drop_to(UNPRIVILEGED[0]):
                pw = pwd.getpwnam(UNPRIVILEGED[0])
                group = grp.getgrgid(pw.pw_gid).gr_name
                os.chown(cache, pw.pw_uid, pw.pw_gid)
                cmd += [f"--process-user={UNPRIVILEGED[0]}", f"--process-group={group}"]
                self.user = UNPRIVILEGED[0]
            else:
                env["SNMPSIM_ALLOW_ROOT"] = "true"
                self.user = "root"
        else:
            self.user = pwd.getpwuid(os.geteuid()).pw_name
        log = self.dir / "snmpsim.log"
        self.log_path = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self.dir, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace")
            if "Listening at" in text:
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        tail = log.read_text(errors="replace")[-2000:]
        self.stop()
        raise SnmpSimError(f"snmpsim did not start listening on {self.host}:{self.port}:\n{tail}")

    def stop(self) -> None:
        """Stop snmpsim (its process group) and remove the temp folder."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(10)
        self.proc = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> SnmpSim:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
