"""The API's exception handler (``REST_FRAMEWORK["EXCEPTION_HANDLER"]``): DRF's own, plus a 409
for a database uniqueness or integrity conflict that the serializers' checks could not see
(two identical creates at once: both pass validation, the second insert fails). The request's
transaction is rolled back as for any error; the answer names no SQL."""

from __future__ import annotations

import logging

from django.db import IntegrityError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

log = logging.getLogger(__name__)

#: the 409 body's ``detail``
CONFLICT_DETAIL = (
    "conflict: another request changed the same object meanwhile (for example, created one with "
    "the same name); nothing was written by this one. Reload and retry."
)


def exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF's handler; an :class:`django.db.IntegrityError` becomes 409 ``{"detail":
    CONFLICT_DETAIL}`` (logged at INFO with the view, not as a traceback: a race between users,
    not a server fault). Anything else DRF does not handle stays a 500."""
    if isinstance(exc, IntegrityError):
        set_rollback()
        view = context.get("view")
        log.info("409 for %s: %s", type(view).__name__ if view else "?", str(exc).splitlines()[0][:200])
        return Response({"detail": CONFLICT_DETAIL}, status=status.HTTP_409_CONFLICT)
    return drf_exception_handler(exc, context)
