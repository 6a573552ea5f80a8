"""``telemetry.semantics.derive_wrapping``: IF-MIB counters wrap (RFC 2578), IB ones saturate."""

from __future__ import annotations

import pytest

from telemetry.semantics import Sample, derive_wrapping, wrap_delta


def _s(t: float, hc: bool = True, **v) -> Sample:
    base = dict.fromkeys(("out_octets", "in_octets", "out_pkts", "in_pkts", "in_discards", "in_errors",
                          "out_discards", "out_errors"), 0)  # fmt: skip
    base.update({"pfc_in": None, "pfc_out": None}, **v)
    return Sample(base, hc, t)


def test_wrap_delta_counts_one_wrap():
    assert wrap_delta(10, 25, 32) == (15, False)
    assert wrap_delta(2**32 - 6, 4, 32) == (10, True)
    assert wrap_delta(None, 4, 32) == (None, False)


def test_32bit_wrap_is_one_wrap_and_64bit_decrease_is_a_reset():
    d = derive_wrapping(_s(0, False, in_octets=2**32 - 100), _s(10, False, in_octets=300), 1.0)
    assert d.rcv_bytes_per_s == 40.0 and d.wrapped == ["in_octets"] and not d.reset
    d = derive_wrapping(_s(0, True, in_octets=500), _s(10, True, in_octets=300), 100.0)
    assert d.reset and d.rcv_bytes_per_s is None and "in_octets" in d.reason


def test_impossible_wrap_is_a_reset_not_a_rate():
    """A 32-bit counter that went down by a little on a 1 Gb/s port in 10 s would have carried
    ~4.3 GB (3.4 Gb/s): counters cleared, not a wrap."""
    d = derive_wrapping(_s(0, False, in_octets=1_000_000), _s(10, False, in_octets=10), 1.0)
    assert d.reset and d.rcv_bytes_per_s is None


def test_discontinuity_and_first_sample_give_no_rate():
    assert derive_wrapping(None, _s(1), 1.0).reason == "first sample"
    d = derive_wrapping(_s(0, in_octets=1), _s(5, in_octets=2), 1.0, discontinuity=True)
    assert d.reset and d.rcv_bytes_per_s is None
    assert derive_wrapping(_s(0, False), _s(5, True), 1.0).reason.startswith("counter width")


def test_congestion_from_pfc_or_discards():
    # 100 Gb/s port, 10 s, 1000 PFC frames received: at most 1000 × 65535 × 512 bit times paused
    d = derive_wrapping(_s(0, pfc_in=0, pfc_out=0), _s(10, pfc_in=1000, pfc_out=0), 100.0)
    assert d.congestion == pytest.approx(1000 / 10 * 65535 * 512 / 100e9)
    assert d.error_deltas == {"pfc_in": 1000}
    d = derive_wrapping(_s(0, out_pkts=0, out_discards=0), _s(10, out_pkts=900, out_discards=100), 100.0)
    assert d.congestion == 0.1 and d.error_deltas == {"out_discards": 100}
    assert d.utilisation == 0.0
