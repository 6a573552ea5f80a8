"""InfiniBand link rates (pure, no Django).

The data rate of a link is ``lanes × per-lane data rate``; the per-lane data rate is the signalling
rate after line encoding. Sources: IBTA Vol 2 (Physical Layer) rel. 1.3-1.5, ch. 5/6 (SDR/DDR/QDR
8b/10b; FDR10/FDR/EDR 64b/66b; HDR/NDR/XDR PAM4 with 256b/257b + FEC, quoted at the nominal 50/100/
200 Gb/s per lane), and the ``ibportstate``/``iblinkinfo`` man pages (``2.5``..``14.0625`` Gbps
signalling). Speed names are as ``ibnetdiscover`` prints them (``4xHDR``).

===== ====================== ========== ===================
speed signalling Gb/s / lane encoding   data Gb/s / lane
===== ====================== ========== ===================
SDR   2.5                    8b/10b     2
DDR   5                      8b/10b     4
QDR   10                     8b/10b     8
FDR10 10.3125                64b/66b    10
FDR   14.0625                64b/66b    13.636
EDR   25.78125               64b/66b    25
HDR   53.125 (PAM4)          FEC        50
NDR   106.25 (PAM4)          FEC        100
XDR   212.5 (PAM4)           FEC        200
===== ====================== ========== ===================
"""

from __future__ import annotations

import re

#: signalling rate per lane in Gb/s.
SIGNALLING_GBPS: dict[str, float] = {
    "SDR": 2.5,
    "DDR": 5.0,
    "QDR": 10.0,
    "FDR10": 10.3125,
    "FDR": 14.0625,
    "EDR": 25.78125,
    "HDR": 53.125,
    "NDR": 106.25,
    "XDR": 212.5,
}

#: data rate per lane in Gb/s after line encoding.
LANE_DATA_GBPS: dict[str, float] = {
    "SDR": 2.0,
    "DDR": 4.0,
    "QDR": 8.0,
    "FDR10": 10.3125 * 64 / 66,
    "FDR": 14.0625 * 64 / 66,
    "EDR": 25.78125 * 64 / 66,
    "HDR": 50.0,
    "NDR": 100.0,
    "XDR": 200.0,
}

#: lanes per link width (PortInfo:LinkWidthActive).
WIDTH_LANES: dict[str, int] = {"1x": 1, "2x": 2, "4x": 4, "8x": 8, "12x": 12}

#: speeds in increasing order (for "degraded" comparisons).
SPEED_ORDER = ["SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR"]

_LINK = re.compile(r"^(1x|2x|4x|8x|12x)(SDR|DDR|QDR|FDR10|FDR|EDR|HDR|NDR|XDR)?$", re.IGNORECASE)


def lanes(width: str) -> int | None:
    """Lanes of a width such as ``"4x"``; None when unknown."""
    return WIDTH_LANES.get(width.lower()) if width else None


def data_rate_gbps(width: str, speed: str) -> float | None:
    """Data rate in Gb/s (after encoding) of a link ``width`` × ``speed``, e.g. ("4x", "HDR") → 200.0.

    Returns None when either is unknown or empty. The result is rounded to 3 decimals.
    """
    n = lanes(width)
    per_lane = LANE_DATA_GBPS.get(speed.upper()) if speed else None
    if n is None or per_lane is None:
        return None
    return round(n * per_lane, 3)


def data_rate_bytes_per_s(width: str, speed: str) -> float | None:
    """Data rate of a link in bytes per second (for utilisation = bytes/s over this)."""
    gbps = data_rate_gbps(width, speed)
    return None if gbps is None else gbps * 1e9 / 8


def split_link(text: str) -> tuple[str, str] | None:
    """Split ``"4xHDR"`` into ``("4x", "HDR")`` (speed may be empty: ``"4x"`` → ``("4x", "")``).

    Returns None when ``text`` is not a width[speed] token.
    """
    m = _LINK.match(text.strip())
    if not m:
        return None
    return m.group(1).lower(), (m.group(2) or "").upper()


def speed_rank(speed: str) -> int:
    """Position of ``speed`` in :data:`SPEED_ORDER` (-1 when unknown)."""
    try:
        return SPEED_ORDER.index(speed.upper())
    except ValueError:
        return -1
