"""Answers for requests too large for daphne's HTTP parser (twisted.web).

Twisted reads the request line and each header line with ``LineReceiver`` (``MAX_LENGTH`` 16,384
bytes); a longer line calls ``lineLengthExceeded``, which by default drops the connection without
a word, so a client with a 21 KB URL sees "connection closed" and nothing in Weft's logs says why.
:func:`install` makes that an HTTP answer: ``414 URI Too Long`` for the request line (RFC 9110
15.5.15), ``431 Request Header Fields Too Large`` for a header line (RFC 6585 5). Behind a reverse
proxy the proxy's own limits usually answer first.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def install() -> bool:
    """Patch ``twisted.web.http.HTTPChannel.lineLengthExceeded`` (idempotent). Returns False when
    twisted is not installed (another ASGI server), True otherwise."""
    try:
        from twisted.web import http
    except ImportError:
        return False
    if getattr(http.HTTPChannel.lineLengthExceeded, "_weft", False):
        return True

    def line_length_exceeded(self, line: bytes) -> None:
        first = getattr(self, "_HTTPChannel__first_line", True)
        status = b"414 URI Too Long" if first else b"431 Request Header Fields Too Large"
        log.warning(
            "refused a request with a %s longer than %d bytes", "URL" if first else "header", self.MAX_LENGTH
        )
        self.transport.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        self.transport.loseConnection()

    line_length_exceeded._weft = True  # type: ignore[attr-defined]
    http.HTTPChannel.lineLengthExceeded = line_length_exceeded
    return True
