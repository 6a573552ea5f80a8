"""Sign-in throttling with django-axes: the hooks Weft gives it (settings ``AXES_*`` in
``weft/settings.py``, ``WEFT_LOGIN_FAILURE_LIMIT``/``WEFT_LOGIN_COOLOFF_MIN``).

Every ``django.contrib.auth.authenticate`` call with a request goes through
``axes.backends.AxesStandaloneBackend``: the sign-in page, the Django admin's, and
``POST /api/accounts/users/token/`` with a user name and password, the UFM API's HTTP Basic.
After ``WEFT_LOGIN_FAILURE_LIMIT`` failures of one user name from one address
(``AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]``: the pair), further password attempts
of that user from that address are refused, even with the right password, until
``WEFT_LOGIN_COOLOFF_MIN`` minutes pass without a failure (a failure during the lock-out starts
the wait again; ``manage.py axes_reset_username NAME`` / ``axes_reset_ip ADDR`` unlock early).
A refused attempt gets :func:`lockout_response`: HTTP 429 with ``Retry-After``. Other users of
that address (a NAT, a UFM client's host) and that user elsewhere are not locked (issue 22: five
failures from one address locked every password sign-in from it, integrations included). API
tokens (``accounts.tokens.check_key``: ``Authorization: Token``, the UFM API's
``/ufmRestV3`` Basic token) never go through ``authenticate`` and are never locked out.
Failures and lock-outs are logged and audited by ``accounts.receivers``.
"""

from __future__ import annotations

import math

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


def client_ip(request: HttpRequest) -> str | None:
    """The client address throttling counts: ``REMOTE_ADDR``, as the audit log records it.

    Forwarded-for headers are not read: a client could set them to spread its attempts over
    made-up addresses. Behind a reverse proxy, run daphne with ``--proxy-headers`` so that
    ``REMOTE_ADDR`` is the client's.
    """
    return request.META.get("REMOTE_ADDR") or None


#: the longest user name recorded for a failure: ``auth.User.username``'s (no user has a longer one;
#: the audit's column is as long, axes' ``AccessAttempt.username`` 255)
USERNAME_MAX = 150


def recorded_username(name) -> str:
    """The user name a failed sign-in is counted and audited under: ``name`` as sent, cut to
    :data:`USERNAME_MAX` characters, a NUL shown as U+FFFD. ``/dologin`` and HTTP Basic pass it
    unchecked: a longer name or a NUL made the failure's rows a DataError on PostgreSQL (a 500)."""
    return str(name or "").replace("\x00", "\ufffd")[:USERNAME_MAX]


def client_username(request: HttpRequest, credentials: dict | None) -> str:
    """``AXES_USERNAME_CALLABLE``: axes' own lookup (the credentials' ``username``, else the
    request's form field) through :func:`recorded_username`."""
    if credentials:
        name = credentials.get(settings.AXES_USERNAME_FORM_FIELD)
    else:
        name = getattr(request, "data", request.POST).get(settings.AXES_USERNAME_FORM_FIELD)
    return recorded_username(name)


def cooloff_seconds() -> int:
    """The lock-out duration in whole seconds (rounded up; at least 1)."""
    return max(1, math.ceil(settings.AXES_COOLOFF_TIME.total_seconds()))


def lockout_message() -> str:
    """What a locked-out client is told."""
    seconds = cooloff_seconds()
    wait = f"{math.ceil(seconds / 60)} minutes" if seconds >= 120 else f"{seconds} seconds"
    return (
        "Too many failed sign-ins for this user name from this address. "
        f"Sign-in is locked: try again in {wait}, or ask an administrator to unlock it."
    )


def lockout_response(request: HttpRequest, original_response=None, credentials=None) -> HttpResponse:
    """The response to an attempt refused by the lock-out (``AXES_LOCKOUT_CALLABLE``).

    HTTP 429 with ``Retry-After`` (seconds): ``{"detail": message}`` as JSON for the APIs
    (``/api/...``, the UFM-compatible ``/ufmRest...`` and its ``/dologin``), else the sign-in page
    with the message.
    """
    message = lockout_message()
    if request.path.startswith(("/api/", "/ufmRest", "/dologin")):
        response: HttpResponse = JsonResponse({"detail": message}, status=429)
    else:
        from .sign_in import sign_in_context

        context = {
            **sign_in_context(request),
            "form": AuthenticationForm(request),
            "lockout": message,
            "next": request.POST.get("next", request.GET.get("next", "")),
        }
        response = render(request, "accounts/login.html", context, status=429)
    response["Retry-After"] = str(cooloff_seconds())
    return response
