"""The API's exception handler (``REST_FRAMEWORK["EXCEPTION_HANDLER"]``), the one place where a
domain error becomes an HTTP answer (as the UFM layer's ``handle_exception``): a
:class:`core.errors.DomainError` answers its ``status_code`` and ``as_dict()``; an app's own error
classes are declared once with :func:`answer` (status and body per class, the most derived class
wins: ``fabric/api/errors.py``); then DRF's own handler, plus a 409
for a database uniqueness or integrity conflict that the serializers' checks could not see
(two identical creates at once: both pass validation, the second insert fails). The request's
transaction is rolled back as for any error; the answer names no SQL.

Also the project's ``handler400/403/404/500`` (``weft.urls``): JSON ``{"detail": …}`` for paths
under ``/api/`` (an unknown endpoint is a JSON 404, not the HTML page), the styled pages elsewhere."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from django.db import IntegrityError
from django.http import JsonResponse
from django.views import defaults
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from core.busy import busy_response, pool_timeout
from core.errors import DomainError

log = logging.getLogger(__name__)

#: the 409 body's ``detail``
CONFLICT_DETAIL = (
    "conflict: another request changed the same object meanwhile (for example, created one with "
    "the same name); nothing was written by this one. Reload and retry."
)


def detail_body(exc: Exception) -> dict:
    """``{"detail": str(exc)}``: DRF's own error shape."""
    return {"detail": str(exc)}


def located_body(exc: Exception) -> dict:
    """``{"error", "source", "line"}`` of a :class:`core.errors.LocatedError` (a parse error)."""
    return {"error": str(exc), "source": getattr(exc, "source", None), "line": getattr(exc, "line", None)}


#: error class → (HTTP status, body of the answer); filled by :func:`answer`
_ANSWERS: dict[type[Exception], tuple[int, Callable[[Exception], dict]]] = {}


def answer(
    status_code: int, *classes: type[Exception], body: Callable[[Exception], dict] = detail_body
) -> None:
    """Declare the REST answer of domain error ``classes`` (and their subclasses unless they
    declare their own): ``status_code`` with ``body(exc)``. Idempotent; called once per app at
    start (e.g. ``fabric.apps.FabricConfig.ready`` → ``fabric/api/errors.py``)."""
    for cls in classes:
        _ANSWERS[cls] = (status_code, body)


def domain_answer(exc: Exception) -> Response | None:
    """The answer for a domain error (a :class:`DomainError`, or a class given to :func:`answer`:
    the nearest in ``exc``'s MRO), else None."""
    for cls in type(exc).__mro__:
        if cls in _ANSWERS:
            status_code, body = _ANSWERS[cls]
            return Response(body(exc), status=status_code)
        if cls is DomainError:
            return Response(exc.as_dict(), status=exc.status_code)
    return None


def exception_handler(exc: Exception, context: dict) -> Response | None:
    """A domain error's declared answer (:func:`domain_answer`); else DRF's handler; an :class:`django.db.IntegrityError` becomes 409 ``{"detail":
    CONFLICT_DETAIL}`` (logged at INFO with the view, not as a traceback: a race between users,
    not a server fault). Anything else DRF does not handle stays a 500."""
    response = domain_answer(exc)
    if response is not None:
        set_rollback()
        return response
    if isinstance(exc, IntegrityError):
        set_rollback()
        view = context.get("view")
        log.info("409 for %s: %s", type(view).__name__ if view else "?", str(exc).splitlines()[0][:200])
        return Response({"detail": CONFLICT_DETAIL}, status=status.HTTP_409_CONFLICT)
    return drf_exception_handler(exc, context)


#: the paths whose error answers are JSON (API clients), not the styled pages of ``templates/``
API_PREFIX = "/api/"
#: the UFM-compatible API's roots (``ufm.urls``): its clients parse JSON errors too
UFM_PREFIXES = ("/ufmRest/", "/ufmRestV2/", "/ufmRestV3/")


def _is_api(request) -> bool:
    return request.path.startswith((API_PREFIX, *UFM_PREFIXES))


def page_not_found(request, exception=None):
    """``handler404``: ``{"detail": "Not found."}`` (404, as DRF answers a missing object) for a
    path under :data:`API_PREFIX` (no such endpoint, or a non-DRF view raising ``Http404``),
    Django's page (``templates/404.html``) elsewhere."""
    if _is_api(request):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception)


def permission_denied(request, exception=None):
    """``handler403``: ``{"detail": "You do not have permission to perform this action."}`` (403,
    DRF's wording) under :data:`API_PREFIX`, ``templates/403.html`` elsewhere."""
    if _is_api(request):
        return JsonResponse({"detail": "You do not have permission to perform this action."}, status=403)
    return defaults.permission_denied(request, exception)


def bad_request(request, exception=None):
    """``handler400`` (a ``SuspiciousOperation``, e.g. a bad Host header or too many fields):
    ``{"detail": "Bad request."}`` (400) under :data:`API_PREFIX`, Django's page elsewhere."""
    if _is_api(request):
        return JsonResponse({"detail": "Bad request."}, status=400)
    return defaults.bad_request(request, exception)


def server_error(request):
    """``handler500``: ``{"detail": "Server error."}`` (500; the traceback is logged, never sent)
    under :data:`API_PREFIX`, ``templates/500.html`` elsewhere; a database pool timeout met
    before the view (in a middleware) is the 503 of :func:`core.busy.busy_response`."""
    exc = pool_timeout(sys.exc_info()[1])
    if exc is not None:
        return busy_response(request, exc)
    if _is_api(request):
        return JsonResponse({"detail": "Server error."}, status=500)
    return defaults.server_error(request)
