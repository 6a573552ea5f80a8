"""API tokens: issue, check and revoke (the services behind ``/api/accounts/tokens/``,
``POST /api/accounts/users/token/``, ``manage.py create_token`` and the password-change signal).

A key is 40 hexadecimal characters (160 random bits, the length of Django REST framework's
tokens, so scripts that parse them keep working); only its SHA-256 is stored
(:func:`accounts.models.hash_token_key`), so the key is shown once, when it is issued. Each
service writes in one transaction and audits inside it (``user.token.create``,
``user.token.revoke``).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from . import audit
from .models import ApiToken, hash_token_key

KEY_BYTES = 20
#: ``last_used_at`` is written at most this often per token (one UPDATE per request would be a
#: write on every API read).
LAST_USED_RESOLUTION = timedelta(seconds=60)


class TokenInvalid(Exception):
    """The key matches no token, the token has expired, or its user is inactive (``str`` says which)."""


@dataclass(frozen=True)
class IssuedToken:
    """A token just created and its key (the only time the key is known)."""

    token: ApiToken
    key: str


def default_ttl() -> timedelta | None:
    """The lifetime of a new token from ``WEFT_TOKEN_TTL_DAYS`` (None: no expiry, the default)."""
    days = settings.WEFT_TOKEN_TTL_DAYS
    return timedelta(days=days) if days > 0 else None


def create_token(user, name: str = "", *, reason: str = "", actor=None) -> IssuedToken:
    """Issue a new token for ``user``, expiring after :func:`default_ttl`; audited.

    Args:
        user: the owner (a saved user).
        name: what the token is for (shown in lists; cut to 100 characters).
        reason: how it was asked for (``"api"``, ``"api credentials"``, ``"command"``), audited.
        actor: who asks, for the audit entry (default: the current request's user).
    """
    key = secrets.token_hex(KEY_BYTES)
    ttl = default_ttl()
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            name=(name or "")[:100],
            prefix=key[:8],
            key_hash=hash_token_key(key),
            expires_at=timezone.now() + ttl if ttl else None,
        )
        audit.record(
            "user.token.create",
            user,
            {
                "token": token.pk,
                "prefix": token.prefix,
                "name": token.name,
                "expires_at": token.expires_at.isoformat() if token.expires_at else None,
                **({"via": reason} if reason else {}),
            },
            user=actor,
        )
    return IssuedToken(token, key)


def check_key(key: str) -> ApiToken:
    """Return the token of ``key`` (its ``user`` loaded) when it may authenticate a request.

    Raises:
        TokenInvalid: no such token, an expired one, or its user is inactive.
    """
    token = ApiToken.objects.select_related("user").filter(key_hash=hash_token_key(key)).first()
    if token is None:
        raise TokenInvalid("Invalid token.")
    if token.expired:
        raise TokenInvalid("Token expired.")
    if not token.user.is_active:
        raise TokenInvalid("User inactive or deleted.")
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def revoke_token(token: ApiToken, *, reason: str = "revoked") -> None:
    """Delete one token; audited as ``user.token.revoke`` on its owner."""
    with transaction.atomic():
        audit.record(
            "user.token.revoke",
            token.user,
            {"tokens": [token.pk], "prefixes": [token.prefix], "reason": reason},
        )
        token.delete()


def revoke_user_tokens(user, *, reason: str) -> int:
    """Delete every token of ``user``; returns how many. Audited when there was one at least."""
    with transaction.atomic():
        tokens = list(ApiToken.objects.filter(user=user).values_list("pk", "prefix"))
        if not tokens:
            return 0
        audit.record(
            "user.token.revoke",
            user,
            {"tokens": [pk for pk, _ in tokens], "prefixes": [p for _, p in tokens], "reason": reason},
        )
        ApiToken.objects.filter(pk__in=[pk for pk, _ in tokens]).delete()
    return len(tokens)
