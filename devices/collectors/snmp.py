"""SNMP reads: GET of scalars and multi-column GETBULK walks of tables, over asyncio.

SNMPv2c goes through :class:`V2cClient`, a UDP client of this module that encodes its requests and
decodes the agents' responses with :mod:`devices.collectors.ber` (no pyasn1: issue 25 §3, the
generic decoder was most of a poll's CPU); SNMPv3 goes through pysnmp's command generators and
engine (USM keys, encryption).

No Django here: a :class:`Target` carries everything a read needs (address, port, version,
decrypted credentials, timeout, retries), so the poller, the benchmark and the tests use the same
code. Values come back as plain Python (:func:`plain`): INTEGER/Counter32/Counter64/Gauge32/
TimeTicks → int, OCTET STRING → bytes, OBJECT IDENTIFIER and IpAddress → str.

A table walk asks for several columns at once (one GETBULK carries the next rows of every
column still inside its subtree, at most ``max_varbinds`` values per response: agents cap their
responses, snmpsim at 64) and stops each column at the end of its subtree, so a 64-interface
ifXTable of 12 columns is about a dozen round trips. Errors raise :class:`SnmpError` (timeout,
authentication failure, error status); a column the agent does not have is simply empty.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
from dataclasses import dataclass

from pysnmp.carrier.asyncio.dispatch import AsyncioDispatcher
from pysnmp.entity.rfc3413 import cmdgen
from pysnmp.hlapi.v3arch.asyncio import (
    CommunityData,
    ContextData,
    SnmpEngine,
    UdpTransportTarget,
    UsmUserData,
)
from pysnmp.hlapi.v3arch.asyncio import auth as _auth
from pysnmp.hlapi.v3arch.asyncio.lcd import CommandGeneratorLcdConfigurator
from pysnmp.proto import rfc1902, rfc1905
from pysnmp.proto.api import verdec

from . import ber

log = logging.getLogger(__name__)

_LCD = CommandGeneratorLcdConfigurator()
_GET = cmdgen.GetCommandGenerator()
_BULK = cmdgen.BulkCommandGenerator()

#: pysnmp's protocol objects by the names Weft stores (``devices.choices``)
AUTH_PROTOCOLS = {
    "none": _auth.USM_AUTH_NONE,
    "md5": _auth.USM_AUTH_HMAC96_MD5,
    "sha": _auth.USM_AUTH_HMAC96_SHA,
    "sha224": _auth.USM_AUTH_HMAC128_SHA224,
    "sha256": _auth.USM_AUTH_HMAC192_SHA256,
    "sha384": _auth.USM_AUTH_HMAC256_SHA384,
    "sha512": _auth.USM_AUTH_HMAC384_SHA512,
}
PRIV_PROTOCOLS = {
    "none": _auth.USM_PRIV_NONE,
    "des": _auth.USM_PRIV_CBC56_DES,
    "3des": _auth.USM_PRIV_CBC168_3DES,
    "aes128": _auth.USM_PRIV_CFB128_AES,
    "aes192": _auth.USM_PRIV_CFB192_AES,
    "aes256": _auth.USM_PRIV_CFB256_AES,
}


class SnmpError(Exception):
    """A read that failed as a whole: ``kind`` is ``timeout`` (no answer within the target's
    timeout and retries), ``auth`` (SNMPv3 user, keys or protocols refused: wrong digest, unknown
    user, decryption error), or ``error`` (an error status or any other failure); ``str()`` says
    what happened in words an operator can act on (never a credential)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Target:
    """Where and how to read one agent. ``version`` ``"2c"`` (``community``) or ``"3"`` (``user``,
    ``auth_protocol``/``auth_key``, ``priv_protocol``/``priv_key``, names as in
    :data:`AUTH_PROTOCOLS`/:data:`PRIV_PROTOCOLS`; ``context`` the SNMPv3 context name).
    ``timeout_s`` per request, ``retries`` resends of an unanswered request."""

    host: str
    port: int = 161
    version: str = "2c"
    community: str = ""
    user: str = ""
    auth_protocol: str = "none"
    auth_key: str = ""
    priv_protocol: str = "none"
    priv_key: str = ""
    context: str = ""
    timeout_s: float = 2.0
    retries: int = 1

    def __repr__(self) -> str:  # never print a key or community
        return f"Target({self.host}:{self.port} v{self.version})"


_END = (rfc1905.EndOfMibView, rfc1905.NoSuchObject, rfc1905.NoSuchInstance)
#: the value of every requested varbind (one object: pyasn1 values are immutable)
_NULL = rfc1902.Null("")


def plain(value):
    """The Python value of an SNMP value (see the module docstring); None for noSuchObject,
    noSuchInstance and endOfMibView."""
    if isinstance(value, _END) or value is None:
        return None
    if isinstance(value, rfc1902.IpAddress):
        return ".".join(str(b) for b in value.asOctets())
    if isinstance(value, rfc1902.OctetString):
        return bytes(value.asOctets())
    if isinstance(value, rfc1902.ObjectIdentifier):
        return str(value)
    try:
        return int(value)
    except (TypeError, ValueError):
        return str(value)


class GuardedDispatcher(AsyncioDispatcher):
    """pysnmp's asyncio dispatcher, but a datagram pysnmp cannot decode (garbage: pyasn1 raises
    ``TypeError``/``ValueError`` from inside the message dispatcher, which asyncio would log as an
    "Exception in callback" traceback; or whose header is not BER, which pysnmp drops silently)
    is dropped and counted in ``malformed``
    (``{(ip, port): datagrams}``, the sender's address) instead; logged at DEBUG only."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.malformed: dict[tuple[str, int], int] = {}

    def _callback_function(self, transport, transportAddress, incomingMessage):
        try:
            verdec.decode_message_version(incomingMessage)  # the header only: cheap
            return super()._callback_function(transport, transportAddress, incomingMessage)
        except Exception as exc:  # undecodable: whatever pyasn1 raised on it
            key = (str(transportAddress[0]), int(transportAddress[1]))
            self.malformed[key] = self.malformed.get(key, 0) + 1
            log.debug("dropped a malformed SNMP message from %s:%s (%s: %s)", *key, type(exc).__name__, exc)


def guard(engine: SnmpEngine) -> SnmpEngine:
    """Give ``engine`` a :class:`GuardedDispatcher` (before its first transport; an engine that has
    a dispatcher already keeps it). Returns ``engine``."""
    if engine.transport_dispatcher is None:
        engine.register_transport_dispatcher(GuardedDispatcher())
    return engine


def malformed_from(engine: SnmpEngine, address: tuple[str, int]) -> int:
    """How many undecodable datagrams ``engine`` got from ``address`` (``(ip, port)``) so far."""
    return getattr(engine.transport_dispatcher, "malformed", {}).get((str(address[0]), int(address[1])), 0)


class V2cClient(asyncio.DatagramProtocol):
    """One UDP socket per address family shared by the SNMPv2c reads of a poll: requests
    (:func:`devices.collectors.ber.encode_request`) go out with a random request-id and the answer
    with that id from the agent's address resolves them; a datagram that does not decode
    (:class:`devices.collectors.ber.BerError`) is dropped and counted in ``malformed``
    (``{(ip, port): datagrams}``), as :class:`GuardedDispatcher` does for pysnmp. Use it from one
    event loop; :meth:`close` releases the sockets."""

    def __init__(self) -> None:
        self.malformed: dict[tuple[str, int], int] = {}
        self._pending: dict[int, tuple[tuple[str, int], asyncio.Future]] = {}
        self._transports: dict[int, asyncio.DatagramTransport] = {}
        self._opening: dict[int, asyncio.Future] = {}

    # asyncio.DatagramProtocol
    def datagram_received(self, data: bytes, addr) -> None:
        key = (str(addr[0]), int(addr[1]))
        try:
            response = ber.decode_response(data)
        except ber.BerError as exc:
            self.malformed[key] = self.malformed.get(key, 0) + 1
            log.debug("dropped a malformed SNMP message from %s:%s (%s)", *key, exc)
            return
        waiting = self._pending.get(response.request_id)
        if waiting is not None and waiting[0] == key and not waiting[1].done():
            waiting[1].set_result(response)

    def error_received(self, exc: Exception) -> None:  # ICMP port unreachable and the like
        log.debug("SNMP socket error: %s", exc)

    async def _transport(self, family: int) -> asyncio.DatagramTransport:
        if family not in self._transports:
            if family not in self._opening:
                loop = asyncio.get_running_loop()
                self._opening[family] = asyncio.ensure_future(
                    loop.create_datagram_endpoint(lambda: self, family=family)
                )
            transport, _ = await asyncio.shield(self._opening[family])
            self._transports[family] = transport
        return self._transports[family]

    async def request(
        self, addr: tuple[str, int], family: int, message_of, timeout_s: float, retries: int
    ) -> ber.Response | None:
        """Send ``message_of(request_id)`` to ``addr`` and await the answer, resending it up to
        ``retries`` times after ``timeout_s`` each; None when none came."""
        transport = await self._transport(family)
        while True:
            rid = random.randrange(1, 1 << 31)
            if rid not in self._pending:
                break
        future = asyncio.get_running_loop().create_future()
        self._pending[rid] = ((str(addr[0]), int(addr[1])), future)
        message = message_of(rid)
        try:
            for _ in range(retries + 1):
                transport.sendto(message, addr)
                try:
                    return await asyncio.wait_for(asyncio.shield(future), timeout_s)
                except TimeoutError:
                    continue
            return None
        finally:
            self._pending.pop(rid, None)

    def close(self) -> None:
        """Close the sockets (pending requests then time out)."""
        for t in self._transports.values():
            t.close()
        self._transports.clear()
        for f in self._opening.values():
            f.cancel()
        self._opening.clear()


class Session:
    """Reads of one :class:`Target` through an ``SnmpEngine`` (shared by the SNMPv2c targets of a
    poll; an SNMPv3 target gets its own, so one device's USM keys never meet another's)."""

    def __init__(self, target: Target, engine: SnmpEngine | V2cClient | None = None) -> None:
        self.target = target
        self.requests = 0
        self._v2c = target.version != "3"
        if self._v2c:  # this module's client (``engine``: a poll's shared one)
            self.engine = engine if isinstance(engine, V2cClient) else V2cClient()
            self.community = target.community.encode("utf-8", "surrogateescape")
            self._address = None
            return
        self.engine = guard(engine or SnmpEngine())
        if target.version == "3":
            self.auth = UsmUserData(
                target.user,
                authKey=target.auth_key or None,
                privKey=target.priv_key or None,
                authProtocol=AUTH_PROTOCOLS[target.auth_protocol],
                privProtocol=PRIV_PROTOCOLS[target.priv_protocol],
            )
        else:
            self.auth = CommunityData(target.community, mpModel=1)
        self.context = ContextData(contextName=target.context or "")
        self._transport = None
        self._addr_name = None

    async def _transport_target(self):
        if self._transport is None:
            t = self.target
            self._transport = await UdpTransportTarget.create(
                (t.host, t.port), timeout=t.timeout_s, retries=t.retries
            )
        return self._transport

    async def _send(self, reps: int | None, oids: list) -> list:
        """One GET (``reps`` None) or GETBULK (non-repeaters 0, ``reps`` repetitions) of ``oids``
        (dotted strings, or the ``ObjectName`` of a response, reused as is) through pysnmp's
        command generators, without the high-level API's MIB resolution of every request and
        response (numeric OIDs only: most of a poll's CPU otherwise). The target's address entry
        is configured in the engine once per session, not per request. Returns the response's
        ``[(ObjectName, value)]`` (SNMPv3), ``[(oid tuple, plain value)]`` (SNMPv2c,
        :meth:`_send_v2c`)."""
        if self._v2c:
            return await self._send_v2c(reps, oids)
        if self._addr_name is None:
            transport = await self._transport_target()
            self._addr_name, _params = _LCD.configure(
                self.engine, self.auth, transport, self.context.contextName
            )
        addr_name, transport = self._addr_name, self._transport
        future = asyncio.get_running_loop().create_future()

        def done(engine, handle, ei, es, ix, vbs, ctx):
            if not future.done():
                future.set_result((ei, es, ix, vbs))

        vbs = [(o if isinstance(o, rfc1902.ObjectName) else rfc1902.ObjectName(o), _NULL) for o in oids]
        self.requests += 1
        ctx = self.context
        if reps is None:
            _GET.send_varbinds(self.engine, addr_name, ctx.contextEngineId, ctx.contextName, vbs, done)
        else:
            _BULK.send_varbinds(
                self.engine, addr_name, ctx.contextEngineId, ctx.contextName, 0, reps, vbs, done
            )
        garbage = malformed_from(self.engine, transport.transport_address)
        ei, es, ix, out = await future
        if ei and malformed_from(self.engine, transport.transport_address) > garbage:
            host, port = transport.transport_address[:2]
            raise SnmpError(
                "error",
                f"malformed answer from {host}:{port}: not an SNMP message it could decode "
                f"({'GET' if reps is None else 'GETBULK'}; is this the device's SNMP port?)",
            )
        self._check(ei, es, ix, "GET" if reps is None else "GETBULK")
        return list(out)

    async def _send_v2c(self, reps: int | None, oids: list) -> list:
        """:meth:`_send` of an SNMPv2c target through :class:`V2cClient`: the values are plain
        already (:mod:`devices.collectors.ber`; endOfMibView is ``ber.END_OF_MIB``)."""
        t = self.target
        if self._address is None:
            try:
                infos = await asyncio.get_running_loop().getaddrinfo(t.host, t.port, type=socket.SOCK_DGRAM)
            except OSError as exc:
                raise SnmpError("error", f"{t.host}: the address does not resolve ({exc})") from None
            family, _, _, _, sockaddr = infos[0]
            self._address = (family, sockaddr[:2])
        family, addr = self._address
        names = [
            o if isinstance(o, tuple) else tuple(int(x) for x in str(o).strip(".").split(".")) for o in oids
        ]
        what = "GET" if reps is None else "GETBULK"

        def message_of(rid: int) -> bytes:
            return ber.encode_request(self.community, rid, names, max_repetitions=reps)

        self.requests += 1
        garbage = self.engine.malformed.get((str(addr[0]), int(addr[1])), 0)
        response = await self.engine.request(addr, family, message_of, t.timeout_s, t.retries)
        if response is None:
            if self.engine.malformed.get((str(addr[0]), int(addr[1])), 0) > garbage:
                raise SnmpError(
                    "error",
                    f"malformed answer from {addr[0]}:{addr[1]}: not an SNMP message it could decode "
                    f"({what}; is this the device's SNMP port?)",
                )
            raise SnmpError(
                "timeout",
                f"no answer from {t.host}:{t.port} within {t.timeout_s:g} s × {t.retries + 1} tries ({what})",
            )
        if response.error_status:
            raise SnmpError(
                "error", f"{what}: agent answered {response.error_name} at #{response.error_index}"
            )
        return response.varbinds

    def _check(self, error_indication, error_status, error_index, what: str) -> None:
        if error_indication:
            text = str(error_indication)
            low = text.lower()
            if "timeout" in low or "no snmp response" in low:
                raise SnmpError(
                    "timeout",
                    f"no answer from {self.target.host}:{self.target.port} within "
                    f"{self.target.timeout_s:g} s × {self.target.retries + 1} tries ({what})",
                )
            if any(w in low for w in ("digest", "unknown user", "decryption", "authentication",
                                      "unsupported security", "not in time window", "unknown security")):  # fmt: skip
                raise SnmpError("auth", f"SNMPv3 authentication refused by {self.target.host}: {text}")
            raise SnmpError("error", f"{what}: {text}")
        if error_status and int(error_status):
            raise SnmpError("error", f"{what}: agent answered {error_status.prettyPrint()} at #{error_index}")

    async def get(self, oids: list[str]) -> dict[str, object]:
        """GET ``oids`` (numeric, dotted): ``{oid: value}`` (None for an object the agent lacks).

        Raises:
            SnmpError: no answer, refused credentials or an error status.
        """
        vbs = await self._send(None, oids)
        if self._v2c:
            return {".".join(map(str, n)): (None if v is ber.END_OF_MIB else v) for n, v in vbs}
        return {str(name): plain(value) for name, value in vbs}

    async def walk(self, columns: list[str], max_varbinds: int = 64) -> dict[str, dict[str, object]]:
        """Walk table ``columns`` (numeric OIDs of columns or subtrees) together with GETBULK.

        Returns ``{column: {index suffix: value}}`` (suffix = the OID after the column, dotted);
        a column the agent lacks is ``{}``.

        Raises:
            SnmpError: no answer, refused credentials or an error status.
        """
        prefixes = {c: tuple(int(x) for x in c.split(".")) for c in columns}
        v2c = self._v2c
        out: dict[str, dict[str, object]] = {c: {} for c in columns}
        cursor = {c: c for c in columns}
        while cursor:
            active = list(cursor)
            reps = max(1, max_varbinds // len(active))
            flat = await self._send(reps, [cursor[c] for c in active])
            if not flat:
                break
            done: set[str] = set()
            n = len(active)
            for i, vb in enumerate(flat):
                col = active[i % n]
                if col in done:
                    continue
                name, value = vb[0], vb[1]
                oid = name if v2c else tuple(name)
                prefix = prefixes[col]
                if (
                    value is ber.END_OF_MIB
                    or isinstance(value, rfc1905.EndOfMibView)
                    or oid[: len(prefix)] != prefix
                ):
                    done.add(col)
                    continue
                out[col][".".join(map(str, oid[len(prefix) :]))] = value if v2c else plain(value)
                cursor[col] = name  # the next request starts here: no re-parse of the dotted text
            for col in active:
                if col in done or len(flat) < n:
                    cursor.pop(col, None)
        return out

    def close(self) -> None:
        """Release the engine's sockets (only for an engine this session made itself)."""
        close_engine(self.engine)


def close_engine(engine: SnmpEngine | V2cClient) -> None:
    """Close an ``SnmpEngine``'s transports, or a :class:`V2cClient`'s sockets (a finished poll's)."""
    try:
        if isinstance(engine, V2cClient):
            engine.close()
            return
        engine.close_dispatcher()
    except Exception:  # already closed, or never opened a socket
        pass


async def with_deadline(coro, seconds: float):
    """``await coro`` but give up after ``seconds`` (a device's whole budget): raises
    :class:`SnmpError` ``timeout`` instead of ``asyncio.TimeoutError``."""
    try:
        return await asyncio.wait_for(coro, seconds)
    except TimeoutError as exc:
        raise SnmpError("timeout", f"the device did not finish within its {seconds:g} s budget") from exc
