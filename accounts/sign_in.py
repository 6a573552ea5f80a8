"""What every rendering of the sign-in page shows besides the form (the page itself, the lock-out's
429): the single sign-on link when OpenID Connect is configured (``WEFT_OIDC_ISSUER``)."""

from __future__ import annotations

from django.conf import settings


def sign_in_context(request) -> dict:
    """``{"oidc_provider": name or ""}`` for ``accounts/login.html``."""
    return {"oidc_provider": settings.WEFT_OIDC_PROVIDER_NAME if settings.WEFT_OIDC_ISSUER else ""}
