"""GUID helpers (pure, no Django).

IB GUIDs are EUI-64 values (IBTA Vol 1, 4.1.1). Tools print them padded (``0x0002c90300a1b2c3``)
or unpadded (``0x2c90300a1b2c3``), with or without ``0x``; Weft compares them as 64-bit numbers
and stores the canonical form ``0x`` + 16 lowercase hex digits.
"""

from __future__ import annotations

import re

_HEX = re.compile(r"^(?:0x)?([0-9a-fA-F]{1,16})$")


def guid_to_int(text: str | int) -> int:
    """Return a GUID as an int in [0, 2**64).

    Raises:
        ValueError: ``text`` is not 1..16 hex digits (optionally prefixed by ``0x``).
    """
    if isinstance(text, int):
        if not 0 <= text < 1 << 64:
            raise ValueError(f"GUID {text} is out of the 64-bit range")
        return text
    match = _HEX.match(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a GUID (1 to 16 hex digits)")
    return int(match.group(1), 16)


def normalize_guid(text: str | int) -> str:
    """Return the canonical form ``0x%016x`` of a GUID.

    Raises:
        ValueError: as :func:`guid_to_int`.
    """
    return f"0x{guid_to_int(text):016x}"


def is_guid(text: str) -> bool:
    """True when ``text`` parses as a GUID."""
    return bool(_HEX.match(text.strip()))
