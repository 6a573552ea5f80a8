"""Send real SNMP traps (v2c and v3 USM) to a receiver on loopback (pysnmp), for the trap tests."""

from __future__ import annotations

from pysnmp.hlapi.v3arch.asyncio import (
    CommunityData,
    ContextData,
    NotificationType,
    ObjectIdentity,
    SnmpEngine,
    UdpTransportTarget,
    send_notification,
)
from pysnmp.proto.rfc1902 import Integer

from devices import mibs


def send(
    port: int, community: str, trap_oid: str, if_index: int, admin: int, oper: int, host="127.0.0.1"
) -> None:
    """Send one SNMPv2c linkUp/linkDown-style trap (``trap_oid``) for ``if_index`` to ``host:port``."""

    async def go():
        eng = SnmpEngine()
        note = NotificationType(ObjectIdentity(trap_oid)).add_varbinds(
            (f"{mibs.IF_INDEX}.{if_index}", Integer(if_index)),
            (f"{mibs.IF_ADMIN}.{if_index}", Integer(admin)),
            (f"{mibs.IF_OPER}.{if_index}", Integer(oper)),
        )
        ei, *_ = await send_notification(
            eng, CommunityData(community, mpModel=1), await UdpTransportTarget.create((host, port)),
            ContextData(), "trap", note,
        )  # fmt: skip
        assert not ei, ei
        eng.close_dispatcher()

    return go()


def send_v3(port: int, engine_hex: str, user: str, auth_key: str, priv_key: str, if_index: int):
    """A coroutine sending one SNMPv3 authPriv (SHA, AES-128) linkDown trap from an engine whose
    snmpEngineID is ``engine_hex`` (the trap sender is the authoritative engine)."""
    from pysnmp.hlapi.v3arch.asyncio import UsmUserData
    from pysnmp.hlapi.v3arch.asyncio import auth as a
    from pysnmp.proto.rfc1902 import OctetString

    async def go():
        eng = SnmpEngine(OctetString(hexValue=engine_hex))
        note = NotificationType(ObjectIdentity(mibs.TRAP_LINK_DOWN)).add_varbinds(
            (f"{mibs.IF_INDEX}.{if_index}", Integer(if_index)), (f"{mibs.IF_OPER}.{if_index}", Integer(2))
        )
        usm = UsmUserData(
            user, auth_key, priv_key, authProtocol=a.USM_AUTH_HMAC96_SHA, privProtocol=a.USM_PRIV_CFB128_AES
        )
        ei, *_ = await send_notification(
            eng, usm, await UdpTransportTarget.create(("127.0.0.1", port)), ContextData(), "trap", note
        )
        assert not ei, ei
        eng.close_dispatcher()

    return go()
