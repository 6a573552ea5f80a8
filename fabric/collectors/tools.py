"""Running infiniband-diags tools (``ibnetdiscover``, ``perfquery``, ``sminfo``...) with timeouts.

Every collector in Weft goes through :func:`run_tool` with the environment of :func:`fabric_env`
(``os.environ`` + ``Fabric.tool_env``, so ``LD_PRELOAD=.../libumad2sim.so`` in ``tool_env`` points
the tools at an ibsim lab) and the ``-C ca -P port`` of :func:`fabric_ca_args`.

This module also holds, once for Weft and its lab, where the diags live (:data:`SBIN_DIRS`,
:func:`find_tool`), the umad2sim library (:data:`UMAD2SIM_LIB`) and :func:`run_process`, the
one way to run a child with a timeout (it kills the child's whole process group). Pure Python,
no Django import: the lab (``lab.core``) uses it before Django is configured.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from core.procs import is_alive, owner_tag

#: where Debian/RHEL install the diags (often missing from a service's PATH).
SBIN_DIRS = ("/usr/sbin", "/sbin", "/usr/local/sbin")


class ToolError(RuntimeError):
    """A diags tool could not be run or did not finish."""


class ToolNotFound(ToolError):
    """The program is not installed (not on PATH nor in the sbin directories)."""


class ToolTimeout(ToolError):
    """The program ran longer than its timeout and was killed (with its process group).

    ``stdout``/``stderr`` hold what it printed before (partial output).
    """

    def __init__(self, message: str, stdout: str = "", stderr: str = ""):
        super().__init__(message)
        self.stdout = stdout
        self.stderr = stderr


@dataclass(frozen=True)
class ToolResult:
    """Outcome of one run: exit status, decoded stdout/stderr (UTF-8, bad bytes replaced), seconds."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def search_path(env: dict[str, str] | None = None) -> str:
    """``$PATH`` of ``env`` (default ``os.environ``) with the :data:`SBIN_DIRS` it lacks appended."""
    path = (env or os.environ).get("PATH", os.defpath).split(os.pathsep)
    return os.pathsep.join(path + [d for d in SBIN_DIRS if d not in path])


def find_tool(name: str, env: dict[str, str] | None = None) -> str | None:
    """Absolute path of ``name`` on PATH or in the sbin directories, None when absent."""
    return shutil.which(name, path=search_path(env))


def runnable(path: str) -> bool:
    """True when ``path`` is an executable file (what a ``WEFT_*`` tool setting must name)."""
    return os.path.isfile(path) and os.access(path, os.X_OK)


#: The umad2sim library (Debian package ``libumad2sim0``, pulled in by ``ibsim-utils``): preloaded,
#: it points libibumad, hence the diags, at an ibsim lab instead of a kernel HCA.
UMAD2SIM_LIB = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
#: What ``Fabric.tool_env`` may set from the API: the lab's variables only. Anything else
#: (``LD_PRELOAD`` of another library, ``PATH``, ``PYTHON*``...) would let an API user run code on
#: the server; a real fabric needs no variables, only ``ca_name``/``ca_port``.
TOOL_ENV_NAMES = re.compile(r"^(IBSIM_[A-Z0-9_]+|SIM_HOST|UMAD2SIM_[A-Z0-9_]+|LD_PRELOAD)$")


def check_tool_env(env: object) -> dict[str, str]:
    """Return ``env`` when it is a safe ``Fabric.tool_env``.

    Allowed: ibsim/umad2sim variables (``IBSIM_*``, ``SIM_HOST``, ``UMAD2SIM_*``) with values
    without NUL bytes, and ``LD_PRELOAD`` equal to the umad2sim library (:data:`UMAD2SIM_LIB`).

    Raises:
        ValueError: not a mapping of strings, or a variable or value outside that list.
    """
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise ValueError("tool_env must map variable names to strings")
    for name, value in env.items():
        if not TOOL_ENV_NAMES.match(name):
            raise ValueError(
                f"tool_env may set only IBSIM_*, SIM_HOST, UMAD2SIM_* and LD_PRELOAD, not {name!r}"
            )
        if "\x00" in value:
            raise ValueError(f"tool_env {name} contains a NUL byte")
        if name == "LD_PRELOAD" and value != UMAD2SIM_LIB:
            raise ValueError(f"tool_env LD_PRELOAD may only be the umad2sim library {UMAD2SIM_LIB}")
    return env


def tool_workdir() -> str:
    """A scratch working directory for the diags: under a lab, umad2sim creates ``./sys-<pid>``
    in the current directory of each tool it wraps, which must not be the project folder."""
    path = Path(tempfile.gettempdir()) / "weft-tools"
    path.mkdir(exist_ok=True)
    return str(path)


#: Environment variable that tags every child Weft starts: ``<pid>:<start time>`` of the Weft
#: process that owns it (:func:`reap_orphans` kills the children of owners that died).
OWNER_VAR = "WEFT_TOOL_OWNER"
#: Environment variable that tags every child with the Weft installation that started it (a digest
#: of its data directory and database): :func:`reap_orphans` leaves other installations' children
#: on a shared host (another deployment, another checkout's tests) to their own reapers.
INSTALL_VAR = "WEFT_TOOL_INSTALL"


@functools.cache
def install_id() -> str:
    """This installation's tag for :data:`INSTALL_VAR`: 12 hex digits of BLAKE2b over the checkout
    and the environment that names its data (``WEFT_DATA_DIR``, ``WEFT_SQLITE_PATH``,
    ``DATABASE_URL``), read from the environment as the settings read them (no Django here)."""
    checkout = Path(__file__).resolve().parents[2]
    key = repr(
        (
            str(checkout),
            *(os.environ.get(v, "") for v in ("WEFT_DATA_DIR", "WEFT_SQLITE_PATH", "DATABASE_URL")),
        )
    )
    return hashlib.blake2b(key.encode(), digest_size=6).hexdigest()


_live: dict[int, subprocess.Popen] = {}
_live_mutex = threading.Lock()
_abort_reason: str = ""


class ToolAborted(ToolError):
    """The program was stopped by :func:`abort_all` (the worker is shutting down), not by its timeout."""


def spawn(
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    stdin=subprocess.DEVNULL,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
) -> subprocess.Popen:
    """Start ``argv`` as a Weft child: its own session and process group (its pgid is its pid), cwd
    :func:`tool_workdir`, tagged with :data:`OWNER_VAR`, registered for :func:`abort_all`.

    Every collector starts its processes here and stops them with :func:`kill_group` (a timeout,
    an exception such as Celery's ``SoftTimeLimitExceeded``, a worker shutdown), so no diags tool
    or MAD poller outlives the sweep or discovery that started it.

    Raises:
        OSError: the program cannot be started.
        ToolAborted: this process is shutting down (:func:`abort_all` was called).
    """
    if _abort_reason:
        raise ToolAborted(f"{argv[0]}: not started: {_abort_reason}")
    env = dict(os.environ if env is None else env)
    env[OWNER_VAR] = owner_tag()
    env[INSTALL_VAR] = install_id()
    proc = subprocess.Popen(
        argv,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        env=env,
        cwd=cwd or tool_workdir(),
        start_new_session=True,
    )
    with _live_mutex:
        _live[proc.pid] = proc
    return proc


def kill_group(proc: subprocess.Popen, wait_s: float = 5.0) -> None:
    """SIGKILL the process group of ``proc`` (started by :func:`spawn`), reap it and close its pipes.
    Safe to call twice and on a process that has exited."""
    if proc.returncode is None:
        _kill_pgid(proc)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait_s)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
    forget(proc)


def _kill_pgid(proc: subprocess.Popen) -> None:
    if proc.returncode is None:  # not reaped yet: its pid (= its pgid) cannot have been reused
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def forget(proc: subprocess.Popen) -> None:
    """Drop ``proc`` from the registry of running children (it has exited and was reaped)."""
    with _live_mutex:
        _live.pop(proc.pid, None)


def abort_all(reason: str) -> int:
    """Kill every child this process started with :func:`spawn` and refuse new ones: for a worker
    that must stop (SIGTERM) while a discovery or sweep hangs. The callers see their tool killed and
    record the failure with ``reason``. Returns how many process groups were killed.

    Safe from a signal handler's thread (it only reads the registry and sends signals)."""
    global _abort_reason
    _abort_reason = reason or "stopped"
    procs = [proc for proc in list(_live.values()) if proc.returncode is None]
    for proc in procs:
        _kill_pgid(proc)
    return len(procs)


def abort_reason() -> str:
    """Why :func:`abort_all` stopped this process's children ("" when it was not called)."""
    return _abort_reason


def _reset_after_fork() -> None:
    # A forked child (Celery prefork pool) starts with no children of its own and is not aborting.
    global _abort_reason, _live_mutex
    _live.clear()
    _live_mutex = threading.Lock()
    _abort_reason = ""


os.register_at_fork(after_in_child=_reset_after_fork)


def _owner_of(pid: int) -> str | None:
    """The :data:`OWNER_VAR` tag of process ``pid`` when one of this installation's
    (:data:`INSTALL_VAR`) children, else None."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    owner_prefix, install_prefix = OWNER_VAR.encode() + b"=", INSTALL_VAR.encode() + b"="
    owner = install = None
    for item in environ.split(b"\0"):
        if item.startswith(owner_prefix):
            owner = item[len(owner_prefix) :].decode(errors="replace")
        elif item.startswith(install_prefix):
            install = item[len(install_prefix) :].decode(errors="replace")
    return owner if owner and install == install_id() else None


def reap_orphans() -> list[int]:
    """Kill the process groups of this installation's children whose owner died (a pool process
    killed at its hard time limit or by the OOM killer cannot kill them itself). Linux ``/proc``;
    processes of other users and of other Weft installations (:data:`INSTALL_VAR`) are skipped. Returns the process group ids killed (those :func:`spawn` made: the pids
    of the tools it started)."""
    killed: list[int] = []
    own = os.getpgrp()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        tag = _owner_of(pid)
        if not tag or is_alive(tag):
            continue  # not Weft's, or its owner lives (same pid, same start time)
        with contextlib.suppress(OSError):
            # The tool's group (a tool's child is in it too); a session of its own cannot be ours.
            pgid = os.getpgid(pid)
            if pgid != own and pgid not in killed:
                os.killpg(pgid, signal.SIGKILL)
                killed.append(pgid)
    return killed


def _universal_newlines(data: bytes) -> str:
    return data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


def run_process(
    argv: list[str],
    *,
    timeout: float,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    text: bool = False,
) -> subprocess.CompletedProcess:
    """Run ``argv`` to its end with stdout/stderr captured, like ``subprocess.run``, but started by
    :func:`spawn` (own process group, owner tag) and on timeout or any interruption killed with its
    whole group (a tool that forked a helper cannot outlive its timeout or keep the pipes open).

    ``timeout`` in seconds; ``input`` bytes for stdin (else stdin is ``/dev/null``); ``env`` the
    full environment (default ``os.environ``); ``cwd`` (default :func:`tool_workdir`); ``text``:
    decode stdout/stderr as UTF-8 (bad bytes replaced, line ends as ``\\n``) instead of bytes. A
    non-zero exit is not an error.

    Raises:
        subprocess.TimeoutExpired: it ran longer than ``timeout``; killed with its group, what it
            printed before is in ``output``/``stderr`` (bytes).
        OSError: it could not start (``FileNotFoundError`` when ``argv[0]`` is missing).
        ToolAborted: this process is shutting down (:func:`abort_all`).
    """
    proc = spawn(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL if input is None else subprocess.PIPE)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_pgid(proc)
        out, err = _drain(proc)
        raise subprocess.TimeoutExpired(argv, timeout, output=out, stderr=err) from None
    finally:
        kill_group(proc)  # on any interruption too (KeyboardInterrupt, a failed write to stdin)
    if text:
        return subprocess.CompletedProcess(
            argv, proc.returncode, _universal_newlines(out), _universal_newlines(err)
        )
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def run_tool(argv: list[str], *, env: dict[str, str] | None = None, timeout: float) -> ToolResult:
    """Run ``argv`` (program name or path first) and return its :class:`ToolResult`.

    ``env`` is the full environment (default ``os.environ``); ``timeout`` in seconds. The program
    runs in its own process group (:func:`spawn`), killed whole on timeout and on any exception
    that interrupts the wait (e.g. Celery's ``SoftTimeLimitExceeded``). A non-zero exit is *not* an
    error here: the caller reads ``returncode`` (the diags exit 255 on ``iberror: failed``, with the
    reason on stdout or stderr).

    Raises:
        ToolNotFound: the program is not installed.
        ToolError: it cannot be run (not executable, a directory: the ``OSError`` of the start).
        ToolTimeout: it ran longer than ``timeout`` seconds.
        ToolAborted: it was stopped by :func:`abort_all` (worker shutdown).
    """
    program = argv[0]
    path = program if os.sep in program else find_tool(program, env)
    if not path or not os.path.exists(path):
        raise ToolNotFound(
            f"{program}: not found on PATH or in {', '.join(SBIN_DIRS)} (install infiniband-diags)"
        )
    t0 = time.monotonic()
    try:
        proc = run_process([path, *argv[1:]], env=env, timeout=timeout)
    except FileNotFoundError as exc:  # removed since the check, or a script's interpreter missing
        raise ToolNotFound(f"{program}: cannot be run: {exc.strerror}") from None
    except OSError as exc:  # not executable, a directory, not a program (ENOEXEC)...
        raise ToolError(f"{program}: cannot be run: {exc.strerror or exc}") from None
    except subprocess.TimeoutExpired as exc:
        raise ToolTimeout(
            f"{program} did not finish within {timeout:g} s (killed)",
            (exc.output or b"").decode("utf-8", "replace"),
            (exc.stderr or b"").decode("utf-8", "replace"),
        ) from None
    if proc.returncode < 0 and _abort_reason:
        raise ToolAborted(f"{program} stopped: {_abort_reason}")
    return ToolResult(
        argv=(path, *argv[1:]),
        returncode=proc.returncode,
        stdout=proc.stdout.decode("utf-8", "replace"),
        stderr=proc.stderr.decode("utf-8", "replace"),
        duration_s=round(time.monotonic() - t0, 4),
    )


def _drain(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    """What a killed process printed (its pipes may already be closed)."""
    try:
        return proc.communicate(timeout=5)
    except (ValueError, OSError, subprocess.TimeoutExpired):
        return b"", b""


def fabric_env(fabric) -> dict[str, str]:
    """Environment for the diags of ``fabric``: ``os.environ`` + ``fabric.tool_env`` (strings), with
    the sbin directories appended to PATH."""
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in (fabric.tool_env or {}).items()})
    env["PATH"] = search_path(env)
    return env


def fabric_ca_args(fabric) -> list[str]:
    """``["-C", ca, "-P", port]`` for the HCA port ``fabric`` uses (each part only when set)."""
    args: list[str] = []
    if fabric.ca_name:
        args += ["-C", fabric.ca_name]
    if fabric.ca_port:
        args += ["-P", str(fabric.ca_port)]
    return args


def is_live(fabric) -> bool:
    """True when ``fabric`` is discovered periodically from this host: ``discovery_enabled`` and
    ``Fabric.has_live_access`` (default HCA, ``ca_name`` or ``tool_env``). Imported fabrics have none."""
    return bool(fabric.discovery_enabled and fabric.has_live_access)
