"""Errors shared by the apps.

How a REST answer says them: ``core.api.errors`` (one handler for every domain error)."""

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


class DomainError(Exception):
    """A use case's refusal or failure that a REST answer states as it is (``core.api.errors``
    answers ``status_code`` with ``as_dict()``); a page or a command shows ``str()``.

    Apps whose errors predate this class declare their HTTP answer with
    ``core.api.errors.answer(status, ErrorClass, body=…)`` instead of inheriting from it.
    """

    status_code = 400

    def as_dict(self) -> dict:
        """The answer's JSON body: ``{"detail": str(self)}``."""
        return {"detail": str(self)}


class Conflict(DomainError):
    """409: the change collides with the stored state (another request changed it meanwhile, or
    another part of Weft owns the object); nothing was written. Retry after a reload."""

    status_code = 409
