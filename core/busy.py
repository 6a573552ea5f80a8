"""A request that waited longer than the database pool allows answers 503, not 500 (issue 22).

With Django's psycopg pool (``WEFT_DB_POOL_MAX``), a request that finds every connection taken
waits ``WEFT_DB_POOL_TIMEOUT_S`` seconds for one (psycopg_pool's ``getconn(timeout=…)``), then
psycopg_pool raises :class:`psycopg_pool.PoolTimeout` (Django wraps it in its own
``OperationalError``). That is load, not a fault of the request nor of the code: the answer is
``503 Service Unavailable`` with ``Retry-After`` (RFC 9110 §10.2.3), JSON ``{"detail": …}`` under
the API prefixes and the styled ``templates/503.html`` elsewhere, logged as one WARNING line
(no traceback, and Django's own ERROR line for a 5xx answer is skipped).

:class:`PoolTimeoutMiddleware` answers it for the views (DRF and plain ones; ``process_exception``
gets the exception itself); ``core.api.errors.server_error`` (``handler500``) for an exhausted pool
met in a middleware before the view.
"""

from __future__ import annotations

import logging
import math

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.template import loader

log = logging.getLogger(__name__)

try:  # the pool is optional (SQLite, or WEFT_DB_POOL_MAX=0): then nothing is a pool timeout
    from psycopg_pool import PoolTimeout
except ImportError:  # pragma: no cover - psycopg_pool is in requirements.txt
    PoolTimeout = None

#: the paths whose answers are JSON (as ``core.api.errors``)
JSON_PREFIXES = ("/api/", "/ufmRest/", "/ufmRestV2/", "/ufmRestV3/", "/metrics")


def pool_timeout(exc: BaseException | None) -> BaseException | None:
    """The :class:`psycopg_pool.PoolTimeout` in ``exc``'s chain (``__cause__``/``__context__``:
    Django's ``OperationalError`` raised from it), else None."""
    seen = set()
    while exc is not None and PoolTimeout is not None and id(exc) not in seen:
        if isinstance(exc, PoolTimeout):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def retry_after_s() -> int:
    """Seconds a client should wait before retrying: the pool's wait, rounded up (at least 1)."""
    return max(1, math.ceil(float(getattr(settings, "WEFT_DB_POOL_TIMEOUT_S", 1))))


def busy_response(request, exc: BaseException) -> HttpResponse:
    """The 503 answer for ``request`` after ``exc`` (a pool timeout), logged as one WARNING line."""
    wait = retry_after_s()
    log.warning(
        "503 for %s %s: no database connection free within the pool's %ss (%s)",
        request.method, request.path, getattr(settings, "WEFT_DB_POOL_TIMEOUT_S", "?"),
        str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__,
    )  # fmt: skip
    detail = f"Weft is busy: no database connection was free in time. Retry in {wait} s."
    if request.path.startswith(JSON_PREFIXES):
        response = JsonResponse({"detail": detail}, status=503)
    else:  # rendered without a request context (its processors would need the database)
        response = HttpResponse(loader.render_to_string("503.html", {"retry_after": wait}), status=503)
    response["Retry-After"] = str(wait)
    response._has_been_logged = True  # our line above; not Django's ERROR "Service Unavailable"
    return response


class PoolTimeoutMiddleware:
    """A view that raised a database pool timeout answers :func:`busy_response` (503)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        exc = pool_timeout(exception)
        return busy_response(request, exc) if exc is not None else None
