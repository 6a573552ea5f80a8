"""``core.repeatlog.RepeatLog``: a repeated identical failure is logged once, then counted."""

from __future__ import annotations

import logging

from core.repeatlog import RepeatLog

LOGGER = "weft.tests.repeatlog"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER]


def test_first_occurrence_then_one_summary_per_period_then_flush(caplog):
    clock = Clock()
    repeats = RepeatLog(logging.getLogger(LOGGER), every_s=300, clock=clock)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        logged = [repeats.warning("listener: %s", "send failed: [Errno 107]") for _ in range(160)]
        assert logged == [True] + [False] * 159
        # a different failure is news at once, a first occurrence is never held back
        assert repeats.warning("listener: ERR: umad2sim_write: cannot write")
        clock.now += 299
        assert not repeats.warning("listener: send failed: [Errno 107]")
        clock.now += 1  # 300 s after the first line: one summary with the count
        assert repeats.warning("listener: send failed: [Errno 107]")
        assert not repeats.warning("listener: send failed: [Errno 107]")
        clock.now += 10
        assert repeats.flush() == 1  # only the message with repeats not logged yet
        assert repeats.warning("listener: send failed: [Errno 107]")  # forgotten: first again
    assert _lines(caplog) == [
        ("WARNING", "listener: send failed: [Errno 107]"),
        ("WARNING", "listener: ERR: umad2sim_write: cannot write"),
        ("WARNING", "listener: send failed: [Errno 107] (repeated 161 times in the last 300 s)"),
        ("WARNING", "listener: send failed: [Errno 107] (repeated 1 times in the last 10 s)"),
        ("WARNING", "listener: send failed: [Errno 107]"),
    ]


def test_the_level_of_the_first_line_is_kept_and_memory_is_bounded(caplog):
    from core import repeatlog

    repeats = RepeatLog(logging.getLogger(LOGGER), every_s=0)
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        repeats.log(logging.INFO, "x")
        repeats.log(logging.INFO, "x")  # every_s 0: the summary at once
    assert [(lvl, msg.split(" (")[0]) for lvl, msg in _lines(caplog)] == [("INFO", "x"), ("INFO", "x")]
    for i in range(repeatlog.MAX_KEYS + 50):
        repeats.warning(f"distinct {i}")
    assert len(repeats._seen) == repeatlog.MAX_KEYS
