"""Repeated identical failures logged once, then summarised (a log rate limit per message).

A process that fails the same way every second (a listener child whose simulator was killed:
``umad2sim_write: cannot write``, ``send failed: [Errno 107]``) would fill the log with one line
per failure. :class:`RepeatLog` logs the first occurrence of a message as it is, counts the
repeats, and logs one summary line (``... (repeated 57 times in the last 300 s)``) at most every
``every_s`` seconds while it goes on; :meth:`RepeatLog.flush` logs the last count (at the end of
a session). A different message is a first occurrence again: no first failure is hidden.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

#: default seconds between two summary lines of one repeated message
REPEAT_SUMMARY_S = 300.0
#: distinct messages remembered at once (the oldest is forgotten first)
MAX_KEYS = 256


class RepeatLog:
    """Log each distinct message once, then its repeats as a count at most every ``every_s`` s.

    ``logger``: where to log; ``every_s``: seconds between two summaries of one message (default
    :data:`REPEAT_SUMMARY_S`); ``clock``: monotonic seconds (tests pass their own). Thread-safe.
    """

    def __init__(
        self,
        logger: logging.Logger,
        every_s: float = REPEAT_SUMMARY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.every_s = float(every_s)
        self.clock = clock
        # message -> [level, last line logged at, repeats not logged yet]
        self._seen: OrderedDict[str, list] = OrderedDict()
        self._lock = threading.Lock()

    def log(self, level: int, msg: str, *args: object) -> bool:
        """Log ``msg % args`` at ``level`` if it is new, or a summary of its repeats if the last
        line about it is ``every_s`` old; else only count it. Returns whether a line was logged."""
        text = msg % args if args else msg
        now = self.clock()
        with self._lock:
            entry = self._seen.get(text)
            if entry is None:
                self._seen[text] = [level, now, 0]
                while len(self._seen) > MAX_KEYS:
                    self._seen.popitem(last=False)
                line, repeats = text, 0
            else:
                self._seen.move_to_end(text)
                entry[2] += 1
                if now - entry[1] < self.every_s:
                    return False
                line, repeats, since = text, entry[2], now - entry[1]
                entry[1], entry[2] = now, 0
        if repeats:
            self.logger.log(level, "%s (repeated %d times in the last %.0f s)", line, repeats, since)
        else:
            self.logger.log(level, "%s", line)
        return True

    def warning(self, msg: str, *args: object) -> bool:
        """:meth:`log` at WARNING."""
        return self.log(logging.WARNING, msg, *args)

    def flush(self) -> int:
        """Log the repeats not logged yet (one summary line per message) and forget every message
        (the next occurrence is a first one again). Returns how many lines were logged."""
        now = self.clock()
        with self._lock:
            pending = [(text, e[0], e[2], now - e[1]) for text, e in self._seen.items() if e[2]]
            self._seen.clear()
        for text, level, repeats, since in pending:
            self.logger.log(level, "%s (repeated %d times in the last %.0f s)", text, repeats, since)
        return len(pending)
