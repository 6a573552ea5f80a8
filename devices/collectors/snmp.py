"""SNMP reads over pysnmp's asyncio API: GET of scalars and multi-column GETBULK walks of tables.

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


class Session:
    """Reads of one :class:`Target` through an ``SnmpEngine`` (shared by the SNMPv2c targets of a
    poll; an SNMPv3 target gets its own, so one device's USM keys never meet another's)."""

    def __init__(self, target: Target, engine: SnmpEngine | None = None) -> None:
        self.target = target
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
        self.requests = 0

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
        ``[(ObjectName, value)]``."""
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
        return {str(name): plain(value) for name, value in vbs}

    async def walk(self, columns: list[str], max_varbinds: int = 64) -> dict[str, dict[str, object]]:
        """Walk table ``columns`` (numeric OIDs of columns or subtrees) together with GETBULK.

        Returns ``{column: {index suffix: value}}`` (suffix = the OID after the column, dotted);
        a column the agent lacks is ``{}``.

        Raises:
            SnmpError: no answer, refused credentials or an error status.
        """
        prefixes = {c: tuple(int(x) for x in c.split(".")) for c in columns}
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
                oid = tuple(name)
                prefix = prefixes[col]
                if isinstance(value, rfc1905.EndOfMibView) or oid[: len(prefix)] != prefix:
                    done.add(col)
                    continue
                out[col][".".join(map(str, oid[len(prefix) :]))] = plain(value)
                cursor[col] = name  # the next request starts here: no re-parse of the dotted text
            for col in active:
                if col in done or len(flat) < n:
                    cursor.pop(col, None)
        return out

    def close(self) -> None:
        """Release the engine's sockets (only for an engine this session made itself)."""
        close_engine(self.engine)


def close_engine(engine: SnmpEngine) -> None:
    """Close an ``SnmpEngine``'s transports (a finished poll's)."""
    try:
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
