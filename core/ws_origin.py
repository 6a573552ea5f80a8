"""Websocket Origin check: the handshake's ``Origin`` must be the site's own origin, scheme, host
*and port*, or one of ``CSRF_TRUSTED_ORIGINS``: the rules of Django's CSRF Origin check
(``CsrfViewMiddleware._origin_verified``) applied to websockets.

Channels' ``AllowedHostsOriginValidator`` compared the Origin's host name with
``ALLOWED_HOSTS`` and ignored scheme and port, so a page of another application on the same host
(``http://weft-host:9999``) could open the live streams through a signed-in browser: the browser
sends Weft's session cookie with the handshake whatever page opens it.

The site's own origin is ``http`` (``https`` for ``wss``, or when ``SECURE_PROXY_SSL_HEADER``
says so, as for HTTP requests) with the ``Host`` header, which must be in ``ALLOWED_HOSTS``.
Default ports are made explicit on both sides (``http://h`` is ``http://h:80``). A handshake
without an Origin is refused too (browsers always send one).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import is_same_domain, split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}
#: Close code of a refused handshake. Sent before ``accept``: the server refuses the upgrade with
#: HTTP 403 (ASGI spec), so browsers never see the code; tests do.
CLOSE_ORIGIN_REFUSED = 4403

Origin = tuple[str, str, int]


def parse_origin(value: str) -> Origin | None:
    """``"https://Weft.example:8443"`` → ``("https", "weft.example", 8443)``; None when it is not
    an http(s) origin with a host (``null``, ``file://``, junk)."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port if port is not None else DEFAULT_PORTS[scheme]


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _is_secure(scope: dict) -> bool:
    if scope.get("scheme") in ("wss", "https"):
        return True
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        meta_name, expected = proxy
        header = meta_name.removeprefix("HTTP_").replace("_", "-").lower().encode("latin-1")
        value = _header(scope, header)
        return value is not None and value.split(",")[0].strip() == expected
    return False


def own_origin(scope: dict) -> Origin | None:
    """The origin a page of this site has, from the handshake (None without an allowed Host)."""
    host = _header(scope, b"host")
    if not host:
        return None
    domain, _port = split_domain_port(host.lower())
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    if not domain or not validate_host(domain, allowed):
        return None
    scheme = "https" if _is_secure(scope) else "http"
    return parse_origin(f"{scheme}://{host}")


def origin_allowed(scope: dict) -> bool:
    """True when the handshake's Origin is the site's own or a trusted one (module docstring)."""
    raw = _header(scope, b"origin")
    origin = parse_origin(raw) if raw else None
    if origin is None:
        return False
    if origin == own_origin(scope):
        return True
    for trusted in settings.CSRF_TRUSTED_ORIGINS:
        if "*" in trusted:  # "https://*.example.org[:port]": any subdomain, same scheme and port
            pattern = parse_origin(trusted.replace("*", "wildcard", 1))
            if pattern is None:
                continue
            scheme, host, port = pattern
            suffix = host.removeprefix("wildcard")
            if (origin[0], origin[2]) == (scheme, port) and is_same_domain(origin[1], suffix):
                return True
        elif origin == parse_origin(trusted):
            return True
    return False


class OriginValidator:
    """ASGI middleware for websocket scopes: refuse the handshake (close 4403 before accept, an
    HTTP 403 to the browser) unless :func:`origin_allowed`; otherwise pass to ``application``."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            raise ValueError("OriginValidator serves websocket connections only")
        if origin_allowed(scope):
            return await self.application(scope, receive, send)
        message = await receive()  # websocket.connect
        if message["type"] == "websocket.connect":
            await send({"type": "websocket.close", "code": CLOSE_ORIGIN_REFUSED})
