"""Who may call the UFM-compatible API, as UFM's clients authenticate:

* ``/ufmRest/...``: HTTP Basic with a Weft user name and password
  (:class:`UfmBasicAuthentication`; the check goes through ``django.contrib.auth.authenticate``,
  so django-axes throttles it and a failure is audited like a failed sign-in);
* ``/ufmRestV3/...``: ``Authorization: Basic <token>`` where the token is a Weft API token, the
  one ``POST /ufmRest/app/tokens`` issues (:class:`UfmTokenAuthentication`, ``accounts.tokens``);
* ``/ufmRestV2/...``: the session cookie of ``POST /dologin`` (Django's session; DRF's
  ``SessionAuthentication``, which keeps CSRF protection for changes: a client sends the
  ``csrftoken`` cookie back as ``X-CSRFToken``).

A missing or wrong credential is a 401 with ``WWW-Authenticate: Basic realm="ufm"``; a locked-out
user name or address a 429. Roles (:class:`UfmPermission`): reads need Viewer; PKey changes the
Admin role or membership of the ``UFM integration`` group (a service account for Kubernetes or
Slurm that can change PKeys and read, nothing else); port isolation Admin; a token any
signed-in user (for themselves).
"""

from __future__ import annotations

import base64
import binascii

from django.contrib.auth import authenticate
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import SAFE_METHODS, BasePermission

from accounts.login_throttle import cooloff_seconds, lockout_message
from accounts.roles import Role, has_role
from accounts.tokens import TokenInvalid, check_key

#: Django group whose members may change PKeys through the UFM API without the Admin role
INTEGRATION_GROUP = "UFM integration"
REALM = 'Basic realm="ufm"'


def _basic_credentials(request) -> str | None:
    """The text after ``Basic`` in the Authorization header, or None when it is not Basic."""
    parts = get_authorization_header(request).split()
    if not parts or parts[0].lower() != b"basic":
        return None
    if len(parts) != 2:
        raise exceptions.AuthenticationFailed("Invalid Basic header: one credential expected.")
    try:
        return parts[1].decode("ascii")
    except UnicodeDecodeError:
        raise exceptions.AuthenticationFailed("Invalid Basic header: not ASCII.") from None


class UfmBasicAuthentication(BaseAuthentication):
    """``Authorization: Basic base64(user:password)`` against Weft's users (throttled by
    django-axes). Returns ``(user, None)``.

    Raises:
        AuthenticationFailed: a malformed header, a wrong user name or password, an inactive user.
        Throttled: sign-in is locked for this user name or address (429 with ``Retry-After``).
    """

    def authenticate(self, request):
        credential = _basic_credentials(request)
        if credential is None:
            return None
        try:
            username, sep, password = (
                base64.b64decode(credential, validate=True).decode("utf-8").partition(":")
            )
        except (binascii.Error, UnicodeDecodeError):
            raise exceptions.AuthenticationFailed(
                "Invalid Basic header: not base64 of user:password."
            ) from None
        if not sep:
            raise exceptions.AuthenticationFailed("Invalid Basic header: no ':' between user and password.")
        django_request = request._request  # axes marks the HttpRequest its middleware sees
        user = authenticate(django_request, username=username, password=password)
        if getattr(django_request, "axes_locked_out", False):
            raise exceptions.Throttled(wait=cooloff_seconds(), detail=lockout_message())
        if user is None or not user.is_active:
            raise exceptions.AuthenticationFailed("Invalid user name or password.")
        return user, None

    def authenticate_header(self, request) -> str:
        return REALM


class UfmTokenAuthentication(BaseAuthentication):
    """``Authorization: Basic <token>`` (UFM's token form: the token itself, not base64) against
    Weft's API tokens. Returns ``(user, token)``.

    Raises:
        AuthenticationFailed: a malformed header, an unknown or expired token, an inactive user.
    """

    def authenticate(self, request):
        credential = _basic_credentials(request)
        if credential is None:
            return None
        try:
            token = check_key(credential)
        except TokenInvalid as exc:
            raise exceptions.AuthenticationFailed(str(exc)) from None
        return token.user, token

    def authenticate_header(self, request) -> str:
        return REALM


def in_integration_group(user) -> bool:
    """True when ``user`` is in :data:`INTEGRATION_GROUP`."""
    return bool(user and user.is_authenticated and user.groups.filter(name=INTEGRATION_GROUP).exists())


class UfmPermission(BasePermission):
    """Viewer for reads; for other methods the view's ``change`` says who: ``"pkeys"`` (Admin or
    :data:`INTEGRATION_GROUP`), ``"admin"`` (Admin), ``"self"`` (any signed-in user). 401 when
    not signed in, 403 for a role below."""

    message = "Your role does not allow this."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not (user and user.is_authenticated and user.is_active):
            return False
        if request.method in SAFE_METHODS:
            return has_role(user, Role.VIEWER)
        change = getattr(view, "change", "admin")
        if change == "self":
            return True
        if change == "pkeys":
            if has_role(user, Role.ADMIN) or in_integration_group(user):
                return True
            self.message = "Changing PKeys needs the Admin role or the 'UFM integration' group."
            return False
        self.message = "This change needs the Admin role."
        return has_role(user, Role.ADMIN)
