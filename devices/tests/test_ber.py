"""The hand-written SNMPv2c BER of ``devices.collectors.ber`` against pyasn1's (pysnmp's own codec):
what it encodes pyasn1 reads back as the same request, what pyasn1 encodes it decodes to the values
``devices.collectors.snmp.plain`` gives, and broken input is a ``BerError``, never another error."""

from __future__ import annotations

import random

import pytest
from pyasn1.codec.ber import decoder, encoder
from pysnmp.proto import api, rfc1902, rfc1905

from devices.collectors import ber
from devices.collectors.snmp import plain

V2C = api.PROTOCOL_MODULES[api.SNMP_VERSION_2C]

VALUES = [
    ("1.3.6.1.2.1.1.1.0", rfc1902.OctetString(b"Arista Networks EOS \xff\x00")),
    ("1.3.6.1.2.1.1.2.0", rfc1902.ObjectIdentifier("1.3.6.1.4.1.30065.1.3011.7150.52")),
    ("1.3.6.1.2.1.1.3.0", rfc1902.TimeTicks(4294967295)),
    ("1.3.6.1.2.1.2.2.1.7.1", rfc1902.Integer(1)),
    ("1.3.6.1.2.1.2.2.1.8.2", rfc1902.Integer(-2147483648)),
    ("1.3.6.1.2.1.2.2.1.13.3", rfc1902.Counter32(4294967295)),
    ("1.3.6.1.2.1.2.2.1.5.4", rfc1902.Gauge32(10**9)),
    ("1.3.6.1.2.1.31.1.1.1.6.100001", rfc1902.Counter64(18446744073709551615)),
    ("1.3.6.1.2.1.31.1.1.1.10.5", rfc1902.Counter64(0)),
    ("1.3.6.1.2.1.4.20.1.1.10.0.0.1", rfc1902.IpAddress("10.0.0.1")),
    ("1.3.6.1.4.1.9.9.999.1", rfc1902.Opaque(b"\x9f\x78\x04\x00")),
    ("2.999.1", rfc1902.Integer(7)),
    ("1.3.6.1.2.1.1.9.0", rfc1905.noSuchObject),
    ("1.3.6.1.2.1.1.10.0", rfc1905.noSuchInstance),
    ("1.3.6.1.2.1.99.1.1.1.4.1", rfc1905.endOfMibView),
]


def _response(varbinds, request_id=1234567, status=0, index=0, community=b"dev042") -> bytes:
    pdu = V2C.ResponsePDU()
    V2C.apiPDU.set_defaults(pdu)
    V2C.apiPDU.set_request_id(pdu, request_id)
    V2C.apiPDU.set_error_status(pdu, status)
    V2C.apiPDU.set_error_index(pdu, index)
    V2C.apiPDU.set_varbinds(pdu, [(rfc1902.ObjectName(o), v) for o, v in varbinds])
    msg = V2C.Message()
    V2C.apiMessage.set_defaults(msg)
    V2C.apiMessage.set_community(msg, community)
    V2C.apiMessage.set_pdu(msg, pdu)
    return encoder.encode(msg)


def test_a_response_decodes_to_the_values_pysnmp_gives():
    got = ber.decode_response(_response(VALUES))
    assert (got.community, got.request_id, got.error_status, got.error_index) == (b"dev042", 1234567, 0, 0)
    assert [".".join(map(str, oid)) for oid, _ in got.varbinds] == [o for o, _ in VALUES]
    want = [plain(v) for _, v in VALUES]
    want[10] = b"\x9f\x78\x04\x00"  # Opaque: its bytes (plain() gave pysnmp's str of them)
    want[-1] = ber.END_OF_MIB  # plain() says None; the walk needs to tell it from noSuch*
    assert [v for _, v in got.varbinds] == want


def test_error_status_and_big_messages():
    got = ber.decode_response(_response(VALUES[:1], request_id=1, status=5, index=1))
    assert (got.error_status, got.error_name, got.error_index) == (5, "genErr", 1)
    many = [(f"1.3.6.1.2.1.31.1.1.1.6.{i}", rfc1902.Counter64(i * 10**12)) for i in range(1, 300)]
    msg = _response(many)
    assert len(msg) > 0xFF  # long-form lengths of two bytes
    assert [v for _, v in ber.decode_response(msg).varbinds] == [i * 10**12 for i in range(1, 300)]


@pytest.mark.parametrize("reps", [None, 4, 64])
def test_a_request_reads_back_in_pyasn1_as_sent(reps):
    oids = [(1, 3, 6, 1, 2, 1, 2, 2, 1, 7), (1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 6, 200001), (2, 999, 3)]
    raw = ber.encode_request(b"public", 2**31 - 1, oids, max_repetitions=reps)
    msg, rest = decoder.decode(raw, asn1Spec=V2C.Message())
    assert rest == b"" and bytes(V2C.apiMessage.get_community(msg)) == b"public"
    pdu = V2C.apiMessage.get_pdu(msg)
    assert isinstance(pdu, V2C.GetRequestPDU if reps is None else V2C.GetBulkRequestPDU)
    assert int(V2C.apiPDU.get_request_id(pdu)) == 2**31 - 1
    if reps is not None:
        assert int(V2C.apiBulkPDU.get_max_repetitions(pdu)) == reps
        assert int(V2C.apiBulkPDU.get_non_repeaters(pdu)) == 0
    assert [tuple(n) for n, _ in V2C.apiPDU.get_varbinds(pdu)] == oids


def test_broken_input_is_a_ber_error():
    good = _response(VALUES)
    for cut in range(len(good)):  # every truncation
        with pytest.raises(ber.BerError):
            ber.decode_response(good[:cut])
    rng = random.Random(25)
    for _ in range(2000):  # flipped bytes: a BerError or a (different) decoded message, nothing else
        bad = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        try:
            ber.decode_response(bytes(bad))
        except ber.BerError:
            pass
    for junk in (b"", b"\x61\x03\x02\x01\x00", b"\x30\x03\x02\x01\x03", bytes(range(48))):
        with pytest.raises(ber.BerError):
            ber.decode_response(junk)
    with pytest.raises(ber.BerError):
        ber.encode_oid((3, 1))
