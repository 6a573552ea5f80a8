"""Minimal libibumad binding (rdma-core ``umad.h``) through ctypes, shared by Weft's MAD programs.

The counter poller (``telemetry.collectors.madpoll``: PerfMgt GMPs) and the SM-notice listener
(``fabric.collectors.notices``: SA InformInfo/Report, SMPs) both open one umad port and speak the
kernel's ``ib_user_mad`` ABI (``include/uapi/rdma/ib_user_mad.h``) on its fd: a 64-byte header
(agent id, status, timeout_ms, retries, length, then the address: QPN, Q_Key, LID, SL, GRH...),
then the 256-byte MAD. Under ``LD_PRELOAD=libumad2sim.so`` the same calls reach an ibsim lab.

Pure Python apart from ctypes; no Django import (these programs run as children with the fabric's
tool environment).
"""

from __future__ import annotations

import ctypes
import os
import struct

MAD_SIZE = 256
QKEY = 0x80010000  # the well-known GSI Q_Key (IBTA Vol 1, 13.5.1)
PERF_CLASS = 0x04

# ib_user_mad_hdr offsets (kernel ABI): id, status, timeout_ms, retries, length are host-order u32;
# qpn, qkey network-order u32 at 20/24, lid network-order u16 at 28.
_HDR_STATUS, _HDR_QPN, _HDR_LID = 4, 20, 28
_STATUS = struct.Struct("=I")


class Umad:
    """One open umad port with one registered agent (``mgmt_class``/``class_version``; PerfMgt
    version 1 by default, as the counter poller uses it; ``methods`` as in :meth:`register`);
    more agents with :meth:`register`.

    ``ca``/``port``: the HCA and port (None/0: libibumad's default); ``timeout_ms`` is written in
    every send header so a real kernel matches the response and reports a timeout in ``status``
    (umad2sim ignores it, so callers keep their own deadline too).

    Raises:
        OSError: no RDMA stack, the port cannot be opened or the agent not registered.
    """

    def __init__(
        self,
        ca: str | None,
        port: int | None,
        timeout_ms: int,
        mgmt_class: int = PERF_CLASS,
        class_version: int = 1,
        methods: tuple[int, ...] = (),
    ) -> None:
        self.lib = ctypes.CDLL("libibumad.so.3", use_errno=True)
        lib = self.lib
        lib.umad_recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        lib.umad_register.argtypes = [
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_uint8,
            ctypes.c_void_p,
        ]
        lib.umad_open_port.argtypes = [ctypes.c_char_p, ctypes.c_int]
        if lib.umad_init() < 0:
            raise OSError("umad_init failed (no RDMA stack?)")
        self.fd = lib.umad_open_port(ca.encode() if ca else None, int(port or 0))
        if self.fd < 0:
            raise OSError(f"umad_open_port({ca!r}, {port}) failed: {os.strerror(-self.fd)}")
        self.timeout_ms = timeout_ms
        self.hdr = lib.umad_size()
        self.agent = self.register(mgmt_class, class_version, methods)
        self.sbuf = bytearray(self.hdr + MAD_SIZE)
        # agent_id, status, timeout_ms, retries, length (host order); addr.qpn, addr.qkey (network order)
        struct.pack_into("=IIIII", self.sbuf, 0, self.agent, 0, timeout_ms, 0, 0)
        struct.pack_into(">II", self.sbuf, 20, 1, QKEY)
        self.rbuf = ctypes.create_string_buffer(self.hdr + MAD_SIZE)
        self.rlen = ctypes.c_int(MAD_SIZE)
        # the arguments of every umad_recv, converted once (the counter poller calls it per MAD)
        self._rbuf_addr = ctypes.c_void_p(ctypes.addressof(self.rbuf))
        self._rlen_ref = ctypes.byref(self.rlen)

    def register(self, mgmt_class: int, class_version: int, methods: tuple[int, ...] = ()) -> int:
        """Register an agent for ``mgmt_class``/``class_version`` and return its id.

        ``methods``: request methods this agent receives unsolicited (the kernel's method mask,
        e.g. ``(0x06,)`` for SA Reports); empty: only responses to its own requests.

        Raises:
            OSError: the kernel (or umad2sim) refused the registration.
        """
        mask = None
        if methods:
            bits = ctypes.sizeof(ctypes.c_long) * 8
            arr = (ctypes.c_long * (128 // bits))()
            for m in methods:
                arr[m // bits] |= 1 << (m % bits)
            mask = ctypes.cast(arr, ctypes.c_void_p)
        agent = self.lib.umad_register(self.fd, mgmt_class, class_version, 0, mask)
        if agent < 0:
            raise OSError(f"umad_register(class 0x{mgmt_class:02x} v{class_version}) failed: {agent}")
        return agent

    def send(self, lid: int, mad: bytes) -> None:
        """Send one 256-byte GMP with the first agent to QP1 of ``lid``. Raises OSError when the
        write fails."""
        buf = self.sbuf
        struct.pack_into(">H", buf, 28, lid)
        buf[self.hdr :] = mad
        os.write(self.fd, buf)

    def send_to(
        self,
        agent: int,
        lid: int,
        mad: bytes,
        *,
        qpn: int = 1,
        qkey: int = QKEY,
        timeout_ms: int | None = None,
    ) -> None:
        """Send ``mad`` with ``agent`` to ``qpn`` of ``lid`` (QP0 with Q_Key 0 for SMPs; LID 0xFFFF,
        the permissive LID, for a directed-route SMP). ``timeout_ms`` 0 for a send that expects no
        answer (a response). Raises OSError when the write fails."""
        buf = bytearray(self.hdr + MAD_SIZE)
        tmo = self.timeout_ms if timeout_ms is None else timeout_ms
        struct.pack_into("=IIIII", buf, 0, agent, 0, tmo, 0, 0)
        struct.pack_into(">IIH", buf, 20, qpn, qkey, lid)
        buf[self.hdr :] = mad
        os.write(self.fd, buf)

    def recv(self, timeout_ms: int) -> tuple[int, bytes] | None:
        """Return ``(umad status, 256-byte MAD)``, or None after ``timeout_ms`` without one."""
        self.rlen.value = MAD_SIZE
        rbuf = self.rbuf
        if self.lib.umad_recv(self.fd, self._rbuf_addr, self._rlen_ref, timeout_ms) < 0:
            return None
        return _STATUS.unpack_from(rbuf, _HDR_STATUS)[0], rbuf[self.hdr : self.hdr + MAD_SIZE]

    def recv_from(self, timeout_ms: int) -> tuple[int, int, int, int, bytes] | None:
        """Like :meth:`recv` with the sender: ``(agent id, umad status, source LID, source QPN,
        MAD)``, or None after ``timeout_ms`` without one."""
        self.rlen.value = MAD_SIZE
        rc = self.lib.umad_recv(self.fd, self.rbuf, ctypes.byref(self.rlen), timeout_ms)
        if rc < 0:
            return None
        raw = self.rbuf.raw
        agent, status = struct.unpack_from("=II", raw, 0)
        qpn = struct.unpack_from(">I", raw, _HDR_QPN)[0] & 0xFFFFFF
        lid = struct.unpack_from(">H", raw, _HDR_LID)[0]
        return agent, status, lid, qpn, raw[self.hdr : self.hdr + MAD_SIZE]
