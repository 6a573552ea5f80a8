"""A command's output collected into a list (``call_command(..., stdout=Collect(lines))``)."""

from __future__ import annotations


class Collect:
    """A file-like ``write``/``flush`` that appends each written text to ``into`` (a list of str)."""

    def __init__(self, into: list) -> None:
        self.into = into

    def write(self, text: str) -> None:
        self.into.append(text)

    def flush(self) -> None:
        """Nothing to flush: every write is already in the list."""
