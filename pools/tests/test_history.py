"""pools.history.usage_history: the step series of what a pool held (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pools.history import Span, usage_history

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def h(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def ts(hours: float) -> float:
    return h(hours).timestamp()


def test_steps_at_starts_and_ends_with_borrowed_and_slices():
    spans = [
        Span(h(1), h(5), gpus=4),
        Span(h(2), None, gpus=2, borrowed_gpus=1),
        Span(h(3), h(4), slices=3),
    ]
    out = usage_history(spans, h(0), h(6))
    assert out == {
        "t": [ts(0), ts(1), ts(2), ts(3), ts(4), ts(5), ts(6)],
        "gpus": [0, 4, 6, 6, 6, 2, 2],
        "borrowed_gpus": [0, 0, 1, 1, 1, 1, 1],
        "slices": [0, 0, 0, 3, 0, 0, 0],
    }


def test_window_clips_what_started_before_and_leaves_out_what_ended_before():
    spans = [
        Span(h(-10), h(-5), gpus=8),  # over before the window
        Span(h(-3), h(2), gpus=3),  # held when the window opens
        Span(h(-1), h(0), gpus=5),  # ends exactly at the start: [start, end) holds nothing then
        Span(h(7), None, gpus=1),  # starts after the window
    ]
    out = usage_history(spans, h(0), h(4))
    assert out["t"] == [ts(0), ts(2), ts(4)]
    assert out["gpus"] == [3, 0, 0]


def test_fractions_count_each_gpu_once():
    spans = [
        Span(h(1), h(4), shared_gpus=(7,)),
        Span(h(2), h(3), shared_gpus=(7,)),  # a second fraction on GPU 7: still one GPU
        Span(h(2), h(5), shared_gpus=(9,), gpus=1),
    ]
    out = usage_history(spans, h(0), h(6))
    assert out["t"] == [ts(0), ts(1), ts(2), ts(4), ts(5), ts(6)]
    assert out["gpus"] == [0, 1, 3, 2, 0, 0]


def test_one_instant_one_step_and_no_step_without_change():
    # one allocation ends as another of the same size starts: no change, no point
    spans = [Span(h(1), h(2), gpus=2), Span(h(2), h(3), gpus=2)]
    out = usage_history(spans, h(0), h(4))
    assert out["t"] == [ts(0), ts(1), ts(3), ts(4)]
    assert out["gpus"] == [0, 2, 0, 0]
    # ... and with a slice starting then too, one point with both changes applied
    out = usage_history([*spans, Span(h(2), h(3), slices=1)], h(0), h(4))
    assert out["t"] == [ts(0), ts(1), ts(2), ts(3), ts(4)]
    assert out["gpus"] == [0, 2, 2, 0, 0]
    assert out["slices"] == [0, 0, 1, 0, 0]


def test_changes_at_the_end_of_the_window_are_in_its_last_point():
    out = usage_history([Span(h(1), h(3), gpus=2), Span(h(3), None, gpus=5)], h(0), h(3))
    assert out["t"] == [ts(0), ts(1), ts(3)]
    assert out["gpus"] == [0, 2, 5]


def test_bad_spans_are_left_out_and_a_reversed_window_is_refused():
    assert usage_history([Span(h(2), h(2), gpus=9), Span(h(3), h(1), gpus=9)], h(0), h(4))["gpus"] == [0, 0]
    assert usage_history([Span(h(0), None, gpus=1)], h(1), h(1)) == {
        "t": [ts(1)], "gpus": [1], "borrowed_gpus": [0], "slices": [0]}  # fmt: skip
    with pytest.raises(ValueError, match="before since"):
        usage_history([], h(2), h(1))
