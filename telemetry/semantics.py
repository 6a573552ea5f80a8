"""Counter semantics: from two samples of a port's counters to rates, utilisation, congestion (pure).

Sources: IBTA Architecture Specification Vol 1 (release 1.4+), ch. 16.1 Performance Management:
PortCounters (16.1.3.5, Table 247), PortCountersExtended (16.1.4.11); ``perfquery(8)``.

* **Words, not bytes.** PortXmitData/PortRcvData count data octets divided by 4 (IBTA 16.1.3.5:
  "in units of 32-bit words"): bytes = value × 4.
* **Saturation.** PortCounters are saturating counters (IBTA: "the counter stops at its maximum
  value"): the 32-bit data/packet counters and PortXmitWait stop at 2**32-1, the error counters at
  their width (SymbolErrorCounter 16 bits, LinkDownedCounter 8, LocalLinkIntegrityErrors 4 ...).
  A counter at its maximum has lost counts: no delta can be taken from it (before or after), so
  **that counter** gives no rate or delta this interval and is listed in ``saturated``; the other
  counters of the port are independent registers and keep theirs (a saturated PortXmitData still
  leaves PortRcvData's rate and the error deltas); utilisation needs both data rates.
  PortCountersExtended (64-bit) do not saturate in practice (2**64 words at 800 Gb/s ≈ 2,300 years).
* **Reset.** A counter that went down was cleared (by someone's ``perfquery -R``, a reboot or a
  port flap on some devices): the interval gives **no rate**, never a negative or huge one, and
  the port is flagged ``reset``; the next interval is normal again.
* **32/64-bit switch.** Deltas are only taken between samples of the same source (both extended
  or both 32-bit).
* **Utilisation** = max(xmit, rcv bytes/s) / link data rate in bytes/s. The link data rate is
  width × lane rate after line encoding (``fabric.rates``: 4x HDR = 4 × 50 Gb/s × 64/66... quoted as
  200 Gb/s data rate; 4x SDR/DDR/QDR use 8b/10b: 8, 16, 32 Gb/s). Clamped to [0, 1] (the sweep
  interval is measured at the poller, so a short measured interval can exceed 1 by jitter).
* **Congestion index** = fraction of the interval during which the port had data to send but could
  not (no credits / no arbitration): ``min(1, ΔPortXmitWait × tick / Δt)``. PortXmitWait counts
  "ticks" whose duration the IBTA leaves to the implementation; Weft assumes
  ``settings.WEFT_XMIT_WAIT_TICK_NS`` (default 1000 ns, i.e. one count per blocked microsecond —
  calibrate per device family) and always shows the raw ``xmit_wait_per_s`` (ticks/s) beside the
  index so nothing depends on the assumption silently.

Ethernet (SNMP IF-MIB) counters, whose semantics differ (they *wrap*), are at the end of this
module: :func:`derive_wrapping`, the one rate code of the devices app.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ERROR_COUNTERS: tuple[str, ...] = (
    "symbol_errors",
    "link_error_recovery",
    "link_downed",
    "rcv_errors",
    "rcv_remote_phys_errors",
    "xmit_discards",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "vl15_dropped",
    "xmit_constraint_errors",
    "rcv_constraint_errors",
)
RATE_COUNTERS: tuple[str, ...] = ("xmit_data", "rcv_data", "xmit_pkts", "rcv_pkts", "xmit_wait")
ALL_COUNTERS: tuple[str, ...] = RATE_COUNTERS + ERROR_COUNTERS

WIDTH_32: dict[str, int] = {
    "xmit_data": 0xFFFFFFFF,
    "rcv_data": 0xFFFFFFFF,
    "xmit_pkts": 0xFFFFFFFF,
    "rcv_pkts": 0xFFFFFFFF,
    "xmit_wait": 0xFFFFFFFF,
    "symbol_errors": 0xFFFF,
    "link_error_recovery": 0xFF,
    "link_downed": 0xFF,
    "rcv_errors": 0xFFFF,
    "rcv_remote_phys_errors": 0xFFFF,
    "xmit_discards": 0xFFFF,
    "local_link_integrity_errors": 0xF,
    "excessive_buffer_overrun_errors": 0xF,
    "vl15_dropped": 0xFFFF,
    "xmit_constraint_errors": 0xFF,
    "rcv_constraint_errors": 0xFF,
}
"""Maximum (saturation) value of each PortCounters field (IBTA Vol 1, Table 247)."""

EXTENDED_FIELDS = frozenset({"xmit_data", "rcv_data", "xmit_pkts", "rcv_pkts"})
U64_MAX = (1 << 64) - 1
DEFAULT_TICK_NS = 1000.0


def counter_max(name: str, extended: bool) -> int:
    """The maximum value of counter ``name``: 2**64-1 for extended data/packets, else its width."""
    if extended and name in EXTENDED_FIELDS:
        return U64_MAX
    return WIDTH_32[name]


def saturated_counters(values: dict[str, int | None], extended: bool) -> list[str]:
    """Names of the counters of ``values`` sitting at their maximum (in :data:`ALL_COUNTERS` order)."""
    return [n for n in ALL_COUNTERS if values.get(n) is not None and values[n] >= counter_max(n, extended)]


MAX_32: tuple[int, ...] = tuple(WIDTH_32[n] for n in ALL_COUNTERS)
MAX_64: tuple[int, ...] = tuple(U64_MAX if n in EXTENDED_FIELDS else WIDTH_32[n] for n in ALL_COUNTERS)
_N_RATE = len(RATE_COUNTERS)


@dataclass
class Sample:
    """One reading of a port: raw counters (data in 4-byte words), source width, time (epoch s)."""

    values: dict[str, int | None]
    extended: bool
    t: float


@dataclass
class Derived:
    """Rates of one interval (None = no rate: first sample, reset, stale, or that counter saturated).

    ``xmit_bytes_per_s``/``rcv_bytes_per_s`` bytes/s; ``*_pkts_per_s`` packets/s;
    ``xmit_wait_per_s`` PortXmitWait ticks/s; ``utilisation`` and ``congestion`` in [0, 1];
    ``error_deltas`` ``{counter: delta > 0}`` of the unsaturated error counters (None when the
    interval gives nothing at all); ``saturated`` counter names at their maximum now; ``reset`` a
    counter went down; ``reason`` why there is no rate, or which rate counters have none
    ("saturated: xmit_data"); "" when every rate could be taken.
    """

    xmit_bytes_per_s: float | None = None
    rcv_bytes_per_s: float | None = None
    xmit_pkts_per_s: float | None = None
    rcv_pkts_per_s: float | None = None
    xmit_wait_per_s: float | None = None
    utilisation: float | None = None
    congestion: float | None = None
    error_deltas: dict[str, int] | None = None
    saturated: list[str] = field(default_factory=list)
    reset: bool = False
    reason: str = ""
    #: wrapping counters (Ethernet, :func:`derive_wrapping`): the counters that wrapped this interval
    wrapped: list[str] = field(default_factory=list)


DERIVED_FIELDS: tuple[str, ...] = (
    "xmit_bytes_per_s",
    "rcv_bytes_per_s",
    "xmit_pkts_per_s",
    "rcv_pkts_per_s",
    "xmit_wait_per_s",
    "utilisation",
    "congestion",
)
"""The per-interval values of :class:`Derived` (its float fields, in order), stored under the same
names on ``telemetry.models.PortCounters`` and shown by the API, ``show_port`` and ``/metrics``."""


def link_bytes_per_s(rate_gbps: float | None) -> float | None:
    """Link data rate in bytes/s from a data rate in Gb/s (after encoding); None if unknown/0."""
    if not rate_gbps:
        return None
    return rate_gbps * 1e9 / 8.0


def congestion_index(xmit_wait_per_s: float, tick_ns: float = DEFAULT_TICK_NS) -> float:
    """Fraction of time the port waited to transmit: ``min(1, ticks/s × tick seconds)``.

    ``tick_ns`` is the assumed PortXmitWait tick (see the module docstring).
    """
    return max(0.0, min(1.0, xmit_wait_per_s * tick_ns * 1e-9))


def congestion_indexes(xmit_wait_per_s: list[float | None], tick_ns: float = DEFAULT_TICK_NS) -> list:
    """:func:`congestion_index` of each value of a series (None stays None), the same floats,
    without a call per value (a job's history reads a million of them)."""
    return [
        None if w is None else 0.0 if (c := w * tick_ns * 1e-9) <= 0.0 else 1.0 if c >= 1.0 else c
        for w in xmit_wait_per_s
    ]


def utilisations(xmit: list[float | None], rcv: list[float | None], cap: float | None) -> list:
    """Utilisation of each time step of a series as :func:`derive_raw` computes it,
    ``max(0, min(1, max(xmit, rcv) / cap))`` (bytes/s over the link's bytes/s,
    :func:`link_bytes_per_s`); None where either rate is None or ``cap`` is unknown."""
    if not cap:
        return [None] * len(xmit)
    return [
        None
        if x is None or r is None
        else 0.0
        if (u := (x if x > r else r) / cap) <= 0.0
        else 1.0
        if u >= 1.0
        else u
        for x, r in zip(xmit, rcv, strict=True)
    ]


def derive(
    prev: Sample | None, curr: Sample, rate_gbps: float | None, tick_ns: float = DEFAULT_TICK_NS
) -> Derived:
    """Compute the rates of the interval ``prev`` → ``curr`` of one port.

    No rate at all (all derived None, ``error_deltas`` None, ``reason`` set) when: there is no
    previous sample, the interval is not positive, the samples come from different widths (32 vs
    64-bit), or any counter went down (``reset``). Otherwise saturation is per counter (IBTA
    16.1.3: a counter stops at its maximum, the others go on): a rate counter saturated now or
    before has no rate (``reason`` names it) and the rest keep theirs; saturated error counters
    are left out of ``error_deltas``. ``utilisation`` is None when the link rate is unknown or a
    data counter has no rate.
    """
    raw = tuple(curr.values.get(n) for n in ALL_COUNTERS)
    if prev is None:
        return derive_raw(None, False, 0.0, raw, curr.extended, curr.t, rate_gbps, tick_ns)
    prev_raw = tuple(prev.values.get(n) for n in ALL_COUNTERS)
    return derive_raw(prev_raw, prev.extended, prev.t, raw, curr.extended, curr.t, rate_gbps, tick_ns)


def derive_raw(
    prev: tuple | None,
    prev_ext: bool,
    prev_t: float,
    curr: tuple,
    ext: bool,
    t: float,
    rate_gbps: float | None,
    tick_ns: float = DEFAULT_TICK_NS,
) -> Derived:
    """:func:`derive` on raw tuples in :data:`ALL_COUNTERS` order (None = not read); the sweep's
    fast path over tens of thousands of ports. Same rules and result as :func:`derive`: saturation
    blanks only the saturated counters' rates and deltas."""
    maxes = MAX_64 if ext else MAX_32
    sat = [i for i, (v, m) in enumerate(zip(curr, maxes, strict=False)) if v is not None and v >= m]
    out = Derived(saturated=[ALL_COUNTERS[i] for i in sat])
    if prev is None:
        out.reason = "first sample"
        return out
    dt = t - prev_t
    if dt <= 0:
        out.reason = "no time elapsed"
        return out
    if prev_ext != ext:
        out.reason = "counter width changed (32/64-bit)"
        return out
    for a, b in zip(prev, curr, strict=False):
        if a is not None and b is not None and b < a:
            out.reset = True
            out.reason = "counters reset"
            return out
    # Per counter: a rate counter at its maximum (now or before) has no delta; blank it on both
    # sides so only its own rate is None (IBTA 16.1.3: the other counters keep counting).
    blocked = [
        i
        for i in range(_N_RATE)
        if (curr[i] is not None and curr[i] >= maxes[i]) or (prev[i] is not None and prev[i] >= maxes[i])
    ]
    xd0, rd0, xp0, rp0, xw0 = prev[:_N_RATE]
    xd1, rd1, xp1, rp1, xw1 = curr[:_N_RATE]
    if blocked:
        out.reason = "saturated: " + ", ".join(ALL_COUNTERS[i] for i in blocked)
        r0, r1 = list(prev[:_N_RATE]), list(curr[:_N_RATE])
        for i in blocked:
            r0[i] = r1[i] = None
        xd0, rd0, xp0, rp0, xw0 = r0
        xd1, rd1, xp1, rp1, xw1 = r1
    if xd0 is not None and xd1 is not None:
        out.xmit_bytes_per_s = (xd1 - xd0) * 4.0 / dt
    if rd0 is not None and rd1 is not None:
        out.rcv_bytes_per_s = (rd1 - rd0) * 4.0 / dt
    if xp0 is not None and xp1 is not None:
        out.xmit_pkts_per_s = (xp1 - xp0) / dt
    if rp0 is not None and rp1 is not None:
        out.rcv_pkts_per_s = (rp1 - rp0) / dt
    if xw0 is not None and xw1 is not None:
        out.xmit_wait_per_s = (xw1 - xw0) / dt
        out.congestion = congestion_index(out.xmit_wait_per_s, tick_ns)
    cap = link_bytes_per_s(rate_gbps)
    if cap and out.xmit_bytes_per_s is not None and out.rcv_bytes_per_s is not None:
        out.utilisation = max(0.0, min(1.0, max(out.xmit_bytes_per_s, out.rcv_bytes_per_s) / cap))
    deltas: dict[str, int] = {}
    for i in range(_N_RATE, len(ALL_COUNTERS)):
        a, b = prev[i], curr[i]
        if a is None or b is None or b <= a or b >= maxes[i]:  # b > a, so a < max too
            continue
        deltas[ALL_COUNTERS[i]] = b - a
    out.error_deltas = deltas
    return out


_M32 = 0xFFFFFFFF


def derive_fast(
    prev: tuple | None,
    prev_ext: bool,
    prev_t: float | None,
    curr: tuple,
    ext: bool,
    t: float,
    rate_gbps: float | None,
    tick_ns: float = DEFAULT_TICK_NS,
) -> tuple | None:
    """The sweep's fast path of :func:`derive_raw` for the common interval, one port: see
    :func:`derive_fast_many` (the same rules and floats); ``rate_gbps`` the link data rate in Gb/s."""
    return derive_fast_many([(prev, prev_ext, prev_t, curr, ext, link_bytes_per_s(rate_gbps))], t, tick_ns)[0]


def derive_fast_many(items: list[tuple], t: float, tick_ns: float = DEFAULT_TICK_NS) -> list[tuple | None]:
    """The sweep's fast path of :func:`derive_raw` over many ports sampled at the same time ``t``
    (epoch s): ``items`` are ``(prev raw, prev extended, prev t, raw, extended, link bytes/s)``
    (raw tuples in :data:`ALL_COUNTERS` order, link bytes/s from :func:`link_bytes_per_s`, None
    when unknown). Taken for the common interval: a previous sample of the same width, no counter
    gone down or at its maximum (now or before), no error counter changed, every error counter
    below 15 (the narrowest width's maximum).

    Returns per item the 7 :data:`DERIVED_FIELDS` values (the same floats :func:`derive_raw`
    computes, same expressions in the same order), which implies ``error_deltas == {}``,
    ``saturated == []``, ``reset is False``, ``reason == ""``; or None for every other interval
    (the caller uses :func:`derive_raw`, the reference for all the rules). One loop with the
    rules inlined: no call per port (tens of thousands per sweep).
    """
    out: list[tuple | None] = []
    append = out.append
    for prev, prev_ext, prev_t, curr, ext, cap in items:
        if prev is None or prev_t is None or prev_ext != ext or t <= prev_t:
            append(None)
            continue
        dt = t - prev_t
        try:
            xd0, rd0, xp0, rp0, xw0 = prev[:5]
            xd1, rd1, xp1, rp1, xw1 = curr[:5]
            top = U64_MAX if ext else _M32
            errs = curr[5:]
            if not (
                xd0 <= xd1 < top
                and rd0 <= rd1 < top
                and xp0 <= xp1 < top
                and rp0 <= rp1 < top
                and xw0 <= xw1 < _M32
                and prev[5:] == errs
                and max(errs) < 15
            ):
                append(None)
                continue
        except TypeError:  # a counter not read (None): the general rules
            append(None)
            continue
        x = (xd1 - xd0) * 4.0 / dt
        r = (rd1 - rd0) * 4.0 / dt
        w = (xw1 - xw0) / dt
        c = w * tick_ns * 1e-9  # congestion_index, inlined (same expression, same order)
        append(
            (
                x,
                r,
                (xp1 - xp0) / dt,
                (rp1 - rp0) / dt,
                w,
                max(0.0, min(1.0, max(x, r) / cap)) if cap else None,
                0.0 if c < 0.0 else 1.0 if c > 1.0 else c,
            )
        )
    return out


# --- Ethernet (SNMP IF-MIB) counters: they wrap, they do not saturate --------------------------
#
# IF-MIB (RFC 2863) counters are SMIv2 Counter32/Counter64 (RFC 2578 7.1.6, 7.1.10): they count up
# and wrap to 0 after 2**32-1 / 2**64-1, unlike IB PortCounters, which stop. So a value lower than
# the previous one is a wrap (one wrap: pollers must read a 32-bit octet counter faster than it
# wraps, 34 s at 1 Gb/s, 0.34 s at 100 Gb/s — why the 64-bit ifHC* columns exist) unless the agent
# says its counters had a discontinuity (ifCounterDiscontinuityTime changed, or sysUpTime went
# back: the agent restarted), which is a reset: no rate for the interval, never a negative one.
# A 64-bit counter that went down was reset (2**64 octets at 800 Gb/s take 5.8 years). A wrap
# whose delta would exceed what the interface can carry in the interval (1.5 x its speed) was a
# reset as well (someone cleared the counters): no rate rather than an impossible one.
#
# Names map onto :class:`Derived`: ``xmit`` = out (ifHCOutOctets...), ``rcv`` = in; bytes are
# octets (no 4-byte words here). ``xmit_wait_per_s`` stays None (Ethernet has no PortXmitWait).
# The congestion signal, in [0, 1] like the IB index:
#   * with PFC counters (IEEE 802.1Qbb, IEEE8021-PFC-MIB ``ieee8021PfcIndications``: pause frames
#     the port received, i.e. the peer stopped our transmitter), the largest fraction of the
#     interval those frames can have paused it: frames/s x 65535 quanta x 512 bit times / speed;
#   * without, the share of egress packets the port discarded (tail drops under congestion):
#     Δ ifOutDiscards / (Δ ifOutUcastPkts + Δ ifOutDiscards).

ETHERNET_COUNTERS: tuple[str, ...] = (
    "out_octets",
    "in_octets",
    "out_pkts",
    "in_pkts",
    "in_discards",
    "in_errors",
    "out_discards",
    "out_errors",
    "pfc_in",
    "pfc_out",
)
"""Raw Ethernet counters, in order: the four rate counters (64-bit ifHC* where the agent has them,
else the 32-bit ifTable ones) and the event counters (32-bit ifTable discards/errors, PFC frames)."""
ETHERNET_EVENT_COUNTERS: tuple[str, ...] = ETHERNET_COUNTERS[4:]
_HC_FIELDS = frozenset(ETHERNET_COUNTERS[:4])
PFC_MAX_PAUSE_BITS = 65535 * 512
"""Bit times one PFC frame can pause a priority for at most (IEEE 802.1Qbb: 65535 quanta of 512)."""
_WRAP_SLACK = 1.5


def wrap_width(name: str, hc: bool, *values: int | None) -> int:
    """Bits of Ethernet counter ``name``: 64 for the rate counters read from ifHC* (``hc``), 32
    for the ifTable ones; PFC counters (Counter32 on the devices recorded, Counter64 in the MIB)
    64 once a value shows it."""
    if name in _HC_FIELDS:
        return 64 if hc else 32
    if name.startswith("pfc_") and any(v is not None and v > 0xFFFFFFFF for v in values):
        return 64
    return 32


def wrap_delta(a: int | None, b: int | None, bits: int) -> tuple[int | None, bool]:
    """``(delta, wrapped)`` from ``a`` to ``b`` of a counter of ``bits`` bits: ``b - a``, or one wrap
    (``b + 2**bits - a``) when ``b < a``; ``(None, False)`` when a value is missing."""
    if a is None or b is None:
        return None, False
    if b >= a:
        return b - a, False
    return b + (1 << bits) - a, True


def derive_wrapping(
    prev: Sample | None, curr: Sample, speed_gbps: float | None, *, discontinuity: bool = False
) -> Derived:
    """Rates of one Ethernet interface over ``prev`` → ``curr`` (values keyed by
    :data:`ETHERNET_COUNTERS`; ``extended`` = the rate counters are 64-bit ifHC* ones).

    No rate (``reason`` set) for: no previous sample, no time elapsed, a 32/64-bit switch, or a
    discontinuity (``discontinuity``: ifCounterDiscontinuityTime changed or the agent restarted;
    a 64-bit counter that went down; a wrap giving more than 1.5 x the interface speed), which set
    ``reset``. Otherwise per counter: a wrap is counted once (``wrapped`` names them), bytes/s and
    packets/s, ``utilisation`` = max(in, out bytes/s) / speed (None when the speed is unknown),
    ``error_deltas`` ``{counter: delta > 0}`` of :data:`ETHERNET_EVENT_COUNTERS`, ``congestion`` as
    the module's Ethernet notes say (None when it cannot be computed). Source: RFC 2863, RFC 2578.
    """
    out = Derived()
    if prev is None:
        out.reason = "first sample"
        return out
    dt = curr.t - prev.t
    if dt <= 0:
        out.reason = "no time elapsed"
        return out
    if prev.extended != curr.extended:
        out.reason = "counter width changed (32/64-bit)"
        return out
    if discontinuity:
        out.reset, out.reason = True, "counter discontinuity (agent restart or counters cleared)"
        return out
    cap = link_bytes_per_s(speed_gbps)
    deltas: dict[str, int | None] = {}
    for name in ETHERNET_COUNTERS:
        a, b = prev.values.get(name), curr.values.get(name)
        bits = wrap_width(name, curr.extended, a, b)
        delta, wrapped = wrap_delta(a, b, bits)
        if wrapped and (bits == 64 or (cap and name.endswith("octets") and delta / dt > cap * _WRAP_SLACK)):
            out.reset, out.reason = True, f"counters reset ({name} went down)"
            return out
        if wrapped:
            out.wrapped.append(name)
        deltas[name] = delta
    if deltas["out_octets"] is not None:
        out.xmit_bytes_per_s = deltas["out_octets"] / dt
    if deltas["in_octets"] is not None:
        out.rcv_bytes_per_s = deltas["in_octets"] / dt
    if deltas["out_pkts"] is not None:
        out.xmit_pkts_per_s = deltas["out_pkts"] / dt
    if deltas["in_pkts"] is not None:
        out.rcv_pkts_per_s = deltas["in_pkts"] / dt
    if cap and out.xmit_bytes_per_s is not None and out.rcv_bytes_per_s is not None:
        out.utilisation = max(0.0, min(1.0, max(out.xmit_bytes_per_s, out.rcv_bytes_per_s) / cap))
    pause, drops, sent = deltas["pfc_in"], deltas["out_discards"], deltas["out_pkts"]
    if pause is not None and speed_gbps:
        out.congestion = max(0.0, min(1.0, pause / dt * PFC_MAX_PAUSE_BITS / (speed_gbps * 1e9)))
    elif drops is not None and sent is not None:
        out.congestion = drops / (sent + drops) if sent + drops else 0.0
    out.error_deltas = {n: deltas[n] for n in ETHERNET_EVENT_COUNTERS if deltas[n]}
    return out
