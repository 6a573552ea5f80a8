"""The fabric lab: ibsim + OpenSM + infiniband-diags under umad2sim, as a Python object.

How the parts fit (linux-rdma/ibsim 0.10 source, ``ibsim/ibsim.c`` and ``umad2sim/sim_client.c``):

- ``ibsim`` simulates the fabric of a netfile. It listens on abstract-namespace unix datagram sockets
  named ``<IBSIM_SOCKNAME>:ctl`` and ``<IBSIM_SOCKNAME>:in<N>`` (default name ``sim``), so giving every
  lab its own ``IBSIM_SOCKNAME`` isolates labs running side by side. It serves at most 10 clients
  (``IBSIM_MAX_CLIENTS``); a client killed with SIGKILL keeps its slot until ``X <id>`` on the console.
- Any libibumad program (OpenSM, ibnetdiscover, perfquery...) started with
  ``LD_PRELOAD=libumad2sim.so`` talks to the ibsim named by ``IBSIM_SOCKNAME`` instead of a kernel
  HCA, attached to the node named by ``SIM_HOST`` (an ibsim node id or node description; default:
  the first node of the netfile). umad2sim makes a fake sysfs tree ``./sys-<pid>`` in the current
  directory (removed at exit), so lab tools run with the lab's work directory as cwd.
- ibsim's console (stdin) runs one command per line (at most 127 characters; longer commands go
  through ``!<file>``), prints its answer on stdout and then the prompt ``sim> ``; errors are lines
  starting with ``# ``.
- OpenSM keeps its state in ``OSM_CACHE_DIR`` (guid2lid...) and ``OSM_TMP_DIR``; each OpenSM of a lab
  gets its own directory, config file and log.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import ctypes
import gzip
import itertools
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from fabric.collectors.tools import UMAD2SIM_LIB, find_tool, run_process, search_path

from .netfile import CA, NetfileError, NetNode, parse_netfile

logger = logging.getLogger("weft.lab")

#: The ``Fabric.tool_env`` variable naming a lab's console socket (``lab.console_server``): after a
#: port enable Weft asks the lab through it to train the link again (``lab.receivers``).
CONSOLE_SOCKET_ENV = "IBSIM_CONSOLE_SOCKET"
#: The umad2sim library (defined with the tool runner: ``Fabric.tool_env`` may preload only it).
UMAD2SIM = UMAD2SIM_LIB

#: ibsim's socket name when ``IBSIM_SOCKNAME`` is unset (``SIM_BASENAME`` in ibsim's ``ibsim.h``).
IBSIM_DEFAULT_SOCKET = "sim"

#: Programs the lab needs, with the Debian package that ships them.
REQUIRED_TOOLS = {
    "ibsim": "ibsim-utils",
    "opensm": "opensm",
    "ibnetdiscover": "infiniband-diags",
    "sminfo": "infiniband-diags",
    "perfquery": "infiniband-diags",
    "smpquery": "infiniband-diags",
}

#: ibsim's default table sizes (``ibsim/sim.h``): nodes, switches, ports, linear forwarding cap.
_IBSIM_DEFAULTS = {"N": 2048, "S": 256, "P": 256 * 36 + 2048 * 2, "L": 30 * 1024}
_CONSOLE_MAX = 120  # ibsim reads console lines into a 128-byte buffer
_PROMPT = b"sim> "
_NDR_RE = re.compile(r"(lid\s+\d+\s+\d+x)NDR\b")
_SM_STATES = {0: "NOTACTIVE", 1: "DISCOVERING", 2: "STANDBY", 3: "MASTER"}


class LabError(RuntimeError):
    """The lab could not start, a tool failed, or a process misbehaved; the message says which."""


class LabConsoleError(LabError):
    """ibsim's console answered a command with an error line (``# ...``)."""


class LabToolsMissing(LabError):
    """A program or library the lab needs is not installed; the message names the Debian package."""


def find_program(name: str) -> str | None:
    """Full path of ``name`` on ``$PATH`` or in the sbin directories (where Debian puts opensm/diags;
    ``fabric.collectors.tools.find_tool``)."""
    return find_tool(name)


def check_tools() -> dict[str, str]:
    """Check that ibsim, OpenSM, the diags and umad2sim are installed.

    Returns ``{program: full path}``. Raises ``LabToolsMissing`` naming every missing program and
    the Debian package that provides it.
    """
    found: dict[str, str] = {}
    missing: list[str] = []
    for prog, package in REQUIRED_TOOLS.items():
        path = find_program(prog)
        if path:
            found[prog] = path
        else:
            missing.append(f"{prog} (Debian package {package})")
    if not Path(UMAD2SIM).is_file():
        missing.append(f"{UMAD2SIM} (Debian package libumad2sim0, installed with ibsim-utils)")
    if missing:
        raise LabToolsMissing(
            "the fabric lab needs: " + ", ".join(missing) + ". Install with "
            "`apt-get install ibsim-utils opensm infiniband-diags`."
        )
    return found


_IBSIM_VERSION: tuple[int, ...] | None = None


def ibsim_version() -> tuple[int, ...]:
    """The installed ibsim's version, e.g. ``(0, 10)`` (from the last line of ``ibsim -V``'s usage)."""
    global _IBSIM_VERSION
    if _IBSIM_VERSION is None:
        prog = find_program("ibsim")
        if not prog:
            raise LabToolsMissing("ibsim is not installed (Debian package ibsim-utils)")
        proc = run_process([prog, "-V"], timeout=10, text=True)
        m = re.search(r"ibsim (\d+(?:\.\d+)+)", proc.stdout + proc.stderr)
        _IBSIM_VERSION = tuple(int(x) for x in m[1].split(".")) if m else (0,)
    return _IBSIM_VERSION


def default_socket_in_use(name: str = IBSIM_DEFAULT_SOCKET) -> bool:
    """True when an ibsim (or anything) already listens on the abstract unix socket ``<name>:ctl``
    (ibsim's control socket), so a lab on that socket name could not start. Probed by binding the
    name for an instant (Linux abstract namespace: nothing on disk)."""
    import socket

    probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        probe.bind(f"\0{name}:ctl\0")  # ibsim's make_name() counts the terminating NUL in the address
    except OSError:
        return True
    finally:
        probe.close()
    return False


def tools_missing_reason() -> str | None:
    """``None`` when the lab can run here, else the ``LabToolsMissing`` message (for skip reasons)."""
    try:
        check_tools()
    except LabToolsMissing as exc:
        return str(exc)
    return None


class FairLock:
    """A first-come, first-served lock (context manager; ``acquire``/``release``). The ibsim console
    is shared by a traffic player that sends thousands of commands a second in a loop and by
    one-off commands (``lab_console``, a port enable's retrain). ``threading.Lock`` promises no
    order: the player, which takes the lock again right after releasing it, may win it several
    times in a row. Here a waiter is served before any later request, so a one-off command waits
    for at most the command in progress (issue 26 §4: a cable pull took 13-17 s in the demo;
    most of it was Django's start-up in ``manage.py lab_console``, see ``lab.console_client``)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._locked = False
        self._waiters: collections.deque[threading.Event] = collections.deque()

    def acquire(self) -> None:
        """Take the lock, after every thread that asked before (blocks)."""
        with self._mutex:
            if not self._locked:
                self._locked = True
                return
            turn = threading.Event()
            self._waiters.append(turn)
        try:
            turn.wait()
        except BaseException:  # interrupted while waiting: give the turn on, or leave the queue
            with self._mutex:
                if turn.is_set():
                    self._hand_over()
                else:
                    self._waiters.remove(turn)
            raise

    def release(self) -> None:
        """Give the lock to the longest waiter (or free it)."""
        with self._mutex:
            self._hand_over()

    def _hand_over(self) -> None:
        if self._waiters:
            self._waiters.popleft().set()  # still locked: now the waiter's
        else:
            self._locked = False

    def __enter__(self) -> FairLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


# Every started lab, so an interpreter exit (normal, or after Ctrl-C) still stops the processes.
_LIVE: set[Lab] = set()
_LIVE_LOCK = threading.Lock()
_COUNTER = itertools.count(1)


def _forget_labs_in_child() -> None:
    # A forked child (multiprocessing, Celery prefork) must never stop its parent's labs at exit.
    _LIVE.clear()


os.register_at_fork(after_in_child=_forget_labs_in_child)


def live_labs() -> list[Lab]:
    """The labs of this process that were started and not stopped yet (a snapshot)."""
    with _LIVE_LOCK:
        return list(_LIVE)


@atexit.register
def _stop_all() -> None:
    for lab in live_labs():
        with contextlib.suppress(Exception):
            lab.stop()


try:  # resolved in the parent: the child between fork and exec must not dlopen (lock) anything
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux/glibc
    _PRCTL = None


def _die_with_parent() -> None:
    """Child-side: get SIGKILL when the thread that started it dies (Linux ``PR_SET_PDEATHSIG``), so a
    SIGKILLed Python leaves no ibsim/OpenSM behind."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class _SM:
    """One OpenSM process of a lab."""

    def __init__(self, node: NetNode, priority: int, directory: Path, port: int = 1):
        self.node = node
        self.port = port
        self.priority = priority
        self.dir = directory
        self.proc: subprocess.Popen | None = None

    @property
    def log(self) -> Path:
        return self.dir / "opensm.log"

    @property
    def port_guid(self) -> int:
        return self.node.port_guid(self.port)


class Lab:
    """A running simulated InfiniBand fabric: ibsim on a netfile, OpenSM as its SM, diags against it.

    ``netfile`` is a path, or netfile text (anything containing a newline) written to the work
    directory. ``partitions`` is an OpenSM partitions file (path or text); without one the lab
    writes the default ``Default=0x7fff, ipoib : ALL=full;`` so :meth:`set_partitions` always works.
    ``sm_node`` is the CA the master OpenSM runs on (node id, description or GUID; default the first
    CA of the netfile); ``standby_sm`` a second CA running a standby OpenSM (priority 1 below the
    master's). ``opensm_conf`` adds ``key value`` lines to every OpenSM's config file (e.g.
    ``{"sweep_interval": "5"}``); ``workdir`` keeps files there (default: a temporary directory,
    removed by :meth:`stop`). ``socket_name`` is ibsim's ``IBSIM_SOCKNAME`` (default: a name of
    this lab's own); :data:`IBSIM_DEFAULT_SOCKET` runs it as a lab started by hand would, on
    ibsim's default socket, and :attr:`tool_env` then omits ``IBSIM_SOCKNAME`` (one such lab per
    machine: :func:`default_socket_in_use`).

    Raises ``LabToolsMissing`` if the programs are absent, ``LabError`` for a bad netfile or node.
    Use as a context manager (``with Lab(path) as lab:``) or call :meth:`start`/:meth:`stop`.
    """

    def __init__(
        self,
        netfile: str | Path,
        *,
        partitions: str | Path | None = None,
        standby_sm: str | None = None,
        sm_node: str | None = None,
        opensm_conf: dict[str, str] | None = None,
        workdir: Path | None = None,
        socket_name: str | None = None,
    ):
        self.programs = check_tools()
        #: the UNIX socket of the ConsoleServer serving this lab (set by it), else None
        self.console_socket: str | None = None
        if isinstance(netfile, str) and "\n" in netfile:
            self._net_text, self._net_source = netfile, None
        else:
            self._net_source = Path(netfile)
            try:
                data = self._net_source.read_bytes()
                if data[:2] == b"\x1f\x8b":  # gzip (e.g. the Selene topology): ibsim gets the gunzipped copy
                    data = gzip.decompress(data)
            except (OSError, EOFError) as exc:
                raise LabError(f"cannot read netfile {self._net_source}: {exc}") from exc
            self._net_text = data.decode("utf-8", "replace")
        try:
            self.net = parse_netfile(self._net_text, source=str(self._net_source or "<netfile text>"))
        except NetfileError as exc:
            raise LabError(str(exc)) from exc
        if not self.net.cas:
            raise LabError(f"{self.net.source}: no CA in the netfile, OpenSM needs a CA to run on")
        self.warnings: list[str] = []
        self._ibsim_text = self._net_text
        if ibsim_version() < (0, 11) and _NDR_RE.search(self._net_text):
            # ibsim < 0.11 cannot parse NDR and would fall back to 2.5 Gb/s SDR links; HDR is the
            # closest rate it knows. The netfile given keeps saying NDR.
            self._ibsim_text = _NDR_RE.sub(r"\1HDR", self._net_text)
            self.warnings.append(
                f"ibsim {'.'.join(map(str, ibsim_version()))} has no NDR support (needs >= 0.11): "
                "NDR links run as HDR in the lab"
            )
            logger.warning("lab: %s", self.warnings[-1])
        self._partitions = partitions
        self.opensm_conf = dict(opensm_conf or {})
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else None
        self.socket_name = socket_name or f"weft-{os.getpid()}-{next(_COUNTER)}-{secrets.token_hex(3)}"
        master = self._resolve(sm_node) if sm_node else _default_sm_node(self.net)
        if master.kind != CA:
            raise LabError(f"sm_node {sm_node!r} is a {master.kind}, OpenSM runs on a CA")
        self._sms: list[_SM] = [_SM(master, 14, Path(), self._sm_port(master))]
        if standby_sm:
            standby = self._resolve(standby_sm)
            if standby.kind != CA or standby is master:
                raise LabError(f"standby_sm {standby_sm!r} must be a CA other than the master's")
            self._sms.append(_SM(standby, 13, Path(), self._sm_port(standby)))
        self.node_names: list[str] = [n.description for n in self.net.nodes]
        #: cable ends ``(node id, port) -> (node id, port)`` of the netfile, and those unlinked now
        self._peers: dict[tuple[str, int], tuple[str, int]] = {}
        for a, b in self.net.links:
            self._peers[a], self._peers[b] = b, a
        self._pulled: set[tuple[str, int]] = set()
        self._links_lock = threading.Lock()
        self._node_ids: dict[str, str] = {}
        self._ibsim: subprocess.Popen | None = None
        self._out = bytearray()
        self._out_cond = threading.Condition()
        self._reader: threading.Thread | None = None
        self._console_lock = FairLock()  # one-off commands are not starved by a traffic player
        self._stopped = True
        self._closing = False
        self._hung = False
        self._owner_pid = os.getpid()
        self.started_at: float | None = None
        self.start_seconds: float | None = None
        #: seconds from start() to ibsim's prompt ("ibsim"), sminfo MASTER ("master"), "subnet_up"
        self.timings: dict[str, float] = {}

    # -- node names -------------------------------------------------------------------------------

    def _resolve(self, name: str) -> NetNode:
        try:
            node = self.net.find(str(name))
        except NetfileError as exc:
            raise LabError(str(exc)) from exc
        if node is None:
            raise LabError(f"no node {name!r} in {self.net.source} (give a node id, description or GUID)")
        return node

    def _sm_port(self, node: NetNode) -> int:
        # umad2sim attaches a client to port 1 of its SIM_HOST CA (ibsim sim_ctl_new_client), always
        if 1 not in self.net.linked_ports(node):
            raise LabError(
                f"{self.net.source}: port 1 of CA {node.description!r} has no cable; "
                "OpenSM there would never become MASTER"
            )
        return 1

    def node(self, name: str) -> NetNode:
        """The netfile record of node ``name`` (id, description or node/port GUID); ``LabError`` if none."""
        return self._resolve(name)

    def guid_of(self, name: str) -> str:
        """Node GUID of ``name`` in Weft's canonical form (``0x`` + 16 lowercase hex digits)."""
        return f"0x{self._resolve(name).guid:016x}"

    # -- environment ------------------------------------------------------------------------------

    @property
    def tool_env(self) -> dict[str, str]:
        """The variables that point an infiniband-diags tool at this lab (what ``Fabric.tool_env`` stores).

        ``LD_PRELOAD`` (umad2sim), ``IBSIM_SOCKNAME`` (this lab's ibsim) and ``SIM_HOST`` (tools run
        from the master SM's CA, as on the SM host of a real fabric); ``IBSIM_CONSOLE_SOCKET``
        (:data:`CONSOLE_SOCKET_ENV`) while a ``lab.console_server.ConsoleServer`` serves the lab.
        """
        env = {
            "LD_PRELOAD": UMAD2SIM,
            "IBSIM_SOCKNAME": self.socket_name,
            "SIM_HOST": self._sms[0].node.node_id,
        }
        if self.socket_name == IBSIM_DEFAULT_SOCKET:
            del env["IBSIM_SOCKNAME"]  # as a lab started by hand: the tools find ibsim's default
        if self.console_socket:  # a ConsoleServer serves this lab: Weft retrains enabled ports through it
            env[CONSOLE_SOCKET_ENV] = self.console_socket
        return env

    @property
    def env(self) -> dict[str, str]:
        """The full environment to run any infiniband-diags tool against the lab (``os.environ`` +
        :attr:`tool_env`, with the sbin directories on ``PATH``)."""
        env = dict(os.environ)
        env.pop("IBSIM_SERVER_NAME", None)  # would switch umad2sim to TCP remote mode
        env.pop("IBSIM_SERVER_PORT", None)
        env.pop("IBSIM_SOCKNAME", None)  # this lab's, from tool_env (absent on the default socket)
        env["PATH"] = search_path(env)
        env.update(self.tool_env)
        return env

    # -- life cycle -------------------------------------------------------------------------------

    def _ibsim_limits(self) -> list[str]:
        """``-N -S -P -L`` sized from the netfile with headroom, never below ibsim's defaults."""
        n = max(_IBSIM_DEFAULTS["N"], len(self.net.nodes) * 5 // 4 + 16)
        s = max(_IBSIM_DEFAULTS["S"], len(self.net.switches) * 5 // 4 + 16)
        p = max(_IBSIM_DEFAULTS["P"], self.net.total_ports * 5 // 4 + 64)
        lids = max(self.net.max_lid, len(self.net.nodes) * 2) + 1024
        cap = max(_IBSIM_DEFAULTS["L"], min(lids, 0xBFFF + 1))
        return ["-N", str(n), "-S", str(s), "-P", str(p), "-L", str(cap)]

    def _popen(self, argv: list[str], env: dict[str, str], cwd: Path, **kw) -> subprocess.Popen:
        in_main = threading.current_thread() is threading.main_thread()
        return subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            start_new_session=True,  # Ctrl-C must not hit ibsim before OpenSM is stopped
            preexec_fn=_die_with_parent if in_main else None,  # PDEATHSIG follows the starting thread
            **kw,
        )

    def start(self, timeout: float = 60) -> Lab:
        """Start ibsim, then OpenSM(s); wait until the master SM is MASTER and the subnet is up.

        ``timeout`` is in seconds for the whole start. Raises ``LabError`` (with the tail of ibsim's
        or OpenSM's log) if a process exits or the SM is not MASTER in time; everything started is
        stopped again before the error propagates. Returns ``self``.
        """
        if not self._stopped:
            return self
        t0 = time.monotonic()
        deadline = t0 + timeout
        if self.workdir is None:
            _sweep_stale_workdirs()
            self.workdir = Path(tempfile.mkdtemp(prefix=_WORKDIR_PREFIX))
            (self.workdir / _OWNER_FILE).write_text(f"{os.getpid()}\n")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._stopped = False
        self._closing = False
        self._owner_pid = os.getpid()
        with _LIVE_LOCK:
            _LIVE.add(self)
        try:
            self._start_ibsim(deadline)
            self.timings["ibsim"] = time.monotonic() - t0
            for i, sm in enumerate(self._sms):
                sm.dir = self.workdir / f"opensm{i}"
                self._start_opensm(sm)
                if i == 0:
                    self.wait_master(timeout=max(1.0, deadline - time.monotonic()))
                    self.timings["master"] = time.monotonic() - t0
                    self.wait_subnet_up(timeout=max(1.0, deadline - time.monotonic()))
                    self.timings["subnet_up"] = time.monotonic() - t0
                    errors = _partition_errors(_read_from(sm.log, 0))
                    if errors:
                        p = self._partitions
                        source = (
                            p
                            if isinstance(p, Path) or (isinstance(p, str) and Path(p).is_file())
                            else "partitions"
                        )
                        raise LabError(
                            f"{source}: {errors[0]} (OpenSM would run with only the default partition)"
                        )
                else:  # a standby that is still discovering would not take over yet
                    self._wait_log(sm, b"Entering STANDBY state", max(1.0, deadline - time.monotonic()))
        except BaseException:
            self.stop()
            raise
        self.started_at = time.time()
        self.start_seconds = time.monotonic() - t0
        logger.info(
            "lab %s up in %.1fs (ibsim %.1fs, MASTER %.1fs) in %s",
            self.socket_name,
            self.start_seconds,
            self.timings["ibsim"],
            self.timings["master"],
            self.workdir,
        )
        return self

    def _start_ibsim(self, deadline: float) -> None:
        netpath = self.workdir / "fabric.net"
        netpath.write_text(self._ibsim_text)
        env = dict(os.environ, IBSIM_SOCKNAME=self.socket_name)
        self._ibsim_log = self.workdir / "ibsim.err"
        argv = [self.programs["ibsim"], "-s", *self._ibsim_limits(), str(netpath)]
        with open(self._ibsim_log, "wb") as err:
            self._ibsim = self._popen(
                argv, env, self.workdir, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err
            )
        self._out.clear()
        self._reader = threading.Thread(
            target=self._read_stdout, name=f"ibsim-{self.socket_name}", daemon=True
        )
        self._reader.start()
        try:
            self._wait_prompt(0, max(1.0, deadline - time.monotonic()))
        except LabError as exc:
            raise LabError(
                f"ibsim did not come up on {self._net_source or netpath}: {exc}\n"
                f"stdout: {self._out.decode(errors='replace')[-1500:]}\nstderr: {_tail(self._ibsim_log)}"
            ) from None

    def _read_stdout(self) -> None:
        fd = self._ibsim.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            with self._out_cond:
                self._out += chunk
                self._out_cond.notify_all()
            if not chunk:
                return

    def _wait_prompt(self, start: int, timeout: float) -> str:
        """Wait until ibsim's stdout, from offset ``start``, ends with the prompt; return the text before it."""
        deadline = time.monotonic() + timeout
        with self._out_cond:
            while True:
                buf = self._out
                if len(buf) > start and buf.endswith(_PROMPT):
                    text = bytes(buf[start : len(buf) - len(_PROMPT)]).decode(errors="replace")
                    # ibsim writes only in answer to a command: what is read is consumed (a long-running
                    # lab driven by a traffic player must not grow this buffer forever)
                    buf.clear()
                    return text
                if self._ibsim is None or self._ibsim.poll() is not None:
                    code = self._ibsim.returncode if self._ibsim else None
                    raise LabError(f"ibsim exited (status {code})")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise LabError(f"no ibsim prompt within {timeout:.0f}s")
                self._out_cond.wait(min(left, 0.2))

    def _opensm_env(self, sm: _SM) -> dict[str, str]:
        env = self.env
        env["SIM_HOST"] = sm.node.node_id
        env["OSM_TMP_DIR"] = str(sm.dir)
        env["OSM_CACHE_DIR"] = str(sm.dir)
        return env

    def _write_partitions(self, text: str) -> Path:
        path = self.workdir / "partitions.conf"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text if text.endswith("\n") else text + "\n")
        tmp.replace(path)
        return path

    def _partitions_text(self) -> str:
        p = self._partitions
        if p is None:
            return "Default=0x7fff, ipoib : ALL=full ;\n"
        if isinstance(p, str) and ("\n" in p or ("=" in p and not Path(p).is_file())):
            return p  # partitions text
        try:
            return Path(p).read_text()
        except OSError as exc:
            raise LabError(f"cannot read partitions file {p}: {exc}") from exc

    def _start_opensm(self, sm: _SM) -> None:
        sm.dir.mkdir(parents=True, exist_ok=True)
        parts = self.workdir / "partitions.conf"
        if not parts.exists():
            self._write_partitions(self._partitions_text())
        conf = {
            "sm_priority": str(sm.priority),
            "partition_config_file": str(parts),
            "log_file": str(sm.log),
            "force_log_flush": "TRUE",  # wait_subnet_up() reads the log while OpenSM runs
            "dump_files_dir": str(sm.dir),
            "sminfo_polling_timeout": "1000" if len(self._sms) > 1 else "10000",
            "polling_retry_number": "2" if len(self._sms) > 1 else "4",
        }
        conf.update({k: str(v) for k, v in self.opensm_conf.items()})
        conf_path = sm.dir / "opensm.conf"
        conf_path.write_text("".join(f"{k} {v}\n" for k, v in conf.items()))
        # -P names the partitions file on the command line too, as sites start OpenSM (-P wins over
        # partition_config_file; both name the same file here)
        argv = [self.programs["opensm"], "-F", str(conf_path), "-P", str(parts)]
        with open(sm.dir / "opensm.out", "wb") as out:
            sm.proc = self._popen(
                argv,
                self._opensm_env(sm),
                sm.dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        # OpenSM writes no pid file when not daemonised: the lab does, as an init script would, so
        # Weft can SIGHUP it after writing the partitions file (Fabric.sm_pid_file)
        (sm.dir / "opensm.pid").write_text(f"{sm.proc.pid}\n")

    def stop(self) -> None:
        """Stop every process of the lab by pid: OpenSM(s) first, then ibsim; SIGTERM, then SIGKILL after
        5 s. Removes the temporary work directory. Safe to call twice and from ``atexit``."""
        if self._stopped or os.getpid() != self._owner_pid:
            return  # not running, or a forked copy of the Lab object: the processes belong to the parent
        # _stopped is set only at the end: a second Ctrl-C interrupting this leaves the lab "running",
        # so the atexit handler finishes the job.
        self._closing = True
        grace = 0.0 if self._hung else 5.0  # a hung lab answers no SIGTERM in time: kill it
        for sm in reversed(self._sms):
            _terminate(sm.proc, grace)
        if self._ibsim is not None:
            with contextlib.suppress(OSError):
                self._ibsim.stdin.close()
            _terminate(self._ibsim, grace)
            if self._reader is not None:
                self._reader.join(timeout=5)
            with contextlib.suppress(OSError):
                self._ibsim.stdout.close()
        self._stopped = True
        with _LIVE_LOCK:
            _LIVE.discard(self)
        if self._own_workdir and self.workdir is not None and not os.environ.get("WEFT_LAB_KEEP"):
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    @property
    def pids(self) -> list[int]:
        """Pids of the running processes (OpenSMs, then ibsim)."""
        out = [sm.proc.pid for sm in self._sms if sm.proc is not None and sm.proc.poll() is None]
        if self._ibsim is not None and self._ibsim.poll() is None:
            out.append(self._ibsim.pid)
        return out

    def __enter__(self) -> Lab:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()

    # -- tools ------------------------------------------------------------------------------------

    def run(self, argv: list[str], timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        """Run an infiniband-diags tool (``["ibnetdiscover"]``, ``["perfquery", "-x", "5", "1"]``) against
        the lab, with :attr:`env` and the work directory as cwd; text output.

        Raises ``LabError`` if ``check`` and the tool exits non-zero (the message has its stderr), or
        on timeout (``timeout`` seconds; the tool is killed with its process group and its ibsim client
        slot freed).
        """
        argv = [str(a) for a in argv]
        if not os.path.isabs(argv[0]):
            argv[0] = find_program(argv[0]) or argv[0]
        cwd = (self.workdir or Path(tempfile.gettempdir())) / "tools"
        cwd.mkdir(parents=True, exist_ok=True)
        try:
            proc = run_process(argv, env=self.env, cwd=cwd, timeout=timeout, text=True)
        except subprocess.TimeoutExpired as exc:
            self.reap_clients()
            raise LabError(
                f"{' '.join(argv)} timed out after {timeout}s against lab {self.socket_name}"
            ) from exc
        except FileNotFoundError as exc:
            raise LabToolsMissing(f"{argv[0]} is not installed (infiniband-diags?)") from exc
        if check and proc.returncode != 0:
            raise LabError(
                f"{' '.join(argv)} exited {proc.returncode} against lab {self.socket_name}: "
                f"{proc.stderr.strip()[-2000:]}"
            )
        return proc

    # -- ibsim console ----------------------------------------------------------------------------

    def console(self, command: str, timeout: float = 10) -> str:
        """Run one ibsim console command and return its answer (text before the next ``sim>`` prompt).

        Raises ``LabConsoleError`` when ibsim answers with an error line (``# nodeid ... not found``,
        ``# port 3 at nodeid ... is not linked``...) or does not know the command, ``LabError`` when
        ibsim is gone or silent for ``timeout`` seconds. Commands longer than ibsim's 127-byte line
        go through a command file (``!file``).
        """
        command = command.strip()
        if "\n" in command:
            raise LabConsoleError("one console command at a time (no newline)")
        if self._stopped or self._closing or self._ibsim is None:
            raise LabError("the lab is not running")
        with self._console_lock:
            line = command
            if len(command) > _CONSOLE_MAX:
                cmd_file = self.workdir / f"cmd-{secrets.token_hex(4)}"
                cmd_file.write_text(command + "\n")
                line = f"!{cmd_file}"
                if len(line) > _CONSOLE_MAX:
                    raise LabConsoleError(
                        f"console command too long ({len(command)} bytes) and workdir path too long"
                    )
            with self._out_cond:
                start = len(self._out)
            try:
                self._ibsim.stdin.write(line.encode() + b"\n")
                self._ibsim.stdin.flush()
            except (BrokenPipeError, OSError) as exc:
                raise LabError(f"ibsim console closed: {exc}") from exc
            answer = self._wait_prompt(start, timeout)
        verb = command.split(None, 1)[0].lower() if command else ""
        if verb not in ("dump", "route", "help", "?", "#") and not command.startswith("#"):
            errors = [ln for ln in answer.splitlines() if ln.startswith("#")]
            if errors:
                raise LabConsoleError(f"ibsim: {command!r}: {errors[0].lstrip('# ').strip()}")
            if "unknown - skipped" in answer or "bad param" in answer or "bad clientid" in answer:
                raise LabConsoleError(f"ibsim: {command!r}: {answer.strip()}")
        return answer

    def _node_port(self, node: str, port: int | None) -> tuple[NetNode, str]:
        rec = self._resolve(node)
        if port is None:
            return rec, f'"{rec.node_id}"'
        low = 0 if rec.kind != CA else 1
        if not low <= int(port) <= rec.nports:
            raise LabError(f"{rec.description!r} has ports {low}..{rec.nports}, not {port}")
        return rec, f'"{rec.node_id}"[{int(port)}]'

    def perf_set(self, node: str, port: int, field: str, value: int) -> None:
        """Set a port counter in ibsim (``PerformanceSet``).

        ``field`` is a PortCounters field name (``"PortXmitWait"``, ``"PortXmitData"`` in 4-byte
        words as the spec's 32-bit counter, ...) or ``Attribute.Field`` as ibsim names it
        (``"PortCountersExtended.PortXmitData"``, 64-bit, also in 4-byte words). ibsim clamps the
        value to the counter's width. Raises ``LabConsoleError`` on an unknown node, port or field.
        """
        if int(port) < 0 or int(value) < 0:
            raise LabError("port and value must be >= 0")
        attr_field = field if "." in field else f"PortCounters.{field}"
        _, target = self._node_port(node, port)
        self.console(f"PerformanceSet {target} {attr_field}={int(value)}")

    def unlink(self, node: str, port: int | None = None) -> None:
        """Pull the cable of ``port`` of ``node`` (all linked ports when ``port`` is None)."""
        rec, target = self._node_port(node, port)
        self.console(f"Unlink {target}")
        with self._links_lock:
            self._pulled.update(self._cable_ends(rec, port))

    def relink(self, node: str, port: int | None = None) -> None:
        """Put back the cable(s) removed by :meth:`unlink` (``ReLink``). A ``port`` whose cable
        is in place (a port disabled with ``ibportstate``, not pulled) is trained again instead
        (:meth:`retrain`): ``ReLink`` alone has no stored link to put back there."""
        rec, target = self._node_port(node, port)
        if port is not None:
            with self._links_lock:
                pulled = bool(self._cable_ends(rec, port) & self._pulled)
            if not pulled:
                self.retrain(node, port)
                return
        self.console(f"ReLink {target}")
        with self._links_lock:
            self._pulled.difference_update(self._cable_ends(rec, port))

    def retrain(self, node: str, port: int) -> None:
        """Train the link of ``port`` of ``node`` again, as a real port does once it is enabled:
        ``ibportstate ... enable`` sets an ibsim port's PhysState to Polling and it stays there
        (ibsim does no link training), so the link an admin disabled would stay down for good.
        ``Unlink`` then ``ReLink`` of that port bring both ends to Init/LinkUp and send trap 128
        to the SM (ibsim ``sim_net.c`` ``link_ports``), which makes the link Active again.

        Raises:
            LabError: the cable is pulled (:meth:`relink` puts it back), or ``port`` is not one
                of the node's ports.
            LabConsoleError: ibsim refused it (the port has no cable).
        """
        rec, target = self._node_port(node, port)
        with self._links_lock:
            if self._cable_ends(rec, port) & self._pulled:
                raise LabError(f"the cable at {target} is pulled: relink it")
        self.console(f"Unlink {target}")
        self.console(f"ReLink {target}")

    def _cable_ends(self, rec: NetNode, port: int | None) -> set[tuple[str, int]]:
        """Both ends ``(node id, port)`` of the netfile's cables at ``port`` of ``rec`` (all its
        cabled ports when None)."""
        ports = self.net.linked_ports(rec) if port is None else [int(port)]
        ends = {(rec.node_id, p) for p in ports}
        return ends | {self._peers[e] for e in ends if e in self._peers}

    def is_linked(self, node: str, port: int) -> bool:
        """True when ``port`` of ``node`` has a cable in the netfile that :meth:`unlink` did not pull
        (what real traffic needs: a pulled cable carries none). ``LabError`` for an unknown node."""
        node_id = self._node_ids.get(node)
        if node_id is None:  # resolved once per name: a traffic player asks every tick
            node_id = self._node_ids[node] = self._resolve(node).node_id
        end = (node_id, int(port))
        with self._links_lock:
            return end in self._peers and end not in self._pulled

    def set_error(self, node: str, port: int | None, rate: int) -> None:
        """Drop ``rate`` percent (0..100) of the MADs through ``port`` of ``node`` (all ports if None)."""
        if not 0 <= int(rate) <= 100:
            raise LabError(f"error rate {rate} outside 0..100 percent")
        _, target = self._node_port(node, port)
        self.console(f"Error {target} {int(rate)}")

    def clients(self) -> list[dict]:
        """ibsim's attached clients: ``[{"id", "pid", "node", "sm"}]`` (from the ``Attached`` command)."""
        out = []
        for m in re.finditer(
            r'Client (\d+): pid (\d+) connected at "([^"]*)" port 0x([0-9a-f]+), lid (\d+), qp (\d+) ?(SM)?',
            self.console("Attached"),
        ):
            out.append({"id": int(m[1]), "pid": int(m[2]), "node": m[3], "sm": bool(m[7])})
        return out

    def reap_clients(self) -> int:
        """Free ibsim client slots of processes that died without detaching; returns how many."""
        n = 0
        with contextlib.suppress(LabError):
            for cl in self.clients():
                if not Path(f"/proc/{cl['pid']}").exists():
                    self.console(f"X {cl['id']}")
                    n += 1
        return n

    # -- subnet manager ---------------------------------------------------------------------------

    def sm_info(self) -> dict:
        """The master SM as ``sminfo`` reports it: ``{"guid": "0x...", "lid": int, "priority": int,
        "state": "MASTER"|"STANDBY"|"DISCOVERING"|"NOTACTIVE", "activity": int}``.

        Raises ``LabError`` when sminfo fails (no SM yet) or its output cannot be parsed.
        """
        proc = self.run(["sminfo"], timeout=15)
        m = re.search(
            r"sm lid (\d+) sm guid (0x[0-9a-fA-F]+), activity count (\d+) priority (\d+) state (\d+)",
            proc.stdout,
        )
        if not m:
            raise LabError(f"cannot parse sminfo output: {proc.stdout.strip()!r}")
        state = int(m[5])
        return {
            "guid": f"0x{int(m[2], 16):016x}",
            "lid": int(m[1]),
            "priority": int(m[4]),
            "state": _SM_STATES.get(state, str(state)),
            "activity": int(m[3]),
        }

    def wait_master(self, timeout: float = 60, guid: str | None = None) -> dict:
        """Poll ``sminfo`` until an SM is MASTER (and, if ``guid`` is given, it is that port GUID or
        node GUID). Returns :meth:`sm_info`; raises ``LabError`` on timeout or if OpenSM/ibsim died."""
        want = None
        if guid is not None:
            node = self._resolve(guid)
            want = {f"0x{node.guid:016x}"} | {
                f"0x{node.port_guid(p):016x}" for p in range(1, node.nports + 1)
            }
        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            self._check_alive_any()
            try:
                info = self.sm_info()
                last = info
                if info["state"] == "MASTER" and (want is None or info["guid"] in want):
                    return info
            except LabError as exc:
                last = exc
            if time.monotonic() > deadline:
                raise LabError(
                    f"no MASTER SM{' ' + guid if guid else ''} within {timeout:.0f}s (last: {last})"
                )
            time.sleep(0.25)

    def failure(self) -> str | None:
        """Why the lab can serve no console command any more, or None while it can: the lab was
        stopped, or its ibsim exited (``"the lab's ibsim (pid 4242) has exited (killed by signal
        9)"``; polling reaps it). A dead OpenSM is not a failure here: the console still works.
        For threads that drive the lab (``lab.traffic``, ``lab.faults``) to stop with one line
        instead of logging every failed command."""
        if self._stopped or self._closing:
            return "the lab was stopped"
        proc = self._ibsim
        if proc is None or proc.poll() is not None:
            code = proc.returncode if proc is not None else None
            how = f"killed by signal {-code}" if code is not None and code < 0 else f"status {code}"
            return f"the lab's ibsim (pid {proc.pid if proc else '?'}) has exited ({how})"
        return None

    def check(self) -> None:
        """Raise ``LabError`` (with the log tail) unless ibsim and at least one OpenSM are running."""
        if self._stopped:
            raise LabError("the lab is not running")
        self._check_alive_any()

    def _check_alive_any(self) -> None:
        if self._ibsim is None or self._ibsim.poll() is not None:
            raise LabError(f"ibsim is not running\n{_tail(self._ibsim_log)}")
        alive = [sm for sm in self._sms if sm.proc is not None and sm.proc.poll() is None]
        if not alive:
            sm = self._sms[0]
            raise LabError(f"no OpenSM running\n{_tail(sm.log)}\n{_tail(sm.dir / 'opensm.out')}")

    def wait_subnet_up(self, timeout: float = 60) -> None:
        """Wait until an OpenSM of the lab logged ``SUBNET UP`` (LIDs assigned, routes set, ports ACTIVE)."""
        self._wait_log(None, b"SUBNET UP", timeout)

    def _wait_log(self, sm: _SM | None, text: bytes, timeout: float) -> None:
        """Wait until ``sm``'s log (any OpenSM's when None) contains ``text``; ``LabError`` on timeout."""
        deadline = time.monotonic() + timeout
        sms = [sm] if sm is not None else self._sms
        while True:
            self._check_alive_any()
            if sm is not None and sm.proc is not None and sm.proc.poll() is not None:
                raise LabError(
                    f"OpenSM on {sm.node.node_id!r} exited (status {sm.proc.returncode})\n{_tail(sm.log)}"
                )
            for one in sms:
                try:
                    if text in one.log.read_bytes():
                        return
                except OSError:
                    pass
            if time.monotonic() > deadline:
                raise LabError(
                    f"OpenSM did not log {text.decode()} within {timeout:.0f}s\n{_tail(sms[0].log)}"
                )
            time.sleep(0.2)

    def hang(self) -> None:
        """Freeze ibsim (SIGSTOP), as a hung fabric: every MAD of the diags, the MAD poller and
        OpenSM then waits forever, so tools against the lab run into their timeouts. There is no
        way back (ibsim exits when thawed after clients died meanwhile); :meth:`stop` kills a hung
        lab at once. Raises ``LabError`` when ibsim is not running."""
        if self._ibsim is None or self._ibsim.poll() is not None:
            raise LabError("ibsim is not running")
        os.kill(self._ibsim.pid, signal.SIGSTOP)
        self._hung = True

    def kill_master_sm(self) -> None:
        """SIGKILL the OpenSM that is MASTER now (failover tests) and free its ibsim client slot."""
        info = self.sm_info()
        for sm in self._sms:
            if f"0x{sm.port_guid:016x}" == info["guid"] and sm.proc is not None and sm.proc.poll() is None:
                sm.proc.kill()
                sm.proc.wait(10)
                self.reap_clients()
                return
        raise LabError(f"the MASTER SM {info['guid']} is not an OpenSM of this lab")

    def set_partitions(self, text: str, timeout: float = 60) -> None:
        """Replace the partitions file with ``text``, SIGHUP the OpenSMs so they re-read it, and wait
        (up to ``timeout`` s) until the master's heavy sweep logged ``SUBNET UP``: the new PKeys are on
        the ports when this returns.

        Raises ``LabError`` naming the line when OpenSM rejects the file (``PARSE ERROR``; OpenSM then
        runs with only the default partition), or when no sweep completes in time.
        """
        if self._stopped:
            raise LabError("the lab is not running")
        alive = [sm for sm in self._sms if sm.proc is not None and sm.proc.poll() is None]
        offsets = {id(sm): _size(sm.log) for sm in alive}
        self._write_partitions(text)
        for sm in alive:
            sm.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + timeout
        while True:
            for sm in alive:
                new = _read_from(sm.log, offsets[id(sm)])
                errors = _partition_errors(new)
                if errors:
                    raise LabError(
                        f"{self.workdir / 'partitions.conf'}: {errors[0]} (OpenSM kept only the default partition)"
                    )
                if b"SUBNET UP" in new:
                    return
            if time.monotonic() > deadline:
                raise LabError(f"OpenSM did not re-sweep within {timeout:.0f}s after SIGHUP")
            self._check_alive_any()
            time.sleep(0.1)

    @property
    def partitions_path(self) -> Path:
        """The partitions file every OpenSM of the lab reads (``-P``; what ``Fabric.partitions_path``
        stores for a lab fabric). Valid once started."""
        return self.workdir / "partitions.conf"

    @property
    def sm_pid_file(self) -> Path:
        """The master OpenSM's pid file (``Fabric.sm_pid_file`` of a lab fabric). Valid once started."""
        return self._sms[0].dir / "opensm.pid"

    @property
    def sm_pid_files(self) -> dict[str, str]:
        """``{port GUID "0x%016x": pid file}`` of every OpenSM of the lab, the master's and a
        standby's (``Fabric.sm_pid_files`` of a lab fabric: the apply signals the current master)."""
        return {f"0x{sm.port_guid:016x}": str(sm.dir / "opensm.pid") for sm in self._sms}

    def partition_errors(self, since: int = 0) -> list[str]:
        """OpenSM's partitions-file complaints in the master's log from byte ``since`` on
        (``"line 2: bad PortGUID"``); :meth:`sm_log_size` gives the offset to start from."""
        return _partition_errors(_read_from(self._sms[0].log, since))

    def sm_log_size(self) -> int:
        """Size of the master OpenSM's log now (an offset for :meth:`partition_errors`/:meth:`sm_log_since`)."""
        return _size(self._sms[0].log)

    def sm_log_since(self, offset: int) -> bytes:
        """What the master OpenSM logged from byte ``offset`` on."""
        return _read_from(self._sms[0].log, offset)

    @property
    def sm_pids(self) -> list[int]:
        return [sm.proc.pid for sm in self._sms if sm.proc is not None and sm.proc.poll() is None]

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else f"running in {self.workdir}"
        return f"<Lab {self.net.source} {len(self.net.switches)} switches {len(self.net.cas)} CAs, {state}>"


_WORKDIR_PREFIX = "weft-lab-"
_OWNER_FILE = "owner.pid"


def _sweep_stale_workdirs() -> None:
    """Remove temporary lab directories whose owning process is gone (it was SIGKILLed and could not
    clean up; its ibsim/OpenSM died with it through PR_SET_PDEATHSIG)."""
    for d in Path(tempfile.gettempdir()).glob(_WORKDIR_PREFIX + "*"):
        with contextlib.suppress(OSError, ValueError):
            if d.stat().st_uid != os.getuid():
                continue
            pid = int((d / _OWNER_FILE).read_text().strip())
            if not Path(f"/proc/{pid}").exists():
                shutil.rmtree(d, ignore_errors=True)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read()
    except OSError:
        return b""


def _partition_errors(log: bytes) -> list[str]:
    """OpenSM's partitions-file complaints (``parse_part_conf: PARSE ERROR: line 2: bad partition
    definition``) as ``"line 2: bad partition definition"``."""
    return [
        m.group(1).decode(errors="replace").strip()
        for m in re.finditer(rb"PARSE ERROR: (line \d+:[^\n]*)", log)
    ]


def _default_sm_node(net) -> NetNode:
    """The first CA cabled on port 1 (where umad2sim attaches OpenSM) that is a host HCA (not a switch's
    SHARP "Aggregation Node"), else the first such CA. ``LabError`` when there is none."""
    cabled = [ca for ca in net.cas if 1 in net.linked_ports(ca)]
    if not cabled:
        raise LabError(f"{net.source}: no CA has a cable on port 1, OpenSM could never become MASTER")
    for ca in cabled:
        if "aggregation node" not in ca.description.lower():
            return ca
    return cabled[0]


def _terminate(proc: subprocess.Popen | None, grace: float = 5.0) -> None:
    """SIGTERM ``proc`` by pid, SIGKILL after ``grace`` seconds; reap it."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(10)
