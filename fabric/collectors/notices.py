"""SM-notice listener: subscribe to the subnet manager's notices and read PortInfo, over libibumad.

Run as a long-lived child with the fabric's tool environment (so ``LD_PRELOAD=libumad2sim.so``
reaches an ibsim lab exactly as for the diags), driven by ``fabric.services.notices``::

    python -m fabric.collectors.notices [-C ca] [-P port] [--traps 64,65,128,...]

It writes one JSON object per line on stdout and reads JSON commands on stdin (EOF stops it):

* ``{"type": "ready", "lid", "port_guid", "sm_lid", "issm"}`` once its port is Active;
* ``{"type": "subscribed", "sm_lid", "traps": {"128": status, ...}, "ok"}`` after every
  (re)subscription (status 0 = accepted, -1 = no answer, else the SA's MAD status);
* ``{"type": "notice", "trap", "issuer_lid", "producer", "notice_type", "lid", "port", "gid",
  "details", "sm_lid", "received"}`` for every Report the SA sends (each answered with a
  ReportResp, IBTA 13.4.8.2/13.5.4.2);
* ``{"type": "sm", "sm_lid", "previous", "reason"}`` when the master SM moved, restarted or stopped
  answering (then it re-subscribes to the SM the port's MasterSMLID names);
* ``{"type": "path", "sm_lid", "reason"}`` when a check of the SM had to be resent, and (lab)
  ``{"type": "sweep", "sm_lid"}`` when the SM asked for this port's SMInfo (it does in its heavy
  sweeps): both hint that a Report may have been lost. The SA sends a Report once, to this port's
  LID, along the routes of the moment; when the failed cable lies on the SM's route to this
  port, the Report is dropped before the SM reroutes (OpenSM logs ``ERR 1A06 ... IB_TIMEOUT:
  SubnAdmReport``), so the driver reads port states again on these hints;
* command ``{"cmd": "portinfo", "id": n, "targets": [[lid, [port, ...]], ...]}`` → ``{"type":
  "portinfo", "id": n, "ports": [[lid, port, state, phys_state, width, speed] | [lid, port, null,
  "error"]], "nodes": {"<lid>": "0x<node guid>" | null}, "mads", "elapsed_s"}``: LID-routed
  SubnGet(NodeInfo) per LID (who answers there) and SubnGet(PortInfo) per port, ``window`` in flight;
* command ``{"cmd": "subscribe"}`` re-subscribes now.

MADs (IBTA Vol 1): SA MADs (class 0x03, version 2, 15.2.1) carry their data at byte 56:
``SubnAdmSet(InformInfo 0x0003)`` with GID 0, LIDRangeBegin 0xFFFF (all), IsGeneric 1, Subscribe
1, Type 0xFFFF, one TrapNumber, ProducerType 0xFFFFFF (13.4.8.3, Table 201); Reports arrive as
``SubnAdmReport(Notice 0x0002)`` (13.4.8.2, Table 199). SMPs (14.2.1) carry data at byte 64:
PortInfo (0x0015, 14.2.5.6): MasterSMLID bytes 18-19, LinkWidthActive 31, PortState low nibble
of 32, PortPhysicalState high nibble of 33, LinkSpeedActive high nibble of 35; SMInfo (0x0020,
14.2.5.13); NodeInfo (0x0011) PortGUID bytes 20-27. The master SM is checked every
``--check`` seconds (SMInfo of the SM, PortInfo:MasterSMLID of this port: 2 SMPs) and the
subscription renewed every ``--renew`` seconds (OpenSM merges an identical InformInfo, so this
is idempotent; it covers an SM restarted on the same LID that the ActCount check missed).

ibsim lab only (``--issm``): ibsim hands unsolicited MADs to clients attached as SM only, so the
lab runs this listener as an SM client on a CA other than OpenSM's (``SIM_HOST``); OpenSM then
polls its SMInfo, answered here as a NOTACTIVE SM (else OpenSM declares it dead and ibsim drops
the client). The SM flag is raised by opening ``/dev/infiniband/issm0`` (umad2sim's version of
the kernel's IsSM device) *after* every agent is registered: with ``SIM_SET_ISSM`` umad2sim
raises it when the library initialises, and an SMInfo request arriving before the DR agent
exists crashes umad2sim's receiver thread (it locks the queue of an unregistered class). On real
hardware a plain umad agent registered for SA Reports gets them, and no SMInfo request comes.

No Django import: pure apart from ctypes (``fabric.collectors.umad``).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .umad import MAD_SIZE, QKEY, Umad

SA_CLASS, SA_VERSION = 0x03, 2
SMP_LID_CLASS, SMP_DR_CLASS = 0x01, 0x81
GET, SET, REPORT, GET_RESP, REPORT_RESP = 0x01, 0x02, 0x06, 0x81, 0x86
ATTR_NOTICE, ATTR_INFORM_INFO = 0x0002, 0x0003
ATTR_NODE_INFO, ATTR_PORT_INFO, ATTR_SM_INFO = 0x0011, 0x0015, 0x0020
SA_DATA, SMP_DATA = 56, 64
PERMISSIVE_LID = 0xFFFF
#: The device whose opening marks the port as an SM's (umad2sim emulates it; lab only).
ISSM_DEVICE = "/dev/infiniband/issm0"
#: Traps subscribed by default (IBTA 13.4.8.2 Table 199): 64/65 GID in/out of service, 128 link
#: state change, 129/130/131 local link integrity / excessive buffer overrun / flow-control update
#: watchdog, 144 capability mask (and node description) change.
DEFAULT_TRAPS = (64, 65, 128, 129, 130, 131, 144)


def build_sa(tid: int, method: int, attr: int, data: bytes = b"", attr_mod: int = 0) -> bytearray:
    """A 256-byte SA MAD (class 0x03, version 2): common header, RMPP header 0, SM_Key 0,
    ComponentMask 0, ``data`` at byte 56."""
    mad = bytearray(MAD_SIZE)
    struct.pack_into(">BBBBHHQHHI", mad, 0, 1, SA_CLASS, SA_VERSION, method, 0, 0, tid, attr, 0, attr_mod)
    mad[SA_DATA : SA_DATA + len(data)] = data
    return mad


def inform_info(trap: int, subscribe: bool = True) -> bytes:
    """InformInfo (IBTA 13.4.8.3, 36 bytes) for generic notices of ``trap`` from any producer/LID."""
    return struct.pack(
        ">16sHHHBBHHIBBH",
        bytes(16),  # GID 0: use the LID range
        0xFFFF,  # LIDRangeBegin: all
        0,  # LIDRangeEnd
        0,
        1,  # IsGeneric
        1 if subscribe else 0,
        0xFFFF,  # Type: all
        trap,  # TrapNumber
        0,  # QPN (the SA takes the requester's) / RespTimeValue
        0,
        0xFF,  # ProducerType 0xFFFFFF: all
        0xFFFF,
    )


def build_smp(
    tid: int, attr: int, attr_mod: int = 0, *, directed: bool = False, method: int = GET
) -> bytearray:
    """A 256-byte SubnGet SMP: LID-routed (class 0x01), or directed-route to the local port
    (class 0x81, hop count 0, DrSLID/DrDLID permissive)."""
    mad = bytearray(MAD_SIZE)
    cls = SMP_DR_CLASS if directed else SMP_LID_CLASS
    struct.pack_into(">BBBBHHQHHI", mad, 0, 1, cls, 1, method, 0, 0, tid, attr, 0, attr_mod)
    if directed:
        struct.pack_into(">HH", mad, 32, PERMISSIVE_LID, PERMISSIVE_LID)
    return mad


def decode_port_info(data: bytes) -> dict[str, int]:
    """The PortInfo fields the listener uses (IBTA 14.2.5.6), from the 64-byte attribute."""
    return {
        "lid": struct.unpack_from(">H", data, 16)[0],
        "sm_lid": struct.unpack_from(">H", data, 18)[0],
        "width": data[31],
        "state": data[32] & 0x0F,
        "phys_state": data[33] >> 4,
        "speed": data[35] >> 4,
    }


def decode_notice(n: bytes) -> dict:
    """Decode a Notice (IBTA 13.4.8.2, 80 bytes) into a JSON-able dict.

    ``lid``/``port`` name what the trap is about (trap 128: the switch LID; 129-131: LID and port
    of the violation; 144: the LID whose capabilities changed); ``gid`` the port GID of traps
    64-67 (``fe80...:<port guid>``).
    """
    generic = bool(n[0] >> 7)
    out = {
        "generic": generic,
        "notice_type": n[0] & 0x7F,
        "producer": int.from_bytes(n[1:4], "big"),
        "trap": struct.unpack_from(">H", n, 4)[0],
        "issuer_lid": struct.unpack_from(">H", n, 6)[0],
        "lid": None,
        "port": None,
        "gid": None,
        "details": {},
    }
    d = n[10:64]
    trap = out["trap"] if generic else -1
    if trap == 128:
        out["lid"] = struct.unpack_from(">H", d, 0)[0]
    elif trap in (129, 130, 131):
        out["lid"] = struct.unpack_from(">H", d, 2)[0]
        out["port"] = d[4]
    elif trap == 144:
        out["lid"] = struct.unpack_from(">H", d, 2)[0]
        cap, flags, cap2 = struct.unpack_from(">IHH", d, 6)
        out["details"] = {"local_changes": d[5] & 1, "capability_mask": cap, "change_flags": flags,
                          "capability_mask2": cap2}  # fmt: skip
    elif trap in (64, 65, 66, 67):
        gid = d[6:22]
        out["gid"] = f"0x{gid[:8].hex()}:0x{gid[8:].hex()}"
        out["details"] = {"port_guid": f"0x{gid[8:].hex()}"}
    return out


@dataclass
class _Request:
    agent: int
    lid: int
    qpn: int
    qkey: int
    mad: bytearray
    deadline: float
    tries: int
    done: Callable[[int, bytes | None], None]  # (MAD status or -1 for no answer, MAD)
    on_resend: Callable[[], None] | None = None  # called once, at the first resend


class Listener:
    """The listener's event loop (see the module docstring). ``umad`` is an open :class:`Umad`
    whose first agent is the SA's; ``issm`` answers SMInfo requests (ibsim lab). ``emit`` writes
    one JSON line."""

    def __init__(
        self,
        umad: Umad,
        *,
        traps: tuple[int, ...] = DEFAULT_TRAPS,
        issm: bool = False,
        timeout_s: float = 1.0,
        retries: int = 2,
        window: int = 32,
        check_s: float = 1.0,
        renew_s: float = 60.0,
        emit: Callable[[dict], None] | None = None,
    ) -> None:
        self.umad = umad
        self.sa = umad.agent
        self.smp = umad.register(SMP_LID_CLASS, 1, (GET,) if issm else ())
        self.dr = umad.register(SMP_DR_CLASS, 1, (GET,) if issm else ())
        self.issm_fd: int | None = None  # opened in start(), once this port's GUID is known
        self.last_sweep_note = 0.0
        self.traps = tuple(traps)
        self.issm = issm
        self.timeout_s = timeout_s
        self.retries = retries
        self.window = window
        self.check_s = check_s
        self.renew_s = renew_s
        self.emit = emit or _emit
        self.pending: dict[int, _Request] = {}
        self.waiting: list[tuple] = []  # requests beyond the window: (args, kwargs)
        self.tid = int.from_bytes(os.urandom(2), "big") << 16
        self.commands: queue.Queue = queue.Queue()
        self.stopped = False
        self.lid = 0
        self.port_guid = 0
        self.sm_lid = 0
        self.sm_guid = 0
        self.sm_count = -1
        self.subscribed_at = 0.0
        self.next_check = 0.0
        self.sm_answers = 0

    # -- requests -----------------------------------------------------------------------------

    def _next_tid(self) -> int:
        self.tid = (self.tid + 1) & 0xFFFFFFFF or 1
        return self.tid

    def request(
        self, agent: int, lid: int, mad: bytearray, done, *, qpn: int = 0, qkey: int = 0, on_resend=None
    ) -> None:
        """Send a request MAD (its TID is set here) and call ``done(status, mad)`` on the answer
        (status = the MAD status, -1 after ``retries`` resends without one); ``on_resend()`` when
        it had to be sent again."""
        if len(self.pending) >= self.window:
            self.waiting.append((agent, lid, mad, done, qpn, qkey, on_resend))
            return
        tid = self._next_tid()
        struct.pack_into(">Q", mad, 8, tid)
        req = _Request(agent, lid, qpn, qkey, mad, time.monotonic() + self.timeout_s, 0, done, on_resend)
        self.pending[tid] = req
        self._send(req)

    def _send(self, req: _Request) -> None:
        try:
            self.umad.send_to(req.agent, req.lid, bytes(req.mad), qpn=req.qpn, qkey=req.qkey)
        except OSError as exc:
            self.emit({"type": "error", "message": f"send failed: {exc}"})

    def _expire(self) -> None:
        now = time.monotonic()
        for tid, req in list(self.pending.items()):
            if req.deadline > now:
                continue
            if req.tries < self.retries:
                if req.tries == 0 and req.on_resend is not None:
                    req.on_resend()
                req.tries += 1
                req.deadline = now + self.timeout_s
                self._send(req)
                continue
            del self.pending[tid]
            req.done(-1, None)
        while self.waiting and len(self.pending) < self.window:
            agent, lid, mad, done, qpn, qkey, on_resend = self.waiting.pop(0)
            self.request(agent, lid, mad, done, qpn=qpn, qkey=qkey, on_resend=on_resend)

    # -- incoming -------------------------------------------------------------------------------

    def poll(self, timeout_ms: int) -> None:
        """Receive and handle at most one MAD (waiting up to ``timeout_ms``), then expire requests."""
        got = self.umad.recv_from(timeout_ms)
        if got is not None:
            self._handle(*got)
        self._expire()

    def _handle(self, agent: int, ustatus: int, src_lid: int, src_qpn: int, mad: bytes) -> None:
        cls, method = mad[1], mad[3]
        attr = struct.unpack_from(">H", mad, 16)[0]
        if method & 0x80 or ustatus:  # a response, or our own request back with a send error
            tid = struct.unpack_from(">Q", mad, 8)[0] & 0xFFFFFFFF
            req = self.pending.pop(tid, None)
            if req is None:
                return
            if ustatus:
                req.done(-1, None)
            else:
                req.done(struct.unpack_from(">H", mad, 4)[0] & 0x7FFF, mad)
            return
        if cls == SA_CLASS and method == REPORT and attr == ATTR_NOTICE:
            self._report(src_lid, src_qpn, mad)
        elif cls in (SMP_LID_CLASS, SMP_DR_CLASS) and method == GET and attr == ATTR_SM_INFO:
            self._answer_sm_info(cls, src_lid, mad)

    def _report(self, src_lid: int, src_qpn: int, mad: bytes) -> None:
        resp = bytearray(mad)
        resp[3] = REPORT_RESP
        struct.pack_into(">H", resp, 4, 0)
        try:  # the SA resends an unanswered Report (IBTA 13.5.4.2)
            self.umad.send_to(self.sa, src_lid, bytes(resp), qpn=src_qpn or 1, qkey=QKEY, timeout_ms=0)
        except OSError as exc:
            self.emit({"type": "error", "message": f"ReportResp failed: {exc}"})
        notice = decode_notice(mad[SA_DATA : SA_DATA + 80])
        notice.update(type="notice", sm_lid=src_lid, received=time.time())
        self.emit(notice)

    def _answer_sm_info(self, cls: int, src_lid: int, mad: bytes) -> None:
        """Answer an SM's SubnGet(SMInfo) as a NOTACTIVE SM of priority 0 (lab only, see module).
        OpenSM asks during its heavy sweeps, i.e. after a topology change: emits ``sweep`` (at
        most twice a second), the hint that a Report may have been lost on a broken route."""
        self.sm_answers += 1
        now = time.monotonic()
        if now - self.last_sweep_note > 0.5:
            self.last_sweep_note = now
            self.emit({"type": "sweep", "sm_lid": src_lid if cls == SMP_LID_CLASS else self.sm_lid})
        resp = bytearray(mad)
        resp[3] = GET_RESP
        if cls == SMP_DR_CLASS:
            resp[4] |= 0x80  # direction bit: returning
        resp[SMP_DATA : SMP_DATA + 64] = bytes(64)
        struct.pack_into(
            ">QQIB", resp, SMP_DATA, self.port_guid, 0, 0, 0
        )  # GUID, SM_Key, ActCount, prio/state
        agent = self.dr if cls == SMP_DR_CLASS else self.smp
        lid = PERMISSIVE_LID if cls == SMP_DR_CLASS else src_lid
        try:
            self.umad.send_to(agent, lid, bytes(resp), qpn=0, qkey=0, timeout_ms=0)
        except OSError as exc:
            self.emit({"type": "error", "message": f"SMInfo answer failed: {exc}"})

    # -- the port, the SM, the subscription ---------------------------------------------------

    def wait(self, result: list, timeout_s: float) -> None:
        """Run the loop until ``result`` is non-empty or ``timeout_s`` passed."""
        deadline = time.monotonic() + timeout_s
        while not result and time.monotonic() < deadline:
            self.poll(50)

    def own_port(self) -> dict | None:
        """PortInfo of this port (directed route, hop 0), or None without an answer."""
        got: list = []
        self.request(self.dr, PERMISSIVE_LID, build_smp(0, ATTR_PORT_INFO, directed=True),
                     lambda st, mad: got.append(decode_port_info(mad[SMP_DATA:]) if st == 0 else None))  # fmt: skip
        self.wait(got, self.timeout_s * (self.retries + 2))
        return got[0] if got else None

    def start(self) -> None:
        """Wait until this port is Active with a LID and an SM, read its GUID, subscribe."""
        while not self.stopped:
            info = self.own_port()
            if info and info["state"] == 4 and info["lid"] and info["sm_lid"]:
                break
            self._commands()
            time.sleep(0.5)
        if self.stopped:
            return
        got: list = []
        self.request(self.dr, PERMISSIVE_LID, build_smp(0, ATTR_NODE_INFO, directed=True),
                     lambda st, mad: got.append(mad if st == 0 else None))  # fmt: skip
        self.wait(got, self.timeout_s * (self.retries + 2))
        if got and got[0] is not None:
            self.port_guid = struct.unpack_from(">Q", got[0], SMP_DATA + 20)[0]
        if self.issm and self.issm_fd is None:
            self.issm_fd = _open_issm()  # raises the SM flag: OpenSM asks for our SMInfo from now on
        self.lid, self.sm_lid = info["lid"], info["sm_lid"]
        self.emit({"type": "ready", "lid": self.lid, "port_guid": f"0x{self.port_guid:016x}",
                   "sm_lid": self.sm_lid, "issm": self.issm})  # fmt: skip
        self.subscribe()

    def subscribe(self) -> None:
        """SubnAdmSet(InformInfo) for every trap to the current SM; emits ``subscribed`` when all
        are answered (or timed out)."""
        statuses: dict[str, int] = {}
        sm_lid = self.sm_lid

        def done(trap: int, status: int, mad) -> None:
            if status == 0 and mad is not None and mad[SA_DATA + 23] != 1:
                status = 0x100  # answered, but Subscribe came back 0: refused
            statuses[str(trap)] = status
            if len(statuses) == len(self.traps):
                self.subscribed_at = time.monotonic()
                ok = all(v == 0 for v in statuses.values())
                self.emit({"type": "subscribed", "sm_lid": sm_lid, "traps": statuses, "ok": ok})

        for trap in self.traps:
            mad = build_sa(0, SET, ATTR_INFORM_INFO, inform_info(trap))
            self.request(self.sa, sm_lid, mad, lambda st, m, t=trap: done(t, st, m), qpn=1, qkey=QKEY)
        self.subscribed_at = time.monotonic()

    def check_sm(self) -> None:
        """Compare the SM with the one subscribed to (2 SMPs); re-subscribe when it moved,
        restarted (ActCount went back) or the subscription is older than ``renew_s``."""
        sm_lid = self.sm_lid

        def sm_info(status: int, mad) -> None:
            if status != 0 or mad is None or self.sm_lid != sm_lid:
                return
            guid, _key, count = struct.unpack_from(">QQI", mad, SMP_DATA)
            restarted = guid != self.sm_guid or count < self.sm_count
            first = self.sm_count < 0
            self.sm_guid, self.sm_count = guid, count
            if restarted and not first:
                self.emit({"type": "sm", "sm_lid": sm_lid, "previous": sm_lid,
                           "reason": "the master SM restarted (new GUID or ActCount reset)"})  # fmt: skip
                self.subscribe()

        def port_info(status: int, mad) -> None:
            if status != 0 or mad is None:
                return
            info = decode_port_info(mad[SMP_DATA:])
            if info["sm_lid"] and info["sm_lid"] != self.sm_lid:
                previous, self.sm_lid = self.sm_lid, info["sm_lid"]
                self.sm_guid, self.sm_count = 0, -1
                self.emit({"type": "sm", "sm_lid": self.sm_lid, "previous": previous,
                           "reason": "PortInfo:MasterSMLID changed (SM failover or handover)"})  # fmt: skip
                self.subscribe()

        def resent() -> None:  # the route to the SM broke for a moment: a Report may be lost
            self.emit({"type": "path", "sm_lid": sm_lid, "reason": "the SM did not answer at once"})

        self.request(self.smp, sm_lid, build_smp(0, ATTR_SM_INFO), sm_info, on_resend=resent)
        self.request(self.dr, PERMISSIVE_LID, build_smp(0, ATTR_PORT_INFO, directed=True), port_info)
        if self.renew_s and time.monotonic() - self.subscribed_at > self.renew_s:
            self.subscribe()

    # -- commands -------------------------------------------------------------------------------

    def read_port_info(self, req_id, targets: list) -> None:
        """Queue SubnGet(NodeInfo) of each LID of ``targets`` ``[[lid, [port, ...]], ...]`` (whose
        node answers there: LIDs move when an SM reassigns them) and SubnGet(PortInfo) of each
        port; emits one ``portinfo`` line, with ``nodes`` ``{lid: node GUID}``, when every answer
        (or timeout) is in."""
        t0 = time.monotonic()
        lids = [int(lid) for lid, _ in targets]
        wanted = [(int(lid), int(port)) for lid, ports in targets for port in ports]
        out: list = []
        nodes: dict[str, str | None] = {}
        total = len(wanted) + len(lids)
        if not wanted:
            self.emit(
                {"type": "portinfo", "id": req_id, "ports": [], "nodes": {}, "mads": 0, "elapsed_s": 0.0}
            )
            return

        def finish() -> None:
            if len(out) + len(nodes) == total:
                self.emit({"type": "portinfo", "id": req_id, "ports": out, "nodes": nodes, "mads": total,
                           "elapsed_s": round(time.monotonic() - t0, 4)})  # fmt: skip

        def node_done(lid: int, status: int, mad) -> None:
            ok = status == 0 and mad is not None
            nodes[str(lid)] = f"0x{struct.unpack_from('>Q', mad, SMP_DATA + 12)[0]:016x}" if ok else None
            finish()

        def done(lid: int, port: int, status: int, mad) -> None:
            if status == 0 and mad is not None:
                p = decode_port_info(mad[SMP_DATA:])
                out.append([lid, port, p["state"], p["phys_state"], p["width"], p["speed"]])
            else:
                out.append([lid, port, None, "no answer" if status < 0 else f"MAD status 0x{status:x}"])
            finish()

        for lid in lids:
            self.request(
                self.smp, lid, build_smp(0, ATTR_NODE_INFO), lambda st, m, lid=lid: node_done(lid, st, m)
            )
        for lid, port in wanted:
            self.request(self.smp, lid, build_smp(0, ATTR_PORT_INFO, port),
                         lambda st, m, lid=lid, port=port: done(lid, port, st, m))  # fmt: skip

    def _commands(self) -> None:
        while True:
            try:
                line = self.commands.get_nowait()
            except queue.Empty:
                return
            if line is None:
                self.stopped = True
                return
            try:
                cmd = json.loads(line)
            except ValueError:
                self.emit({"type": "error", "message": f"bad command {line[:80]!r}"})
                continue
            if cmd.get("cmd") == "portinfo":
                self.read_port_info(cmd.get("id"), cmd.get("targets") or [])
            elif cmd.get("cmd") == "subscribe":
                self.subscribe()

    def run(self) -> int:
        """Start, then serve until stdin closes. Returns the exit status."""
        self.start()
        while not self.stopped:
            self.poll(50)
            self._commands()
            now = time.monotonic()
            if now >= self.next_check:
                self.next_check = now + self.check_s
                self.check_sm()
        return 0


def _open_issm() -> int:
    """Open :data:`ISSM_DEVICE` through the C library's ``open`` (the symbol umad2sim wraps;
    Python's ``os.open`` calls ``open64``). Returns the fd; raises OSError."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.open(ISSM_DEVICE.encode(), os.O_RDWR)
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{ISSM_DEVICE}: {os.strerror(err)}")
    return fd


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _read_stdin(commands: queue.Queue) -> None:
    for line in sys.stdin:
        if line.strip():
            commands.put(line)
    commands.put(None)


def main(argv: list[str] | None = None) -> int:
    """Entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-C", dest="ca", default=None)
    ap.add_argument("-P", dest="port", type=int, default=None)
    ap.add_argument("--traps", default=",".join(map(str, DEFAULT_TRAPS)))
    ap.add_argument("--timeout", type=float, default=1.0, help="per-MAD timeout, seconds")
    ap.add_argument("--window", type=int, default=32, help="PortInfo SMPs in flight")
    ap.add_argument("--check", type=float, default=1.0, help="seconds between master-SM checks")
    ap.add_argument("--renew", type=float, default=60.0, help="seconds between subscription renewals")
    ap.add_argument("--issm", action="store_true", help="ibsim lab: attach as an SM client (see above)")
    args = ap.parse_args(argv)
    issm = args.issm
    if os.environ.get("SIM_SET_ISSM"):
        _emit({"type": "error", "fatal": True,
               "message": "SIM_SET_ISSM must not be set (see --issm in the module docstring)"})  # fmt: skip
        return 2
    try:
        # the SA agent receives Reports unsolicited (kernel method mask); umad2sim routes by class
        umad = Umad(args.ca, args.port, int(args.timeout * 1000), SA_CLASS, SA_VERSION, (REPORT,))
        listener = Listener(
            umad,
            traps=tuple(int(t) for t in args.traps.split(",") if t.strip()),
            issm=issm,
            timeout_s=args.timeout,
            window=args.window,
            check_s=args.check,
            renew_s=args.renew,
        )
    except OSError as exc:
        _emit({"type": "error", "message": str(exc), "fatal": True})
        return 3
    threading.Thread(target=_read_stdin, args=(listener.commands,), daemon=True).start()
    return listener.run()


if __name__ == "__main__":
    sys.exit(main())
