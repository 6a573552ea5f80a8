"""SNMP trap receiver (pysnmp, asyncio): linkDown/linkUp and other notifications into events.

:class:`TrapReceiver` listens on a UDP address with a pysnmp engine configured from the enabled
devices: every SNMPv2c community of a device, and every SNMPv3 device's user and keys under the
device's snmpEngineID (read at identification; an SNMPv3 trap is authenticated with the sender's
engine ID). A notification is accepted only from a known device: v2c by community *and* source
address (the device's address), v3 by user and engine ID. Everything else is dropped and counted
(:meth:`TrapReceiver.stats`: unknown community, unknown user or bad keys, known community from an
unknown address), never an event: a stranger cannot raise alarms.

Accepted notifications are queued (``TrapReceiver.queue``) and applied by :func:`record_trap` (one
transaction each, outside the event loop, in arrival order): linkDown of an interface that is
administratively up → ``device.interface_down`` (the alarm a poll raises for it), linkUp →
``device.interface_up``; other notifications → ``device.trap``. The fabric's pending events are
applied at once (``events.engine.process_pending_events``), so the alarm is there in well under
a second, not at the next poll.

``manage.py snmp_traps`` runs it (production: one process, as ``listen_notices``); it re-reads the
devices every ``rescan_s`` seconds.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction
from pysnmp.carrier.asyncio.dgram import udp
from pysnmp.entity import config, engine
from pysnmp.entity.rfc3413 import ntfrcv
from pysnmp.proto import rfc1902

from events.engine import process_pending_events
from events.services import EventSpec, record_events

from .. import crypto, parsers
from ..collectors.snmp import AUTH_PROTOCOLS, PRIV_PROTOCOLS, guard, plain
from ..models import Device, Interface
from .poll import interface_spec

log = logging.getLogger(__name__)

#: pysnmp's drop counters (``__SNMPv2-MIB`` / ``__SNMP-USER-BASED-SM-MIB``) by Weft's names
_V2_DROPS = ("snmpInBadCommunityNames",)
_V3_DROPS = (
    "usmStatsUnknownUserNames",
    "usmStatsUnknownEngineIDs",
    "usmStatsWrongDigests",
    "usmStatsDecryptionErrors",
    "usmStatsNotInTimeWindows",
    "usmStatsUnsupportedSecLevels",
)
_COUNTER_MODULES = ("__SNMPv2-MIB", "__SNMP-USER-BASED-SM-MIB")


@dataclass(frozen=True)
class Accepted:
    """A notification from a known device: its id and the parsed varbinds."""

    device_id: int
    source: str
    record: parsers.TrapRecord


def _addresses(host: str) -> set[str]:
    """The IP addresses of a device's ``address`` (itself when it is one; DNS otherwise)."""
    try:
        return {ai[4][0] for ai in socket.getaddrinfo(host, None, proto=socket.IPPROTO_UDP)}
    except (OSError, UnicodeError):  # UnicodeError: not IDNA-encodable (a label over 63, say)
        return {host}


def bind_udp(listen: tuple[str, int]) -> socket.socket:
    """A non-blocking UDP socket bound to ``listen`` (``(host, port)``), for pysnmp's transport.

    Binding here rather than letting pysnmp's asyncio transport do it makes a busy or forbidden
    address an ``OSError`` at once (pysnmp binds in a background task whose failure is only logged).

    Raises:
        OSError: the address is in use, not local, or needs privileges (port < 1024).
    """
    host, port = listen
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.setblocking(False)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


class _Receiver(ntfrcv.NotificationReceiver):
    """pysnmp's receiver, keeping the security name (v2c: the community's entry; v3: the user)
    the notification being handed to the callback was accepted under (the callback runs inside
    ``process_pdu``, so it is the current one)."""

    last_security_name = ""

    def process_pdu(self, snmpEngine, messageProcessingModel, securityModel, securityName, *args, **kwargs):
        self.last_security_name = str(securityName)
        return super().process_pdu(
            snmpEngine, messageProcessingModel, securityModel, securityName, *args, **kwargs
        )


class TrapReceiver:
    """One pysnmp notification receiver on ``listen`` (``(host, port)``), configured from the
    devices (:meth:`configure`). ``queue`` holds :class:`Accepted` notifications for
    :func:`record_trap`; :meth:`stats` counts what came in."""

    def __init__(self, listen: tuple[str, int]) -> None:
        self.listen = listen
        self.queue: queue.SimpleQueue[Accepted] = queue.SimpleQueue()
        self.engine: engine.SnmpEngine | None = None
        self._v2: dict[str, dict[str, int]] = {}  # security name → {source address: device id}
        self._v3: dict[str, int] = {}  # engine id (hex) → device id
        self.accepted = 0
        self.unknown_source = 0
        self.bad = 0
        self._receiver: _Receiver | None = None
        self._closed: dict[str, int] = {}  # drop counts of the engines closed so far
        self.configured = 0  # how many times :meth:`configure` succeeded (start + re-scans)

    def configure(self, devices: list[Device] | None = None) -> None:
        """(Re)build the engine from ``devices`` (default: every enabled device) and listen.

        The first call binds ``listen``; a later one builds a new engine (communities, SNMPv3 users)
        and moves the running transport, with its socket, onto it: the address is never re-bound,
        so no notification arriving meanwhile is lost and the drop counts go on.

        Call from the event loop's thread (pysnmp's asyncio transport reads the socket there).
        A device whose stored credential cannot be decrypted is left out (its polls say why).

        Raises:
            OSError: (first call only) the address cannot be bound (in use, not local, a
                privileged port); nothing is left listening.
        """
        if devices is None:
            devices = list(Device.objects.filter(enabled=True))
        eng = guard(engine.SnmpEngine())  # garbage datagrams: counted as malformed, no traceback
        # the drop counters' modules, loaded here on the loop's thread: pysnmp's MIB builder is not
        # thread-safe, and stats() (called from other threads) loading one while a notification
        # being processed loads it too made that notification fail ("MIB file not found")
        eng.get_mib_builder().load_modules(*_COUNTER_MODULES)
        v2, v3 = self._tables(eng, devices)  # before touching the running engine: a failure keeps it
        old = self.engine
        if old is None:
            sock = bind_udp(self.listen)  # here, not in pysnmp's background task: a busy port raises
            transport = udp.UdpAsyncioTransport().open_server_mode(sock=sock)
        else:
            transport = old.transport_dispatcher.get_transport(udp.DOMAIN_NAME)
            old.transport_dispatcher.unregister_transport(udp.DOMAIN_NAME)  # detached, still open
            self.close()  # the old engine, now without a transport; its drop counts are kept
        config.add_transport(eng, udp.DOMAIN_NAME, transport)
        self._v2, self._v3 = v2, v3
        self._receiver = _Receiver(eng, self._received)
        self.engine = eng
        self.configured += 1

    @staticmethod
    def _tables(
        eng: engine.SnmpEngine, devices: list[Device]
    ) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
        """Add the devices' communities and SNMPv3 users to ``eng``; return the v2c table
        (security name → {source address: device id}) and the v3 one (engine id hex → device id)."""
        communities: dict[str, str] = {}
        v2: dict[str, dict[str, int]] = {}
        v3: dict[str, int] = {}
        for d in devices:
            try:
                if d.version == "3":
                    if not d.engine_id:
                        continue  # not identified yet: its engine ID is unknown
                    config.add_v3_user(
                        eng,
                        d.user,
                        AUTH_PROTOCOLS[d.auth_protocol],
                        crypto.decrypt(d.auth_key_enc) or None,
                        PRIV_PROTOCOLS[d.priv_protocol],
                        crypto.decrypt(d.priv_key_enc) or None,
                        securityEngineId=rfc1902.OctetString(hexValue=d.engine_id),
                    )
                    v3[d.engine_id] = d.pk
                else:
                    community = crypto.decrypt(d.community_enc)
                    if not community:
                        continue
                    name = communities.get(community)
                    if name is None:
                        name = communities[community] = f"c{len(communities) + 1}"
                        config.add_v1_system(eng, name, community)
                    for addr in _addresses(d.address):
                        v2.setdefault(name, {})[addr] = d.pk
            except crypto.CredentialError:
                log.warning("trap receiver: the credentials of device %s cannot be decrypted", d.name)
        return v2, v3

    def _received(self, eng, state_reference, context_engine_id, context_name, varbinds, cb_ctx) -> None:
        _domain, address = eng.message_dispatcher.get_transport_info(state_reference)
        source = str(address[0])
        security_name = self._receiver.last_security_name if self._receiver is not None else ""
        device_id = None
        engine_hex = bytes(context_engine_id).hex() if context_engine_id is not None else ""
        if engine_hex in self._v3:
            device_id = self._v3[engine_hex]
        elif security_name in self._v2:
            device_id = self._v2[security_name].get(source)
        if device_id is None:
            self.unknown_source += 1
            return
        try:
            rec = parsers.trap([(str(name), plain(value)) for name, value in varbinds])
        except parsers.ParseError:
            self.bad += 1
            return
        self.accepted += 1
        self.queue.put(Accepted(device_id, source, rec))

    def _drops(self, names: tuple[str, ...], module: str) -> int:
        if self.engine is None:
            return self._closed.get(module, 0)
        total = self._closed.get(module, 0)
        for name in names:
            try:
                (sym,) = self.engine.get_mib_builder().import_symbols(module, name)
                total += int(sym.syntax)
            except Exception:  # a counter this pysnmp does not keep
                continue
        return total

    def stats(self) -> dict[str, int]:
        """``{"accepted", "dropped_unknown_community", "dropped_bad_v3", "dropped_unknown_source",
        "dropped_malformed"}`` since :meth:`configure`."""
        return {
            "accepted": self.accepted,
            "dropped_unknown_community": self._drops(_V2_DROPS, "__SNMPv2-MIB"),
            "dropped_bad_v3": self._drops(_V3_DROPS, "__SNMP-USER-BASED-SM-MIB"),
            "dropped_unknown_source": self.unknown_source,
            "dropped_malformed": self.bad + self._garbage(),
        }

    def _garbage(self) -> int:
        """Datagrams no engine so far could decode (``collectors.snmp.GuardedDispatcher``)."""
        running = self.engine.transport_dispatcher if self.engine is not None else None
        return self._closed.get("garbage", 0) + sum(getattr(running, "malformed", {}).values())

    def close(self) -> None:
        """Stop listening (the drop counts so far are kept)."""
        if self.engine is not None:
            self._closed = {
                "__SNMPv2-MIB": self._drops(_V2_DROPS, "__SNMPv2-MIB"),
                "__SNMP-USER-BASED-SM-MIB": self._drops(_V3_DROPS, "__SNMP-USER-BASED-SM-MIB"),
                "garbage": self._garbage(),
            }
            try:
                self.engine.close_dispatcher()
            except Exception:
                pass
            self.engine = None

    def drain(self) -> list[dict]:
        """Apply every queued notification (:func:`record_trap`) in arrival order; return their results."""
        out = []
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return out
            try:
                out.append(record_trap(item))
            except Exception:  # a database error: this notification is lost, the receiver goes on
                log.exception("recording a trap from device %s failed", item.device_id)


def record_trap(item: Accepted) -> dict:
    """Write the events of one accepted notification in one transaction, then apply the fabric's
    pending events (alarms raised or cleared now). Returns ``{"device", "trap", "events"}``.
    A device deleted since the notification arrived is skipped."""
    rec = item.record
    with transaction.atomic():
        dev = Device.objects.select_for_update().filter(pk=item.device_id).first()
        if dev is None:
            return {"device": None, "trap": rec.trap_oid, "events": []}
        specs: list[EventSpec] = []
        iface = None
        if rec.link and rec.if_index is not None:
            iface = Interface.objects.filter(device=dev, if_index=rec.if_index).first()
        if rec.link and iface is not None:
            admin = rec.admin_status or iface.admin_status
            oper = rec.oper_status or ("up" if rec.link == "up" else "down")
            if rec.link == "down" and admin != "down":
                specs.append(interface_spec(dev, iface.name, False, "linkDown trap"))
            elif rec.link == "up":
                specs.append(interface_spec(dev, iface.name, True, "linkUp trap"))
            iface.oper_status, iface.admin_status = oper, admin or iface.admin_status
            iface.save(update_fields=["oper_status", "admin_status"])
        else:
            what = f"{rec.link} trap for ifIndex {rec.if_index}" if rec.link else f"trap {rec.trap_oid}"
            specs.append(EventSpec("device.trap", f"{dev.name}: {what}", object_type="device", object_key=dev.name,
                                   object_repr=dev.name, details={"trap": rec.trap_oid, "varbinds": rec.varbinds[:50]}))  # fmt: skip
        record_events(dev.fabric, specs)
        fabric_id = dev.fabric_id
    process_pending_events(fabric_id)
    return {"device": dev.name, "trap": rec.trap_oid, "events": [s.code for s in specs]}


#: cache key of the running receiver's :meth:`TrapReceiver.stats` (read by ``/metrics``)
STATS_KEY = "devices.traps.stats"


async def serve(
    receiver: TrapReceiver,
    *,
    seconds: float | None = None,
    rescan_s: float = 30.0,
    stop: asyncio.Event | None = None,
    listening: Callable[[], None] | None = None,
) -> None:
    """Run ``receiver`` on the current loop: apply notifications as they come (in a worker thread,
    in order), publish its stats to the cache (:data:`STATS_KEY`) and re-read the devices every
    ``rescan_s``; stop after ``seconds`` (None: until ``stop`` is set), applying what was accepted
    by then. ``listening`` is called once the socket is bound.

    Raises:
        OSError: the listen address cannot be bound (at start; a re-scan keeps the socket).
    """
    from asgiref.sync import sync_to_async
    from django.core.cache import cache

    def enabled():
        return list(Device.objects.filter(enabled=True))

    loop = asyncio.get_running_loop()
    receiver.configure(await sync_to_async(enabled)())
    if listening is not None:
        listening()
    end = None if seconds is None else loop.time() + seconds
    next_scan = loop.time() + rescan_s
    drain = sync_to_async(receiver.drain, thread_sensitive=True)
    publish = sync_to_async(lambda: cache.set(STATS_KEY, receiver.stats(), None), thread_sensitive=True)
    try:
        while (end is None or loop.time() < end) and not (stop is not None and stop.is_set()):
            await asyncio.sleep(0.05)
            if not receiver.queue.empty():
                await drain()
                await publish()
            if loop.time() >= next_scan:
                try:  # the same socket, a new engine: devices added or edited since are known now
                    receiver.configure(await sync_to_async(enabled)())
                except Exception:  # the database is away, say: the running engine is kept
                    log.exception("trap receiver on %s:%s: re-reading the devices failed", *receiver.listen)
                next_scan = loop.time() + rescan_s
                await publish()
    finally:
        receiver.close()
        if not receiver.queue.empty():  # accepted before the stop: applied, not lost
            await drain()
        await publish()


class TrapListenError(Exception):
    """The background trap receiver could not start (the address is in use, or needs privileges)."""


class BackgroundReceiver:
    """:func:`serve` of a :class:`TrapReceiver` on its own thread and event loop, for processes
    that do something else in the foreground (``manage.py serve``, the embedded deployment).

    ``start()`` returns once the socket is bound, or raises :class:`TrapListenError` (nothing left
    running); ``stop()`` ends the loop and joins the thread. ``receiver.stats()`` counts traffic.
    """

    def __init__(self, listen: tuple[str, int], *, rescan_s: float = 30.0) -> None:
        self.receiver = TrapReceiver(listen)
        self.rescan_s = rescan_s
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 30.0) -> BackgroundReceiver:
        """Start the thread and wait until it listens.

        Raises:
            TrapListenError: binding failed (the message names the address and the reason), or
                the receiver did not start within ``timeout`` seconds.
        """
        host, port = self.receiver.listen
        self._thread = threading.Thread(target=self._run, name="weft-snmp-traps", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            self.stop()
            raise TrapListenError(
                f"the SNMP trap receiver on {host}:{port} did not start within {timeout:g} s"
            )
        if self._error is not None:
            self._thread.join(5.0)
            if isinstance(self._error, OSError):
                raise TrapListenError(f"cannot listen for SNMP traps on {host}:{port}: {self._error}")
            raise TrapListenError(
                f"the SNMP trap receiver on {host}:{port} did not start: {type(self._error).__name__}: {self._error}"
            )
        return self

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported by start(); a later failure is logged
            if self._ready.is_set():
                log.exception("the SNMP trap receiver stopped")
            self._error = exc
        finally:
            self._ready.set()
            from django.db import connections

            connections.close_all()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        await serve(self.receiver, rescan_s=self.rescan_s, stop=self._stop, listening=self._ready.set)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop listening and join the thread (at most ``timeout`` seconds)."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:  # the loop closed meanwhile
                pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
