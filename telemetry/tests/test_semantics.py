"""Counter semantics (pure): words → bytes, saturation, reset, utilisation, congestion; MAD decoding."""

from __future__ import annotations

import struct

import pytest

from fabric.rates import data_rate_gbps
from telemetry.collectors import madpoll
from telemetry.semantics import (
    Sample,
    congestion_index,
    congestion_indexes,
    counter_max,
    derive,
    saturated_counters,
    utilisations,
)

ZERO = dict.fromkeys(madpoll.FIELDS, 0)


def s(t, ext=True, **values):
    v = dict(ZERO)
    v.update(values)
    return Sample(values=v, extended=ext, t=t)


def test_rates_in_bytes_from_words_and_utilisation_from_the_link_data_rate():
    rate = data_rate_gbps("4x", "HDR")  # 200 Gb/s data rate = 25e9 bytes/s
    d = derive(
        s(100.0, xmit_data=1_000, rcv_data=0),
        s(110.0, xmit_data=1_000 + 25_000_000_000, rcv_data=5_000_000_000),
        rate,
    )
    assert d.xmit_bytes_per_s == pytest.approx(25_000_000_000 * 4 / 10)
    assert d.rcv_bytes_per_s == pytest.approx(5_000_000_000 * 4 / 10)
    assert d.utilisation == pytest.approx(1e10 / 25e9)  # max of the two directions
    assert d.reason == "" and d.error_deltas == {}


def test_congestion_index_from_xmit_wait_with_the_tick_assumption():
    d = derive(s(0.0, xmit_wait=0), s(2.0, xmit_wait=500_000), 8.0, tick_ns=1000.0)
    assert d.xmit_wait_per_s == 250_000
    assert d.congestion == pytest.approx(0.25)  # 250,000 ticks/s × 1 µs
    d = derive(s(0.0, xmit_wait=0), s(1.0, xmit_wait=5_000_000), 8.0, tick_ns=1000.0)
    assert d.congestion == 1.0  # clamped


def test_first_sample_gives_no_rate():
    d = derive(None, s(1.0, xmit_data=5), 8.0)
    assert d.xmit_bytes_per_s is None and d.utilisation is None and d.reason == "first sample"


def test_saturated_32bit_counter_gives_no_rate_and_a_flag():
    top = 0xFFFFFFFF
    d = derive(s(0.0, False, xmit_data=top - 10), s(10.0, False, xmit_data=top), 8.0)
    assert d.saturated == ["xmit_data"]
    assert d.xmit_bytes_per_s is None and d.utilisation is None
    # only the saturated counter loses its rate (IBTA 16.1.3: the others keep counting)
    assert d.rcv_bytes_per_s == 0.0 and d.congestion == 0.0 and d.reason == "saturated: xmit_data"
    # still saturated on the next interval: still no rate (delta 0 would be a lie)
    d = derive(s(10.0, False, xmit_data=top), s(20.0, False, xmit_data=top), 8.0)
    assert d.xmit_bytes_per_s is None and "saturated" in d.reason
    # the same value is not saturated for a 64-bit counter
    d = derive(s(0.0, True, xmit_data=top - 10), s(10.0, True, xmit_data=top), 8.0)
    assert d.saturated == [] and d.xmit_bytes_per_s == pytest.approx(4.0)


def test_one_saturated_counter_leaves_the_others_their_rates_and_deltas():
    top = 0xFFFFFFFF
    rate = data_rate_gbps("4x", "QDR")
    before = s(0.0, False, xmit_data=top - 5, rcv_data=1_000, xmit_pkts=10, rcv_pkts=20, xmit_wait=100,
               symbol_errors=4, link_downed=1)  # fmt: skip
    after = s(10.0, False, xmit_data=top, rcv_data=1_000 + 2_500_000, xmit_pkts=10 + 300, rcv_pkts=20 + 700,
              xmit_wait=100 + 50_000, symbol_errors=6, link_downed=1)  # fmt: skip
    d = derive(before, after, rate)
    assert d.saturated == ["xmit_data"] and d.reset is False
    assert d.xmit_bytes_per_s is None and d.utilisation is None
    assert d.rcv_bytes_per_s == pytest.approx(2_500_000 * 4 / 10)
    assert (d.xmit_pkts_per_s, d.rcv_pkts_per_s, d.xmit_wait_per_s) == (30.0, 70.0, 5_000.0)
    assert d.congestion == pytest.approx(0.005)
    assert d.error_deltas == {"symbol_errors": 2}
    assert d.reason == "saturated: xmit_data"
    # a saturated error counter loses its delta only; the data rates stay
    before.values["xmit_data"] = 0
    after = s(10.0, False, xmit_data=1_000, rcv_data=1_000, xmit_pkts=10, rcv_pkts=20,
              xmit_wait=100, symbol_errors=0xFFFF, link_downed=3)  # fmt: skip
    d = derive(before, after, rate)
    assert d.saturated == ["symbol_errors"] and d.reason == ""
    assert d.xmit_bytes_per_s == pytest.approx(400.0) and d.error_deltas == {"link_downed": 2}


def test_decreasing_counter_is_a_reset_never_a_negative_rate():
    d = derive(s(0.0, xmit_data=10_000, symbol_errors=5), s(10.0, xmit_data=100, symbol_errors=0), 8.0)
    assert d.reset is True
    assert d.xmit_bytes_per_s is None and d.error_deltas is None


def test_error_deltas_only_for_counters_that_rose_and_not_saturated():
    d = derive(
        s(0.0, symbol_errors=1, link_downed=2, excessive_buffer_overrun_errors=3),
        s(5.0, symbol_errors=4, link_downed=2, excessive_buffer_overrun_errors=15),
        8.0,
    )
    assert d.error_deltas == {"symbol_errors": 3}  # EBO at 15 = its 4-bit maximum: saturated
    assert "excessive_buffer_overrun_errors" in d.saturated


def test_width_change_and_unknown_link_rate():
    assert derive(s(0.0, True), s(1.0, False), 8.0).reason.startswith("counter width")
    d = derive(s(0.0, xmit_data=0), s(1.0, xmit_data=10), None)
    assert d.xmit_bytes_per_s == 40.0 and d.utilisation is None


def test_counter_widths():
    assert counter_max("xmit_data", True) == 2**64 - 1
    assert counter_max("xmit_data", False) == 2**32 - 1
    assert counter_max("link_downed", True) == 255
    assert saturated_counters({"local_link_integrity_errors": 15, "vl15_dropped": 3}, True) == [
        "local_link_integrity_errors"
    ]


def test_madpoll_decodes_the_ibta_layout():
    # PortCounters data area (IBTA Vol 1 Table 247), big-endian, distinct value in every field
    pc = bytearray(44)
    struct.pack_into(">BBH", pc, 0, 0, 3, 0)
    struct.pack_into(
        ">HBBHHHHBBBBHH", pc, 4, 1001, 12, 13, 1004, 1005, 1006, 1007, 18, 19, 0, 0xAB, 1011, 1012
    )
    struct.pack_into(
        ">IIIII", pc, 24, 4_000_000_001, 4_000_000_002, 4_000_000_003, 4_000_000_004, 4_000_000_005
    )
    v = madpoll.decode_port_counters(bytes(pc))
    assert v == {
        "symbol_errors": 1001,
        "link_error_recovery": 12,
        "link_downed": 13,
        "rcv_errors": 1004,
        "rcv_remote_phys_errors": 1005,
        "xmit_discards": 1007,
        "xmit_constraint_errors": 18,
        "rcv_constraint_errors": 19,
        "local_link_integrity_errors": 0xA,
        "excessive_buffer_overrun_errors": 0xB,
        "vl15_dropped": 1012,
        "xmit_data": 4_000_000_001,
        "rcv_data": 4_000_000_002,
        "xmit_pkts": 4_000_000_003,
        "rcv_pkts": 4_000_000_004,
        "xmit_wait": 4_000_000_005,
    }
    ext = bytearray(40)
    struct.pack_into(">QQQQ", ext, 8, 2**63 + 1, 2**40, 7, 8)
    assert madpoll.decode_port_counters_ext(bytes(ext)) == {
        "xmit_data": 2**63 + 1,
        "rcv_data": 2**40,
        "xmit_pkts": 7,
        "rcv_pkts": 8,
    }


def test_madpoll_request_errors_name_the_line():
    with pytest.raises(ValueError, match="stdin line 2"):
        madpoll.parse_requests(["Q 1 1 1\n", "Q one 1 1\n"])
    assert madpoll.parse_requests(["N 4\n", "\n", "Q 4 2 0\n", "R 4 2\n"]) == [
        ("N", 4),
        ("Q", 4, 2, 0),
        ("R", 4, 2),
    ]


def test_derive_fast_equals_derive_raw_or_declines():
    """The sweep's fast path gives derive_raw's exact floats, or None (then derive_raw decides)."""
    import random

    from telemetry.semantics import ALL_COUNTERS, DERIVED_FIELDS, MAX_32, derive_fast, derive_raw

    rng = random.Random(7)
    edges = [0, 1, 14, 15, 0xFF, 0xFFFF, 0xFFFFFFFE, 0xFFFFFFFF]
    taken = declined = 0
    for _ in range(20000):
        ext = rng.random() < 0.5
        common = rng.random() < 0.6  # the idle port: small error counters, data counters moving
        prev = tuple(
            rng.randrange(0, 10**6) if i < 5 and common else rng.choice([0, 0, 3]) if common
            else rng.choice([rng.randrange(0, 1000), rng.choice(edges)])
            for i in range(len(ALL_COUNTERS))
        )  # fmt: skip
        prev = tuple(min(v, m) for v, m in zip(prev, MAX_32, strict=True))
        step = rng.random()
        curr = tuple(
            v if (i >= 5 and step < 0.7) else v + rng.choice([0, 0, 1, 250, 10**5, -1 if step > 0.5 else 0])
            for i, v in enumerate(prev)
        )
        curr = tuple(max(0, v) for v in curr)
        if rng.random() < 0.05:
            curr = (None, *curr[1:])
        prev_ext = ext if rng.random() < 0.95 else not ext
        rate = rng.choice([None, 0.0, 100.0, 200.0])
        t0, t1 = 1000.0, rng.choice([1000.0, 1010.123456, 999.0])
        fast = derive_fast(prev, prev_ext, t0, curr, ext, t1, rate, 1000.0)
        ref = derive_raw(prev, prev_ext, t0, curr, ext, t1, rate, 1000.0)
        if fast is None:
            declined += 1
            continue
        taken += 1
        assert fast == tuple(getattr(ref, f) for f in DERIVED_FIELDS)
        assert (ref.error_deltas, ref.saturated, ref.reset, ref.reason) == ({}, [], False, "")
    assert taken > 1000 and declined > 1000
    assert derive_fast(None, False, None, (0,) * 16, False, 1.0, None) is None


def test_series_forms_give_the_per_value_floats():
    """``utilisations`` and ``congestion_indexes`` (a history's series at once) give the floats
    of the per-sample formulas, clipped to [0, 1], None kept."""
    cap = 25e9
    xs = [0.0, 1e9, 3e10, None, 2.5e10, 7.123e9, -5.0, 1e9]
    rs = [0.0, 2e9, 1e9, 1e9, 1e9, 7.124e9, -1.0, None]
    want = [
        max(0.0, min(1.0, max(x, r) / cap)) if x is not None and r is not None else None
        for x, r in zip(xs, rs, strict=True)
    ]
    assert utilisations(xs, rs, cap) == want == [0.0, 0.08, 1.0, None, 1.0, 7.124e9 / cap, 0.0, None]
    assert utilisations(xs, rs, None) == [None] * len(xs)
    waits = [0.0, 1.0, 12345.6, 1e12, None, -3.0]
    assert congestion_indexes(waits, 5.0) == [None if w is None else congestion_index(w, 5.0) for w in waits]
    assert congestion_indexes(waits, 5.0)[3] == 1.0 and congestion_indexes(waits, 5.0)[5] == 0.0
