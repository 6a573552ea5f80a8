"""REST authentication by API token (``Authorization: Token <key>``, :mod:`accounts.tokens`).

It comes first in ``REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]``: DRF answers an
unauthenticated request with the first class's ``WWW-Authenticate`` challenge, so a missing, bad
or expired token is a 401 with ``WWW-Authenticate: Token realm="api"`` (with the session class
first it was a 403 without a challenge, RFC 9110 §15.5.2).
"""

from __future__ import annotations

from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from .tokens import TokenInvalid, check_key


class ApiTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>`` against :class:`accounts.models.ApiToken` (hashed keys,
    expiry). Returns ``(user, token)``.

    Raises:
        AuthenticationFailed: a malformed header (DRF's messages), an unknown or expired key, or
            an inactive user.
    """

    keyword = "Token"

    def authenticate_credentials(self, key: str):
        try:
            token = check_key(key)
        except TokenInvalid as exc:
            raise AuthenticationFailed(str(exc)) from None
        return token.user, token

    def authenticate_header(self, request) -> str:
        return f'{self.keyword} realm="api"'
