"""Syslog messages (RFC 5424) and their transport over UDP (RFC 5426) and TCP with octet-counting
framing (RFC 6587 §3.4.1), for ``outbound``'s one sender.

Why not a library: Python's ``logging.handlers.SysLogHandler`` writes RFC 3164; the PyPI
``rfc5424-logging-handler`` (last release 2021) builds a message only from a ``LogRecord``
inside a ``logging.Handler`` that opens its socket in the constructor and swallows send errors
(``handleError``), so a failed attempt could not be logged and retried by ``outbound``. The
format is small and fully specified; :func:`format_message` follows RFC 5424 §6 field by field.

A message (RFC 5424 §6)::

    SYSLOG-MSG = HEADER SP STRUCTURED-DATA [SP MSG]
    HEADER     = "<" PRIVAL ">" "1" SP TIMESTAMP SP HOSTNAME SP APP-NAME SP PROCID SP MSGID

PRIVAL = facility × 8 + severity (§6.2.1); TIMESTAMP RFC 3339 in UTC with microseconds (§6.2.3);
HOSTNAME ≤ 255, APP-NAME ≤ 48, PROCID ≤ 128, MSGID ≤ 32 printable US-ASCII characters, ``-``
when empty (NILVALUE); STRUCTURED-DATA one SD-ELEMENT ``[id name="value" …]`` whose values
escape ``"``, ``\\`` and ``]`` with a backslash (§6.3.3); MSG is UTF-8 starting with the BOM
(§6.4). Line breaks in MSG are replaced by spaces, so a stored batch is one message a line.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from urllib.parse import urlsplit

#: syslog severities (RFC 5424 table 2)
EMERGENCY, ALERT, CRITICAL, ERROR, WARNING, NOTICE, INFORMATIONAL, DEBUG = range(8)
#: facility local0 (RFC 5424 table 1: 16 … 23 are local0 … local7)
LOCAL0 = 16
BOM = "\ufeff"
NILVALUE = "-"
SCHEMES = ("syslog+udp", "syslog+tcp")


def _printusascii(text: str, limit: int) -> str:
    """``text`` kept to PRINTUSASCII (33–126) and ``limit`` characters; NILVALUE when empty."""
    out = "".join(c for c in str(text) if 33 <= ord(c) <= 126)[:limit]
    return out or NILVALUE


def _sd_name(name: str) -> str:
    """An SD-NAME (§6.3.2): PRINTUSASCII except ``=``, space, ``]`` and ``"``, 1–32 characters."""
    out = "".join(c for c in name if 33 <= ord(c) <= 126 and c not in '= ]"')[:32]
    if not out:
        raise ValueError(f"not an SD-NAME: {name!r}")
    return out


def escape_param(value: object) -> str:
    """PARAM-VALUE (§6.3.3): ``"``, ``\\`` and ``]`` escaped with a backslash."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("]", "\\]")


def format_message(
    *, severity: int, at: datetime, msg: str, facility: int = LOCAL0, hostname: str = "", app_name: str = "weft",
    procid: str = "", msgid: str = "", sd_id: str = "", params: Mapping[str, object] | None = None,
) -> str:  # fmt: skip
    """One RFC 5424 message as text (without transport framing).

    ``severity`` 0–7 and ``facility`` 0–23 (§6.2.1, else ``ValueError``); ``at`` an aware
    datetime (written in UTC, microseconds); ``sd_id`` (e.g. ``weft@32473``: a name with ``@``
    and a private enterprise number, §7.2.2) with ``params`` becomes the one SD-ELEMENT (empty
    values are left out; no ``sd_id``: NILVALUE). ``msg`` is written after a BOM, line breaks
    as spaces.
    """
    if not 0 <= severity <= 7 or not 0 <= facility <= 23:
        raise ValueError(f"severity {severity} / facility {facility} out of range")
    ts = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    header = (
        f"<{facility * 8 + severity}>1 {ts} {_printusascii(hostname, 255)} {_printusascii(app_name, 48)} "
        f"{_printusascii(procid, 128)} {_printusascii(msgid, 32)}"
    )
    sd = NILVALUE
    if sd_id:
        pairs = "".join(
            f' {_sd_name(k)}="{escape_param(v)}"' for k, v in (params or {}).items() if v not in (None, "")
        )
        sd = f"[{_sd_name(sd_id)}{pairs}]"
    text = " ".join(str(msg).split())
    return f"{header} {sd} {BOM}{text}" if text else f"{header} {sd}"


def octet_frame(message: str) -> bytes:
    """RFC 6587 §3.4.1 octet counting: ``MSG-LEN SP SYSLOG-MSG`` (the length in octets)."""
    data = message.encode("utf-8")
    return str(len(data)).encode("ascii") + b" " + data


def parse_address(url: str) -> tuple[str, str, int]:
    """``syslog+udp://host:port`` → ``("udp", host, port)``; ``ValueError`` for anything else."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES or not parts.hostname or not parts.port:
        raise ValueError(f"not a syslog address (syslog+udp://host:port or syslog+tcp://host:port): {url!r}")
    return parts.scheme.split("+", 1)[1], parts.hostname, parts.port


def send(url: str, messages: Iterable[str], timeout: float) -> int:
    """Send ``messages`` to the receiver ``url`` (:func:`parse_address`): over UDP one datagram
    each (RFC 5426), over TCP one connection with octet-counted frames (RFC 6587). Returns the
    number sent. Raises ``OSError`` (refused, unreachable, timeout) or ``ValueError`` (address)."""
    proto, host, port = parse_address(url)
    items = [m for m in messages if m]
    family, kind, _, _, addr = socket.getaddrinfo(
        host, port, 0, socket.SOCK_DGRAM if proto == "udp" else socket.SOCK_STREAM
    )[0]
    with socket.socket(family, kind) as sock:
        sock.settimeout(timeout)
        sock.connect(addr)
        if proto == "udp":
            for m in items:
                sock.send(m.encode("utf-8"))
        else:
            sock.sendall(b"".join(octet_frame(m) for m in items))
    return len(items)
