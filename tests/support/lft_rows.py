"""Linear forwarding tables written by hand for the routing tests: :func:`lft` turns ``{LID: out
port}`` into the table's bytes (``routing.parsers.UNASSIGNED`` for every other LID up to ``top``),
as the switch's LinearForwardingTable blocks read (IBTA vol. 1, 14.2.5.10)."""

from __future__ import annotations

from routing.parsers import UNASSIGNED


def lft(entries: dict[int, int], top: int = 21) -> bytes:
    """The LFT of LIDs 0..``top``: ``entries[lid]`` where given, else ``UNASSIGNED``."""
    return bytes(entries.get(i, UNASSIGNED) for i in range(top + 1))
