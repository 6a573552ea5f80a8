"""Errors shared by the apps."""

from __future__ import annotations


class LocatedError(ValueError):
    """Bad input located in its source: ``str()`` is ``"<source>:<line>: <message>"``.

    ``message`` the bare message, ``source`` the file name (``"<text>"`` for pasted text),
    ``line`` 1-based (0 when not located). The parsers' own errors (``TopologyParseError``,
    ``PartitionsParseError``) are this with a name that says what was being read.
    """

    def __init__(self, message: str, source: str = "<text>", line: int = 0):
        self.message = message
        self.source = source
        self.line = line
        super().__init__(f"{source}:{line}: {message}")
