"""Logging filters of the ``LOGGING`` setting."""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied


class PermissionDeniedIsNotAnError(logging.Filter):
    """On ``django.request``: a refused request (a Viewer opening an Admin page, ``PermissionDenied``
    from a view) is a user's mistake, not a server fault. Django logs it at WARNING with the
    exception's traceback (~30 lines per hit); this keeps one INFO line without the traceback
    (``Forbidden (Permission denied): /fabric/import/``). Other records pass unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, PermissionDenied):
            record.exc_info = None
            record.exc_text = None
            record.levelno = logging.INFO
            record.levelname = logging.getLevelName(logging.INFO)
        return True


class OneLineWarning(logging.Filter):
    """On ``django.security.DisallowedHost``: a request whose ``Host`` is not in ``ALLOWED_HOSTS``
    (a load balancer's health check by IP, a scanner) is worth a line — a wrong ``ALLOWED_HOSTS``
    shows there — but Django logs each at ERROR with the exception's traceback, flooding the log.
    This keeps one WARNING line (``Invalid HTTP_HOST header: '10.0.0.5:8000'. …``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        if record.levelno > logging.WARNING:
            record.levelno = logging.WARNING
            record.levelname = logging.getLevelName(logging.WARNING)
        return True
