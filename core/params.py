"""Integer query parameters: ASCII digits only and within the database's 64-bit range.

``str.isdigit()`` is also true for "²" or "١", on which ``int()`` raises (a 500), and a 20-digit
number overflows SQLite's INTEGER (a 500 on the embedded deployment)."""

from __future__ import annotations

MAX_ID = (1 << 63) - 1


def int_param(value: str | None, *, lo: int = 0, hi: int = MAX_ID) -> int | None:
    """``int(value)`` when ``value`` is ASCII decimal digits within ``[lo, hi]``, else None."""
    value = (value or "").strip()
    if not (value.isascii() and value.isdigit()):
        return None
    number = int(value)
    return number if lo <= number <= hi else None
