"""Link and port state within seconds: SM notices → targeted refreshes → the ingest's events.

One :class:`NoticeListener` thread per live fabric keeps a listener child
(``python -m fabric.collectors.notices``, the fabric's tool environment, libibumad) subscribed to
the master SM's notices through the SA (InformInfo Set for traps 64/65, 128, 129-131, 144;
re-subscribed when the master SM moves or restarts, see the child's docstring) and turns each
notice into the smallest read that tells the truth:

* trap 128 (a switch's link state changed; the notice names the switch LID) and 129-131 (link
  integrity / buffer overrun / flow-control watchdog of one switch port): PortInfo of every port
  of that switch (one SMP per port, through the child), handed to
  ``fabric.services.ingest.apply_port_states`` (the one writer of port state and links): a port
  now Down loses its link (``link.down``, a Critical alarm by default), states change
  (``port.state_changed``); ports that came up Init/Armed are read again each second until the
  SM made them Active; 129-131 also write ``port.error_trap``. A switch that left ports
  unanswered is read again every ``REREAD_S`` (0.5 s) for up to ``REREAD_FOR_S`` (30 s), then
  discovered: the Report of a pulled cable can arrive while the listener's own route to the
  switch still runs through that cable, until the SM has rerouted;
* a port that came up without a stored link, a node that lost its last link (a host whose only
  cable was pulled is gone only if no one reaches it), traps 64/65 (a port GID in/out of
  service: a node joined or left) and 144 with the NodeDescription flag: a live discovery
  (``fabric.services.discovery.discover``, the ingest) shortly after, so ``link.up``,
  ``node.added``/``node.removed`` come from the one place that writes them;
* the child's report that the master SM moved: the SM watch (``fabric.services.sm.watch``) at once.

Fallback where notices are not delivered (no subscription confirmed, or
``WEFT_PORT_STATE_FALLBACK=always``): every ``WEFT_PORT_STATE_INTERVAL_S`` the listener reads
PortInfo of the switch ports the stored fabric has (one end of every link with a switch end,
plus switch ports stored Down), :func:`fallback_targets`; its MAD cost is one SMP per such port
and one NodeInfo per switch (who answers at the stored LID: LIDs move when an SM reassigns them)
(``bench/sweep.py`` prints it as ``port_state_fallback_mads``, ``bench/port_states.py`` times it).
With notices confirmed (``auto``) the same read runs every ``WEFT_PORT_STATE_VERIFY_S`` and when
the child hints that a Report was lost (the SA sends each Report once along the routes of the
moment: a cable on the SM's route to the listener takes its own Report with it; the hints are an
SM check that had to be resent and, in the lab, the SM's heavy sweep asking for our SMInfo).
``off`` reads nothing but what notices name.

Where it runs: ``manage.py serve`` starts the :class:`NoticeSupervisor` in-process (embedded
deployment, ``WEFT_NOTICES``); production runs ``manage.py listen_notices`` under systemd (README).
The supervisor starts a listener for every live fabric (``fabric.collectors.tools.is_live``),
stops those of fabrics removed or no longer live, and restarts a child that died (backoff).
Status per fabric (:func:`fabric.services.notice_status.notice_status`: state, SM LID, notices, refreshes, fallback reads and
MADs) is kept in the cache, read by the fabric API (``notices``).

ibsim lab: the child attaches as an SM client (``--issm``, see ``fabric.collectors.notices``) on
a CA that runs no SM: ``SIM_HOST`` = a CA of the stored fabric other than the tools' CA and the
known SMs' (:func:`lab_listener_hosts`; the next one after a failed start).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, close_old_connections, transaction

from core.leases import Fence, LeaseKeeper, StaleLeader, check_fence
from core.locks import single_instance
from core.repeatlog import RepeatLog
from events.roles import check_roles
from events.services import EventSpec, record_events

from ..choices import NodeType, PortState
from ..collectors.ibnetdiscover import DiscoveryError
from ..collectors.tools import fabric_ca_args, fabric_env, is_live, kill_group, tool_workdir
from ..keys import port_key, port_name
from ..models import Fabric, Link, Node, Port, SubnetManager
from .discovery import discover
from .ingest import PortObservation, PortRefresh, apply_port_states
from .notice_status import STATUS_TTL_S, status_key
from .sm import watch

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
#: notices arriving this close together are refreshed in one batch (ReLink sends two)
BATCH_S = 0.05
#: a discovery asked for by notices waits this long for more of them (one discovery per burst)
DISCOVERY_DELAY_S = 0.3
#: a port-state check after a hint that a Report was lost waits this long (the SM reroutes first)
VERIFY_DELAY_S = 0.5
#: a switch a notice named that did not answer every PortInfo of the refresh is read again every
#: REREAD_S seconds, for up to REREAD_FOR_S seconds after its first unanswered read (then a
#: discovery): the Report of a pulled cable can arrive while the listener's own route to that switch
#: still runs through the cable, until the SM has rerouted (ibsim answers a MAD it cannot route at
#: once with status ETIMEDOUT, ``sim_mad.c`` ``process_packet``; hardware after the MAD's timeout)
REREAD_S, REREAD_FOR_S = 0.5, 30.0
#: ports that came up Init/Armed are read again this often, at most RECHECKS times
RECHECK_S, RECHECKS = 1.0, 30
#: error traps: 129 local link integrity, 130 excessive buffer overrun, 131 flow-control watchdog
ERROR_TRAPS = {
    129: "local link integrity threshold reached",
    130: "excessive buffer overrun threshold reached",
    131: "flow-control update watchdog timer expired",
}


@dataclass
class ListenerStatus:
    """What a listener tells operators (and tests) about one fabric.

    ``state``: ``starting`` (no child yet or waiting for its port), ``subscribed`` (notices
    confirmed by the SA), ``unsubscribed`` (the SA refused or did not answer: the fallback
    reads port states), ``down`` (the child cannot run; ``error`` says why). Times are epoch
    seconds; ``fallback_mads`` is the PortInfo SMPs of the last fallback read.
    """

    fabric: str
    state: str = "starting"
    sm_lid: int | None = None
    subscribed_at: float | None = None
    traps: dict = field(default_factory=dict)
    last_notice_at: float | None = None
    notices: int = 0
    refreshes: int = 0
    discoveries: int = 0
    fallback_reads: int = 0
    fallback_mads: int = 0
    sim_host: str = ""
    #: ibsim lab: the port GUID the child attached with as an SM client (``--issm``), "" otherwise.
    #: It answers SMInfo as a NOTACTIVE SM there but is not one (``fabric.services.sm.watch``).
    sm_client_guid: str = ""
    pid: int | None = None
    error: str = ""
    updated: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def lab_listener_hosts(fabric: Fabric) -> list[str]:
    """ibsim lab: node descriptions of the CAs the listener may attach to as an SM client, best
    first: CAs with an Active port, not the tools' ``SIM_HOST`` and not a known SM's, last name
    first (labs put OpenSM on the first CAs)."""
    tools_host = str((fabric.tool_env or {}).get("SIM_HOST", ""))
    sm_guids = set(SubnetManager.objects.filter(fabric=fabric).values_list("guid", flat=True))
    sm_nodes = set(
        Port.objects.filter(node__fabric=fabric, port_guid__in=sm_guids).values_list("node_id", flat=True)
    )
    rows = (
        Node.objects.filter(fabric=fabric, node_type=NodeType.CA, ports__state=PortState.ACTIVE)
        .exclude(description="")
        .distinct()
        .order_by("-description")
        .values_list("id", "description", "node_guid")
    )
    out = []
    for node_id, desc, guid in rows:
        if node_id in sm_nodes or tools_host in (desc, guid) or desc in out:
            continue
        out.append(desc)
    return out


def is_lab(env: dict[str, str]) -> bool:
    return "umad2sim" in env.get("LD_PRELOAD", "")


def listener_command(
    fabric: Fabric, attempt: int = 0, traps: tuple[int, ...] | None = None
) -> tuple[list[str], dict[str, str], str]:
    """``(argv, env, sim_host)`` of the listener child for ``fabric`` (``sim_host`` "" off the
    lab); ``traps`` to subscribe to (default the child's: 64, 65, 128-131, 144). Raises
    LookupError when a lab fabric has no CA to attach to yet (not discovered)."""
    env = fabric_env(fabric)
    env.pop("SIM_SET_ISSM", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    argv = [sys.executable, "-m", "fabric.collectors.notices", *fabric_ca_args(fabric)]
    if traps is not None:
        argv += ["--traps", ",".join(str(t) for t in traps)]
    sim_host = ""
    if is_lab(env):
        hosts = lab_listener_hosts(fabric)
        if not hosts:
            raise LookupError("no CA to listen from yet (discover the fabric first)")
        sim_host = hosts[attempt % len(hosts)]
        env["SIM_HOST"] = sim_host
        argv.append("--issm")
    return argv, env, sim_host


def fallback_targets(fabric: Fabric) -> dict[int, list[int]]:
    """``{switch LID: [port, ...]}`` the port-state fallback reads: every stored switch port with a
    link (a cable between two switches once, from its lower node id), and stored switch ports
    without one (so a cable plugged back is seen). One SMP per port."""
    switch_lid = dict(
        Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH, lid__isnull=False).values_list(
            "id", "lid"
        )
    )
    peer_node: dict[int, int] = {}
    for a_id, a_node, b_id, b_node in Link.objects.filter(fabric=fabric).values_list(
        "port_a_id", "port_a__node_id", "port_b_id", "port_b__node_id"
    ):
        peer_node[a_id], peer_node[b_id] = b_node, a_node
    out: dict[int, list[int]] = {}
    for port_id, node_id, num in Port.objects.filter(
        node__fabric=fabric, node_id__in=switch_lid, port_num__gte=1
    ).values_list("id", "node_id", "port_num"):
        peer = peer_node.get(port_id)
        if peer is not None and peer in switch_lid and peer < node_id:
            continue  # the other switch reads this cable
        out.setdefault(switch_lid[node_id], []).append(num)
    return {lid: sorted(ports) for lid, ports in sorted(out.items())}


def record_error_trap(fabric: Fabric, notice: dict, *, fence: Fence | None = None) -> None:
    """Write ``port.error_trap`` for a trap 129-131 notice (the port named by its LID and port).
    ``fence``: the listener's lease (:func:`core.leases.check_fence`; raises
    :class:`~core.leases.StaleLeader` when taken over, nothing written)."""
    lid, num, trap = notice.get("lid"), notice.get("port"), notice.get("trap")
    port = (
        Port.objects.filter(node__fabric=fabric, node__lid=lid, port_num=num).select_related("node").first()
        or Port.objects.filter(node__fabric=fabric, lid=lid, port_num=num).select_related("node").first()
    )
    key = port_key(port.node.node_guid, port.port_num) if port else f"lid {lid}/{num}"
    with transaction.atomic():
        check_fence(fence)
        record_events(fabric, [EventSpec(
            code="port.error_trap", object_type="port", object_key=key,
            object_repr=str(port) if port else key, port_id=port.pk if port else None,
            message=f"port {port if port else port_name('LID ' + str(lid), num)}: {ERROR_TRAPS.get(trap, 'error')} "
                    f"(trap {trap}, SM notice)",
            details={"trap": trap, "lid": lid, "port": num},
        )])  # fmt: skip


#: umad2sim's (the lab simulator's) message when a client attaches: expected at every start, neither a
#: warning nor news worth a line in the demo's quiet log (``ibwarn: [pid] sim_connect: attached as client 1 at node "spine1"``).
SIMULATOR_ATTACHED = re.compile(r"\bsim_connect: attached as client \d+")


def stderr_level(line: str) -> int:
    """The log level of one stderr line of the listener child: DEBUG for the simulator's attach
    message (printed at every listener start; at INFO it landed under the demo's sign-in line),
    WARNING for anything else (libibumad warnings, a traceback)."""
    return logging.DEBUG if SIMULATOR_ATTACHED.search(line) else logging.WARNING


class ChildGone(RuntimeError):
    """The listener child exited (its last error message, if any, is the text)."""


class NoticeChild:
    """A running listener child: JSON lines out (read by a thread into a queue), commands in.
    ``repeats``: the listener's :class:`~core.repeatlog.RepeatLog` for the child's stderr lines."""

    repeats: RepeatLog | None = None

    def __init__(self, argv: list[str], env: dict[str, str], repeats: RepeatLog | None = None) -> None:
        self.repeats = repeats
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=tool_workdir(),
            start_new_session=True,
            text=True,
        )
        self.lines: queue.Queue = queue.Queue()
        self.last_error = ""
        self._req = 0
        self._reader = threading.Thread(target=self._read, name=f"weft-notices-{self.proc.pid}", daemon=True)
        self._reader.start()
        threading.Thread(
            target=self._log_stderr, name=f"weft-notices-err-{self.proc.pid}", daemon=True
        ).start()

    def _log_stderr(self) -> None:
        """The child's stderr (umad2sim and libibumad warnings, a traceback) into Weft's log, at
        most 200 lines per child; with ``repeats`` (the listener's :class:`RepeatLog`) a line the
        child repeats (``umad2sim_write: cannot write`` every second once ibsim is gone) is
        logged once, then as a count every few minutes."""
        logged = 0
        for line in self.proc.stderr:
            if logged >= 200 or not line.strip():
                continue
            args = (stderr_level(line), "notice listener %s: %s", self.proc.pid, line.rstrip()[:500])
            if self.repeats is None:
                log.log(*args)
                logged += 1
            elif self.repeats.log(*args):
                logged += 1

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                self.lines.put(json.loads(line))
            except ValueError:
                log.warning("notice listener: unreadable line %r", line[:200])
        self.lines.put(None)

    def get(self, timeout: float) -> dict | None:
        """The next message, None after ``timeout`` s. Raises ChildGone when the child exited."""
        try:
            msg = self.lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if msg is None:
            self.lines.put(None)
            raise ChildGone(self.last_error or f"listener exited ({self.proc.poll()})")
        if msg.get("type") == "error":
            self.last_error = msg.get("message", "")
        return msg

    def send(self, obj: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(obj) + "\n")
            self.proc.stdin.flush()
        except (OSError, ValueError) as exc:
            raise ChildGone(f"listener gone: {exc}") from exc

    def next_id(self) -> int:
        self._req += 1
        return self._req

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(3)
        except subprocess.TimeoutExpired:
            kill_group(self.proc)
            self.proc.wait(5)


class NoticeListener(threading.Thread):
    """Listens to one fabric's SM notices and applies them (see the module docstring).

    ``fallback``/``interval``: the port-state fallback mode and period (default the settings);
    ``traps``: the notices to subscribe to (default all those handled here).
    ``start()``; ``stop()`` ends the child and the thread. ``status`` is the live
    :class:`ListenerStatus` (also in the cache).
    """

    def __init__(
        self,
        fabric_id: int,
        *,
        fallback: str | None = None,
        interval: float | None = None,
        traps: tuple[int, ...] | None = None,
        fence: Fence | None = None,
    ):
        super().__init__(name=f"weft-notices-{fabric_id}", daemon=True)
        self.fabric_id = fabric_id
        #: the fencing number of the lease this listener was started under: its writes carry it
        #: (``core.leases.check_fence``), so a listener whose fabric was taken over writes nothing
        self.fence = fence
        self.traps = traps
        self.fallback = fallback or settings.WEFT_PORT_STATE_FALLBACK
        self.interval = float(interval or settings.WEFT_PORT_STATE_INTERVAL_S)
        self.status = ListenerStatus(fabric=str(fabric_id))
        self._stop_event = threading.Event()
        self.child: NoticeChild | None = None
        self._backlog: list[dict] = []
        self._refresh: dict[int, str] = {}  # switch LID -> why
        self._refresh_at = 0.0
        self._reread_until: dict[int, float] = {}  # switch LID -> monotonic end of its re-reads
        self._discover_at = 0.0
        self._discover_why = ""
        self._recheck: dict[int, int] = {}  # switch LID -> rechecks left
        # ports a recheck already asked a discovery for, as linked without a stored link: a port
        # that stays so (Init, its peer never comes up) asks once, not on every recheck
        self._asked_up: set[tuple[str, int]] = set()
        self._recheck_at = 0.0
        self._fallback_at = 0.0
        self._verify_at = 0.0
        self._verify_why = ""
        self._discovery: threading.Thread | None = None
        self.verify_s = float(settings.WEFT_PORT_STATE_VERIFY_S)
        self._watch_sm = False
        #: the child's repeated errors (stderr lines, "error" messages, exits) logged once, then
        #: counted: a lab whose ibsim was killed makes the child fail the same way every second
        self.repeats = RepeatLog(log)

    # -- life cycle ---------------------------------------------------------------------------

    def stop(self, timeout: float = 10.0) -> None:
        self._stop_event.set()
        if self.child is not None:
            self.child.close()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)
        if self._discovery is not None and self._discovery.is_alive():
            self._discovery.join(timeout)  # a discovery in progress finishes (its tool has a timeout)

    @property
    def stopped(self) -> bool:
        return self._stop_event.is_set()

    def run(self) -> None:
        attempt = 0
        backoff = 1.0
        while not self.stopped:
            started = time.monotonic()
            try:
                self._session(attempt)
            except ChildGone as exc:
                if self.stopped:
                    break
                self._set(state="down", error=str(exc), pid=None)
                self.repeats.warning("notice listener of fabric %s: %s", self.fabric_id, exc)
            except Fabric.DoesNotExist:
                return
            except StaleLeader as exc:  # another listen_notices took the fabric over: its writes count
                log.warning("notice listener of fabric %s: stopped: %s", self.fabric_id, exc)
                self._set(state="down", error=str(exc), pid=None)
                self._stop_event.set()
            except LookupError as exc:
                self._set(state="starting", error=str(exc), pid=None)
            except Exception as exc:  # never let a bug end the listening for good
                log.exception("notice listener of fabric %s failed", self.fabric_id)
                self._set(state="down", error=f"{type(exc).__name__}: {exc}", pid=None)
            finally:
                if self.child is not None:
                    self.child.close()
                    self.child = None
                close_old_connections()
            if time.monotonic() - started > 60:
                backoff = 1.0
            attempt += 1
            self._stop_event.wait(backoff)
            backoff = min(backoff * 2, 30.0)
        self.repeats.flush()

    def _set(self, **kw) -> None:
        for k, v in kw.items():
            setattr(self.status, k, v)
        self.status.updated = time.time()
        try:
            cache.set(status_key(self.fabric_id), self.status.as_dict(), STATUS_TTL_S)
        except Exception:  # the cache is down: the status is only informative
            log.debug("notice status not cached", exc_info=True)

    # -- one child ----------------------------------------------------------------------------

    def _fabric(self) -> Fabric:
        close_old_connections()
        return Fabric.objects.get(pk=self.fabric_id)

    def _session(self, attempt: int) -> None:
        fabric = self._fabric()
        argv, env, sim_host = listener_command(fabric, attempt, self.traps)
        self.child = NoticeChild(argv, env, self.repeats)
        self.status.fabric = fabric.name
        self._set(state="starting", sim_host=sim_host, pid=self.child.proc.pid, error="")
        self._fallback_at = time.monotonic() + self.interval
        heartbeat = 0.0
        while not self.stopped:
            msg = self._backlog.pop(0) if self._backlog else self.child.get(0.1)
            try:
                if msg is not None:
                    self._on_message(msg)
                self._due(time.monotonic())
            except DatabaseError as exc:  # SQLite busy, a PostgreSQL failover: keep the child, retry
                log.warning(
                    "fabric %s: database error while applying a notice (%s); retrying", self.fabric_id, exc
                )
                close_old_connections()
                self._stop_event.wait(0.2)
            now = time.monotonic()
            if now - heartbeat > 10:
                heartbeat = now
                self._set()

    def _due(self, now: float) -> None:
        """Run the one piece of work that is due (each step keeps its request until it succeeded)."""
        if self._refresh and now >= self._refresh_at:
            self._do_refresh()
        elif self._recheck and now >= self._recheck_at:
            self._do_recheck()
        elif self._discover_at and now >= self._discover_at:
            self._do_discover()
        elif self._watch_sm:
            self._do_watch()
            self._watch_sm = False
        elif self.fallback != "off" and self._verify_at and now >= self._verify_at:
            self._do_fallback(f"port-state check after {self._verify_why}")
            self._verify_at = 0.0
        elif self.fallback != "off" and now >= self._fallback_at:
            notices_work = self.fallback == "auto" and self.status.state == "subscribed"
            self._do_fallback("port-state check (SM notices confirmed)" if notices_work
                              else "port-state fallback (no SM notices)")  # fmt: skip
            self._fallback_at = now + (self.verify_s if notices_work else self.interval)

    def _want_verify(self, why: str) -> None:
        if not self._verify_at:
            self._verify_why = why
            self._verify_at = time.monotonic() + VERIFY_DELAY_S

    def _on_message(self, msg: dict) -> None:
        kind = msg.get("type")
        if kind == "ready":
            self._set(
                sm_lid=msg.get("sm_lid"), sm_client_guid=msg.get("port_guid", "") if msg.get("issm") else ""
            )
        elif kind == "subscribed":
            ok = bool(msg.get("ok"))
            self._set(state="subscribed" if ok else "unsubscribed", sm_lid=msg.get("sm_lid"),
                      subscribed_at=time.time(), traps=msg.get("traps") or {})  # fmt: skip
            if ok:  # working again: a later failure is news, not a repeat (the counts so far logged)
                self.repeats.flush()
            else:
                log.warning("fabric %s: SM notices not confirmed (%s); port-state fallback %s",
                            self.status.fabric, msg.get("traps"), self.fallback)  # fmt: skip
        elif kind == "sm":
            log.info("fabric %s: %s (SM LID %s → %s)", self.status.fabric, msg.get("reason"),
                     msg.get("previous"), msg.get("sm_lid"))  # fmt: skip
            self._set(state="starting", sm_lid=msg.get("sm_lid"))
            self._watch_sm = True
        elif kind == "notice":
            self._on_notice(msg)
        elif kind in ("path", "sweep"):  # a Report may have been lost on a broken route
            self._want_verify("the SM " + ("swept the subnet" if kind == "sweep" else "answered late"))
        elif kind == "error":
            self.repeats.warning("notice listener of %s: %s", self.status.fabric, msg.get("message"))
            if msg.get("fatal"):
                raise ChildGone(msg.get("message", "fatal error"))

    def _on_notice(self, msg: dict) -> None:
        trap = msg.get("trap")
        self._set(notices=self.status.notices + 1, last_notice_at=msg.get("received") or time.time())
        why = f"SM notice: trap {trap} from LID {msg.get('issuer_lid')}"
        if trap == 128 or trap in ERROR_TRAPS:
            lid = msg.get("lid") or msg.get("issuer_lid")
            if lid:
                # the first notice of a batch sets its time (a switch waiting to be read again
                # comes along earlier)
                at = time.monotonic() + BATCH_S
                self._refresh_at = min(self._refresh_at, at) if self._refresh else at
                self._refresh[int(lid)] = why
            if trap in ERROR_TRAPS:
                record_error_trap(self._fabric(), msg, fence=self.fence)
        elif trap in (64, 65):
            self._want_discovery(why)
        elif trap == 144 and (msg.get("details") or {}).get("change_flags", 0) & 0x1:
            self._want_discovery(why + " (node description changed)")

    def _want_discovery(self, why: str) -> None:
        if not self._discover_at:
            self._discover_why = why
        self._discover_at = time.monotonic() + DISCOVERY_DELAY_S

    # -- reads and writes ---------------------------------------------------------------------

    def portinfo(
        self, targets: dict[int, list[int]]
    ) -> tuple[dict[tuple[int, int], tuple[int, int]], int, dict[int, str | None]]:
        """Read PortInfo of ``targets`` ``{lid: [port, ...]}`` through the child (and NodeInfo of
        each LID). Returns ``({(lid, port): (state, phys_state)}, MADs sent, {lid: node GUID or
        None})``; ports that did not answer are absent. Messages arriving meanwhile are kept for
        the loop."""
        req = self.child.next_id()
        self.child.send(
            {"cmd": "portinfo", "id": req, "targets": [[lid, ports] for lid, ports in targets.items()]}
        )
        n = sum(len(p) for p in targets.values())
        deadline = time.monotonic() + 10 + n * 0.01
        while time.monotonic() < deadline and not self.stopped:
            msg = self.child.get(0.2)
            if msg is None:
                continue
            if msg.get("type") == "portinfo" and msg.get("id") == req:
                states = {(p[0], p[1]): (p[2], p[3]) for p in msg.get("ports", []) if p[2] is not None}
                nodes = {int(lid): guid for lid, guid in (msg.get("nodes") or {}).items()}
                return states, int(msg.get("mads", n)), nodes
            self._backlog.append(msg)
        return {}, n, {}

    def _apply(
        self,
        fabric: Fabric,
        states: dict[tuple[int, int], tuple[int, int]],
        note: str,
        nodes: dict[int, str | None] | None = None,
        *,
        recheck: bool = False,
    ) -> PortRefresh:
        """Hand the states read to the ingest; a LID answered by another node than the stored
        switch (the SM moved LIDs) is not applied but asks for a discovery. A ``recheck`` (a port
        coming up, read again every :data:`RECHECK_S`) asks a discovery for a port linked without
        a stored link only the first time it is seen so (a port stuck in Init, its peer down,
        asked one on every recheck: a discovery storm)."""
        guid_of = dict(
            Node.objects.filter(
                fabric=fabric, node_type=NodeType.SWITCH, lid__in={lid for lid, _ in states}
            ).values_list("lid", "node_guid")
        )
        moved = sorted(
            lid for lid, guid in (nodes or {}).items() if guid and guid_of.get(lid) not in (None, guid)
        )
        if moved:
            self._want_discovery(f"{note}: LID {', '.join(map(str, moved))} answered by another node")
        observed = {
            (guid_of[lid], port): PortObservation(state, phys)
            for (lid, port), (state, phys) in states.items()
            if lid in guid_of and lid not in moved
        }
        result = apply_port_states(fabric, observed, note=note, fence=self.fence)
        came_up = result.came_up
        if recheck:
            came_up = [k for k in came_up if k not in self._asked_up]
        # a port read as anything else (down again, or its link stored) asks again next time
        now_up = set(result.came_up)
        self._asked_up = {k for k in self._asked_up if k not in observed or k in now_up} | now_up
        if came_up or result.isolated or result.unknown:
            reasons = [
                text
                for text, hit in (
                    ("a port came up", came_up),
                    (f"{', '.join(result.isolated)} lost its last link", result.isolated),
                    ("a port not stored answered", result.unknown),
                )
                if hit
            ]
            self._want_discovery(f"{note}: {'; '.join(reasons)}")
        for (lid, _port), (state, _phys) in states.items():
            if state in (PortState.INIT, PortState.ARMED):
                self._recheck.setdefault(lid, RECHECKS)
                self._recheck_at = time.monotonic() + RECHECK_S
        return result

    def _targets(self, fabric: Fabric, lids: list[int]) -> dict[int, list[int]]:
        rows = dict(
            Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH, lid__in=lids).values_list(
                "lid", "num_ports"
            )
        )
        unknown = [lid for lid in lids if lid not in rows]
        if unknown:
            self._want_discovery(f"SM notice from LID {', '.join(map(str, unknown))}, no switch known there")
        return {lid: list(range(1, n + 1)) for lid, n in rows.items() if n}

    def _do_refresh(self) -> None:
        """Read PortInfo of every port of the switches notices named and apply it. A switch that
        left a port unanswered stays asked for: read again every :data:`REREAD_S` seconds, for up
        to :data:`REREAD_FOR_S` seconds, then a discovery (a notice is never dropped unread)."""
        lids = dict(self._refresh)
        fabric = self._fabric()
        targets = self._targets(fabric, sorted(lids))
        unread: set[int] = set()
        if targets:
            states, _mads, nodes = self.portinfo(targets)
            self._apply(fabric, states, "; ".join(sorted(set(lids.values()))), nodes)
            self._set(refreshes=self.status.refreshes + 1)
            unread = {lid for lid, ports in targets.items() if any((lid, p) not in states for p in ports)}
        now = time.monotonic()
        newer = False
        for lid in lids:
            if self._refresh.get(lid) != lids[lid]:
                newer = True  # a notice that arrived meanwhile stays, read at once
                continue
            if lid not in unread:
                del self._refresh[lid]
                self._reread_until.pop(lid, None)
            elif lid not in self._reread_until:
                self._reread_until[lid] = now + REREAD_FOR_S
                log.info("fabric %s: switch LID %s did not answer every PortInfo after an SM notice; "
                         "reading it again", fabric.name, lid)  # fmt: skip
            elif now >= self._reread_until[lid]:
                del self._refresh[lid]
                del self._reread_until[lid]
                self._want_discovery(f"{lids[lid]}: switch LID {lid} did not answer PortInfo for "
                                     f"{REREAD_FOR_S:g} s")  # fmt: skip
        self._refresh_at = now if newer else now + REREAD_S

    def _do_recheck(self) -> None:
        lids = []
        for lid, left in list(self._recheck.items()):
            if left <= 1:
                del self._recheck[lid]
            else:
                self._recheck[lid] = left - 1
                lids.append(lid)
        fabric = self._fabric()
        targets = self._targets(fabric, lids)
        self._recheck_at = time.monotonic() + RECHECK_S
        if not targets:
            return
        states, _, nodes = self.portinfo(targets)
        for lid in targets:
            if not any(
                s in (PortState.INIT, PortState.ARMED) for (sl, _), (s, _) in states.items() if sl == lid
            ):
                self._recheck.pop(lid, None)
        self._apply(fabric, states, "port states read again (a port was coming up)", nodes, recheck=True)

    def _do_discover(self) -> None:
        """Start the discovery asked for, in its own thread: a large fabric's ``ibnetdiscover``
        takes seconds (Selene ~15 s), and notices must keep being applied meanwhile. One at a time;
        one asked for while another runs starts after it (the running one may predate the notice).
        A notice refresh committed meanwhile is newer than the discovery's snapshot: the ingest
        keeps what it wrote (``fabric.services.ingest.Reach.fresher``)."""
        running = self._discovery
        if running is not None and running.is_alive():
            self._discover_at = time.monotonic() + 0.2
            return
        self._discover_at = 0.0
        self._discovery = threading.Thread(
            target=self._discover_once, args=(self._discover_why,), name=f"weft-notices-discover-{self.fabric_id}",
            daemon=True,
        )  # fmt: skip
        self._discovery.start()

    def _discover_once(self, why: str) -> None:
        try:
            fabric = self._fabric()
            with single_instance(
                f"fabric.discover.{fabric.pk}", float(fabric.discovery_timeout_s) + 120.0
            ) as mine:
                if (
                    not mine
                ):  # a periodic discovery runs: ours must start after it (it may predate the notice)
                    self._want_discovery(why)
                    return
                log.info("fabric %s: discovery after %s", fabric.name, why)
                try:
                    discover(fabric)
                except DiscoveryError as exc:  # recorded as a failed discovery (system.discovery_failing)
                    log.warning("fabric %s: discovery after a notice failed: %s", fabric.name, exc.reason)
            self._set(discoveries=self.status.discoveries + 1)
        except DatabaseError as exc:
            log.warning(
                "fabric %s: discovery after a notice: database error (%s); retrying", self.fabric_id, exc
            )
            self._want_discovery(why)
        except Exception:
            log.exception("fabric %s: discovery after a notice failed", self.fabric_id)
        finally:
            close_old_connections()

    def _do_watch(self) -> None:
        watch(self._fabric())

    def _do_fallback(self, note: str) -> None:
        fabric = self._fabric()
        targets = fallback_targets(fabric)
        if not targets:
            return
        states, mads, nodes = self.portinfo(targets)
        self._apply(fabric, states, note, nodes)
        self._set(fallback_reads=self.status.fallback_reads + 1, fallback_mads=mads)


class NoticeSupervisor(threading.Thread):
    """Keeps one :class:`NoticeListener` per live fabric this process leads (rescanned every
    ``rescan_s``, ``WEFT_NOTICE_RESCAN_S``): starts new ones, stops those of fabrics gone or no
    longer live, and restarts a listener whose fabric's access (``tool_env``, ``ca_name``...) changed.

    A fabric is listened to by one process at a time, its leader: the lease ``notices:<id>``
    (``core.leases``, PostgreSQL) that this supervisor's :class:`~core.leases.LeaseKeeper`
    campaigns for. Several ``listen_notices`` (on several hosts) share the fabrics; when the leader
    of a fabric dies, a standby takes it over within ``WEFT_LEASE_TTL_S`` (plus its poll), and a
    leader whose lease renewal fails stops its listener before its lease ends (fencing).
    """

    def __init__(self, *, rescan_s: float | None = None, **listener_kw) -> None:
        super().__init__(name="weft-notices", daemon=True)
        self.rescan_s = float(rescan_s or settings.WEFT_NOTICE_RESCAN_S)
        self.listener_kw = listener_kw
        self.listeners: dict[int, tuple[tuple, NoticeListener]] = {}
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._wake = threading.Event()
        self.leases = LeaseKeeper(on_elected=self._elected, on_lost=self._lost, name="weft-notices-leases")

    @staticmethod
    def role(fabric_id: int) -> str:
        """The lease role of a fabric's notice listener."""
        return f"notices:{fabric_id}"

    def _elected(self, role: str) -> None:
        self._wake.set()  # start its listener now, not at the next rescan

    def _lost(self, role: str) -> None:
        fabric_id = int(role.split(":", 1)[1])
        with self._lock:
            entry = self.listeners.pop(fabric_id, None)
        if entry is not None:
            log.warning("notice listener of fabric %s: leadership lost, stopping it", fabric_id)
            entry[1].stop()

    def run(self) -> None:
        self.leases.start()
        while not self._stop_event.is_set():
            try:
                self.rescan()
            except Exception:
                log.exception("notice supervisor: rescan failed")
            try:  # a dead beat (or trap receiver) is alarmed from here too
                check_roles()
            except DatabaseError as exc:
                log.warning("notice supervisor: role check failed: %s", exc)
            finally:
                close_old_connections()
            self._wake.wait(self.rescan_s)
            self._wake.clear()
        with self._lock:  # stopped here once (the leases' on_lost then finds none to stop again)
            entries = list(self.listeners.values())
            self.listeners.clear()
        for _, listener in entries:
            listener.stop()
        self.leases.stop()  # released: a standby takes over at its next poll

    def rescan(self) -> list[int]:
        """Start/stop listeners to match the live fabrics this process leads now; returns the
        fabric ids listened to."""
        wanted: dict[int, tuple] = {}
        for fabric in Fabric.objects.order_by("pk"):
            if is_live(fabric):
                wanted[fabric.pk] = (sorted((fabric.tool_env or {}).items()), fabric.ca_name, fabric.ca_port,
                                     fabric.local_hca)  # fmt: skip
        self.leases.want((self.role(i) for i in wanted), now=True)  # taken or renewed here too
        with self._lock:
            for fabric_id in list(self.listeners):
                access, listener = self.listeners[fabric_id]
                if wanted.get(fabric_id) != access or not listener.is_alive():
                    listener.stop()
                    del self.listeners[fabric_id]
            for fabric_id, access in wanted.items():
                if not self.leases.held(self.role(fabric_id)):  # another process leads it
                    if fabric_id in self.listeners:
                        self.listeners.pop(fabric_id)[1].stop()
                    continue
                if fabric_id in self.listeners:
                    continue
                fence = self.leases.fence(self.role(fabric_id))
                listener = NoticeListener(fabric_id, fence=fence, **self.listener_kw)
                self.listeners[fabric_id] = (access, listener)
                listener.start()
            return sorted(self.listeners)

    def stop(self, timeout: float = 10.0) -> None:
        self._stop_event.set()
        self._wake.set()
        for _, listener in list(self.listeners.values()):
            listener.stop()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)


_supervisor: NoticeSupervisor | None = None
_supervisor_lock = threading.Lock()


def start(**kw) -> NoticeSupervisor:
    """Start this process's supervisor (idempotent) and return it (``manage.py serve``)."""
    global _supervisor
    with _supervisor_lock:
        if _supervisor is None or not _supervisor.is_alive():
            _supervisor = NoticeSupervisor(**kw)
            _supervisor.start()
        return _supervisor


def stop() -> None:
    """Stop this process's supervisor and its listeners (children ended)."""
    global _supervisor
    with _supervisor_lock:
        sup, _supervisor = _supervisor, None
    if sup is not None:
        sup.stop()
