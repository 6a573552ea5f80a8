"""SNMPv2c messages in BER, by hand: the requests a poll sends (GET, GETBULK) and the Response PDU it
reads, without pyasn1.

Why: a poll of 100 switches decodes about 80,000 varbinds; pyasn1's generic decoder (which pysnmp
uses for every message) spent about 1.2 CPU-s per 1,000 interfaces on it, most of a poll's time on
two cores (issue 25 §3, ``bench/snmp.py``). The v2c Response is a fixed shape of a few tags, so this
module reads it with slices and ``int.from_bytes``; SNMPv3 (USM keys, encryption) stays with
pysnmp (``devices.collectors.snmp``).

Sources: RFC 3416 (PDUs: GetRequest ``[0]``, Response ``[2]``, GetBulkRequest ``[5]``, the
error-status names), RFC 3417/1901 (the v2c message: version 1, community), RFC 2578 (application
types: IpAddress ``[APPLICATION 0]``, Counter32 1, Gauge32 2, TimeTicks 3, Opaque 4, Counter64 6),
X.690 (BER: definite lengths, two's-complement INTEGER, OID arcs in base 128).

Values decode as :func:`devices.collectors.snmp.plain` gives them: INTEGER and the counters, gauges
and ticks → ``int``; OCTET STRING and Opaque → ``bytes`` (``plain`` gives pysnmp's ``str`` of an
Opaque); OBJECT IDENTIFIER and IpAddress →
dotted ``str``; noSuchObject/noSuchInstance → ``None``; endOfMibView → :data:`END_OF_MIB`.
Pure functions, no I/O; malformed input raises :class:`BerError`.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the version field of an SNMPv2c message (RFC 1901)
VERSION_2C = 1
GET, GETBULK, RESPONSE = 0xA0, 0xA5, 0xA2
#: RFC 3416 error-status names, by value
ERROR_STATUS = (
    "noError", "tooBig", "noSuchName", "badValue", "readOnly", "genErr", "noAccess", "wrongType",
    "wrongLength", "wrongEncoding", "wrongValue", "noCreation", "inconsistentValue",
    "resourceUnavailable", "commitFailed", "undoFailed", "authorizationError", "notWritable",
    "inconsistentName",
)  # fmt: skip


class BerError(ValueError):
    """Not a well-formed SNMPv2c Response (the message says where it broke)."""


class _EndOfMib:
    """The endOfMibView exception value (RFC 3416): the walk ran past the agent's last object."""

    def __repr__(self) -> str:
        return "END_OF_MIB"


END_OF_MIB = _EndOfMib()

_UNSIGNED = (0x41, 0x42, 0x43, 0x46)  # Counter32, Gauge32, TimeTicks, Counter64


@dataclass(frozen=True)
class Response:
    """A decoded Response PDU: ``varbinds`` ``[(oid as a tuple of ints, value)]`` in order."""

    community: bytes
    request_id: int
    error_status: int
    error_index: int
    varbinds: list[tuple[tuple[int, ...], object]]

    @property
    def error_name(self) -> str:
        """RFC 3416's name of ``error_status`` (``"error <n>"`` when out of the table)."""
        s = self.error_status
        return ERROR_STATUS[s] if 0 <= s < len(ERROR_STATUS) else f"error {s}"


# -- encoding ----------------------------------------------------------------------------------


def _len(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes((0x80 | len(body),)) + body


def _tlv(tag: int, body: bytes) -> bytes:
    return bytes((tag,)) + _len(len(body)) + body


def _int(n: int) -> bytes:
    return _tlv(0x02, n.to_bytes(max(1, (n.bit_length() + 8) // 8), "big", signed=True))


def encode_oid(oid: tuple[int, ...]) -> bytes:
    """The BER OBJECT IDENTIFIER (tag 6) of ``oid`` (at least two arcs, the first 0-2).

    Raises:
        BerError: fewer than two arcs, or a first arc above 2 (X.690 8.19)."""
    if len(oid) < 2 or oid[0] > 2 or (oid[0] < 2 and oid[1] > 39):
        raise BerError(f"{'.'.join(map(str, oid))} is not an OID that BER can encode")
    out = bytearray()
    for arc in (oid[0] * 40 + oid[1], *oid[2:]):
        if arc < 0x80:
            out.append(arc)
            continue
        chunk = []
        while arc:
            chunk.append(arc & 0x7F)
            arc >>= 7
        out += bytes(b | 0x80 for b in reversed(chunk[1:])) + bytes((chunk[0],))
    return _tlv(0x06, bytes(out))


def encode_request(
    community: bytes, request_id: int, oids: list[tuple[int, ...]], *, max_repetitions: int | None = None
) -> bytes:
    """An SNMPv2c GetRequest of ``oids`` (``max_repetitions`` None), or a GetBulkRequest with
    non-repeaters 0 and ``max_repetitions``; every varbind's value NULL."""
    varbinds = b"".join(_tlv(0x30, encode_oid(o) + b"\x05\x00") for o in oids)
    if max_repetitions is None:
        head = _int(request_id) + _int(0) + _int(0)
        pdu = _tlv(GET, head + _tlv(0x30, varbinds))
    else:
        head = _int(request_id) + _int(0) + _int(max_repetitions)
        pdu = _tlv(GETBULK, head + _tlv(0x30, varbinds))
    return _tlv(0x30, _int(VERSION_2C) + _tlv(0x04, community) + pdu)


# -- decoding ----------------------------------------------------------------------------------


def _header(data: bytes, i: int, end: int) -> tuple[int, int, int]:
    """``(tag, start of the content, end of the content)`` of the TLV at ``data[i]``."""
    if i + 2 > end:
        raise BerError(f"truncated at byte {i}")
    tag, n = data[i], data[i + 1]
    i += 2
    if n & 0x80:
        k = n & 0x7F
        if k == 0 or k > 4 or i + k > end:
            raise BerError(f"bad length at byte {i - 1}")
        n = int.from_bytes(data[i : i + k], "big")
        i += k
    if i + n > end:
        raise BerError(f"a length of {n} at byte {i} runs past the end")
    return tag, i, i + n


def _expect(data: bytes, i: int, end: int, tag: int, what: str) -> tuple[int, int]:
    got, start, stop = _header(data, i, end)
    if got != tag:
        raise BerError(f"{what}: tag 0x{got:02x} where 0x{tag:02x} was expected (byte {i})")
    return start, stop


def decode_oid(body: bytes) -> tuple[int, ...]:
    """The arcs of a BER OBJECT IDENTIFIER's content.

    Raises:
        BerError: empty, or its last arc unfinished."""
    if not body:
        raise BerError("an empty OID")
    arcs, arc = [], 0
    for b in body:
        arc = (arc << 7) | (b & 0x7F)
        if not b & 0x80:
            arcs.append(arc)
            arc = 0
    if body[-1] & 0x80:
        raise BerError("an OID whose last arc does not end")
    first = arcs[0]
    head = (first // 40, first % 40) if first < 80 else (2, first - 80)
    return (*head, *arcs[1:])


def _value(tag: int, body: bytes) -> object:
    if tag in _UNSIGNED:
        return int.from_bytes(body, "big")
    if tag == 0x02:
        return int.from_bytes(body, "big", signed=True)
    if tag in (0x04, 0x44):
        return bytes(body)
    if tag == 0x06:
        return ".".join(map(str, decode_oid(body)))
    if tag == 0x40:
        return ".".join(str(b) for b in body)
    if tag in (0x05, 0x80, 0x81):  # NULL, noSuchObject, noSuchInstance
        return None
    if tag == 0x82:
        return END_OF_MIB
    raise BerError(f"a value of unknown tag 0x{tag:02x}")


def decode_response(data: bytes) -> Response:
    """The Response PDU of an SNMPv2c message.

    Raises:
        BerError: not BER, not version 2c, not a Response PDU, or a varbind that does not parse.
    """
    end = len(data)
    i, end = _expect(data, 0, end, 0x30, "message")
    vs, ve = _expect(data, i, end, 0x02, "version")
    if int.from_bytes(data[vs:ve], "big", signed=True) != VERSION_2C:
        raise BerError("not an SNMPv2c message")
    cs, ce = _expect(data, ve, end, 0x04, "community")
    ps, pe = _expect(data, ce, end, RESPONSE, "Response PDU")
    fields = []
    i = ps
    for what in ("request-id", "error-status", "error-index"):
        s, e = _expect(data, i, pe, 0x02, what)
        fields.append(int.from_bytes(data[s:e], "big", signed=True))
        i = e
    ls, le = _expect(data, i, pe, 0x30, "varbind list")
    varbinds = []
    i = ls
    mv = memoryview(data)
    while i < le:
        bs, be = _expect(data, i, le, 0x30, "varbind")
        os_, oe = _expect(data, bs, be, 0x06, "varbind name")
        tag, s, e = _header(data, oe, be)
        if e != be:
            raise BerError(f"varbind at byte {i}: bytes after its value")
        varbinds.append((decode_oid(mv[os_:oe]), _value(tag, mv[s:e])))
        i = be
    return Response(bytes(data[cs:ce]), fields[0], fields[1], fields[2], varbinds)
