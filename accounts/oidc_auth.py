"""OpenID Connect single sign-on (issue 26): mozilla-django-oidc with Weft's rules.

Configured by the ``WEFT_OIDC_*`` settings (``weft/settings.py``, README "Configuration"). The
provider's endpoints come from its discovery document
(``<WEFT_OIDC_ISSUER>/.well-known/openid-configuration``, OpenID Connect Discovery 1.0 §4),
read when a sign-in starts, not when Weft starts, and kept :data:`DISCOVERY_TTL_S` seconds: a
provider that is down does not stop Weft, and its users get a message on the sign-in page.

The flow is the authorization-code flow of mozilla-django-oidc (``/oidc/authenticate/`` →
the provider → ``/oidc/callback/``: the code is exchanged at the token endpoint, the ID token's
signature checked against the provider's JWKS and its nonce against the session's, the claims
read from the userinfo endpoint). Then, as for LDAP (``accounts.directory``): the user name is
the ``WEFT_OIDC_USERNAME_CLAIM`` claim, the groups the ``WEFT_OIDC_GROUPS_CLAIM`` claim (a list
of strings, or one string), mapped by ``WEFT_OIDC_ROLE_GROUPS`` / ``WEFT_OIDC_TENANT_GROUPS``;
a local account of that name is never taken over; no mapped group, no sign-in.
"""

from __future__ import annotations

import logging
import threading
import time

import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpResponseRedirect
from django.urls import reverse
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from core.validators import printable_text

from .directory import (
    AMBIGUOUS,
    NO_GROUP,
    DirectorySignInRefused,
    GroupMapping,
    apply_groups,
    is_local,
    note_problem,
    problems_of,
)
from .login_throttle import USERNAME_MAX

log = logging.getLogger("weft.auth")

#: seconds a fetched discovery document is used before it is read again
DISCOVERY_TTL_S = 3600.0
_discovery: dict[str, tuple[float, dict]] = {}
_discovery_lock = threading.Lock()


class ProviderUnavailable(Exception):
    """The provider's discovery document could not be read or is not one (the message says
    which, for the log)."""


def provider_name() -> str:
    """The provider's name on the sign-in page (``WEFT_OIDC_PROVIDER_NAME``)."""
    return settings.WEFT_OIDC_PROVIDER_NAME


def unavailable_message() -> str:
    return f"{provider_name()} cannot be reached now, so single sign-on is not available. Local Weft accounts can still sign in."


def provider_configuration(*, refresh: bool = False) -> dict:
    """The provider's discovery document (a dict with ``authorization_endpoint``,
    ``token_endpoint``, ``userinfo_endpoint``, ``jwks_uri``), cached :data:`DISCOVERY_TTL_S`.

    Raises:
        ProviderUnavailable: no answer within ``WEFT_OIDC_TIMEOUT_S``, an HTTP error, not JSON,
            an ``issuer`` other than ``WEFT_OIDC_ISSUER`` (Discovery §4.3), or an endpoint missing.
    """
    issuer = settings.WEFT_OIDC_ISSUER.rstrip("/")
    with _discovery_lock:
        cached = _discovery.get(issuer)
        if cached and not refresh and time.monotonic() - cached[0] < DISCOVERY_TTL_S:
            return cached[1]
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = requests.get(
            url, timeout=settings.WEFT_OIDC_TIMEOUT_S, verify=settings.WEFT_OIDC_VERIFY_TLS
        )
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise ProviderUnavailable(f"{url}: {type(exc).__name__}: {exc}") from exc
    if not isinstance(document, dict):
        raise ProviderUnavailable(f"{url}: not a JSON object")
    if str(document.get("issuer", "")).rstrip("/") != issuer:
        raise ProviderUnavailable(f"{url}: issuer {document.get('issuer')!r} is not {issuer!r}")
    missing = [
        k
        for k in ("authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri")
        if not document.get(k)
    ]
    if missing:
        raise ProviderUnavailable(f"{url}: no {', '.join(missing)}")
    with _discovery_lock:
        _discovery[issuer] = (time.monotonic(), document)
    return document


def oidc_mapping() -> GroupMapping:
    """The role and tenant groups of ``WEFT_OIDC_ROLE_GROUPS`` / ``WEFT_OIDC_TENANT_GROUPS``."""
    return GroupMapping.from_pairs(settings.WEFT_OIDC_ROLE_GROUPS, settings.WEFT_OIDC_TENANT_GROUPS, dn=False)


def claim_groups(claims: dict) -> list[str]:
    """The groups claim (``WEFT_OIDC_GROUPS_CLAIM``) as a list of strings: a list keeps its
    strings, one string is one group, anything else none."""
    value = claims.get(settings.WEFT_OIDC_GROUPS_CLAIM)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [g for g in value if isinstance(g, str)]
    return []


class WeftOIDCBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend with the rules of this module's docstring. It answers only
    the callback's request (``/oidc/callback/``); password sign-ins pass it by."""

    def __init__(self, *args, **kwargs):
        # the endpoints are read from discovery per sign-in, not from settings at start-up
        self.OIDC_OP_TOKEN_ENDPOINT = self.OIDC_OP_USER_ENDPOINT = self.OIDC_OP_JWKS_ENDPOINT = None
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None
        self.UserModel = get_user_model()

    def authenticate(self, request, **kwargs):
        if request is None or not settings.WEFT_OIDC_ISSUER or "code" not in request.GET:
            return None
        if request.path != reverse("oidc_authentication_callback"):
            return None
        try:
            document = provider_configuration()
            self.OIDC_OP_TOKEN_ENDPOINT = document["token_endpoint"]
            self.OIDC_OP_USER_ENDPOINT = document["userinfo_endpoint"]
            self.OIDC_OP_JWKS_ENDPOINT = document["jwks_uri"]
            return super().authenticate(request, **kwargs)
        except ProviderUnavailable as exc:
            log.warning("OIDC provider unavailable: %s", exc)
            note_problem(request, unavailable_message())
        except requests.RequestException as exc:  # the token, JWKS or userinfo request
            log.warning("OIDC sign-in failed at the provider: %s: %s", type(exc).__name__, exc)
            note_problem(request, f"{provider_name()} did not complete the sign-in: try again.")
        except SuspiciousOperation as exc:  # a token whose signature or nonce does not check
            log.warning("OIDC sign-in refused: %s", exc)
            note_problem(
                request, f"{provider_name()}'s answer could not be verified: the sign-in is refused."
            )
        return None

    def get_or_create_user(self, access_token, id_token, payload):
        """The user the claims name, created or updated, with the groups applied; ``None`` when
        refused (the reason noted for the sign-in page)."""
        claims = self.get_userinfo(access_token, id_token, payload)
        username = claims.get(settings.WEFT_OIDC_USERNAME_CLAIM)
        if not isinstance(username, str) or not username.strip() or len(username) > USERNAME_MAX:
            note_problem(
                self.request, f"{provider_name()} gave no usable {settings.WEFT_OIDC_USERNAME_CLAIM!r} claim."
            )
            return None
        try:
            printable_text(username)
        except Exception:
            note_problem(
                self.request, f"{provider_name()} gave no usable {settings.WEFT_OIDC_USERNAME_CLAIM!r} claim."
            )
            return None
        groups = claim_groups(claims)
        mapping = oidc_mapping()
        # in any case, as the LDAP sign-in looks names up (django-auth-ldap: ``__iexact``): "ADA"
        # from the provider is the local "ada", not a new account beside it
        named = list(self.UserModel.objects.filter(username__iexact=username))
        local = next((u for u in named if is_local(u)), None)
        if local is not None:
            note_problem(
                self.request, f"{local.username!r} is a local Weft account: sign in with its Weft password."
            )
            return None
        if len(named) > 1:
            note_problem(self.request, AMBIGUOUS)
            log.warning("OIDC sign-in of %r refused: accounts %s differ only in case", username,
                        sorted(u.username for u in named))  # fmt: skip
            return None
        user = named[0] if named else None
        if user is None:
            if not mapping.role_for(groups):
                note_problem(self.request, NO_GROUP)
                log.warning("OIDC sign-in of %r refused: none of Weft's groups in %r", username, groups[:20])
                return None
            user = self.UserModel(username=username)
            user.set_unusable_password()
        for field, claim in (("email", "email"), ("first_name", "given_name"), ("last_name", "family_name")):
            value = claims.get(claim)
            if isinstance(value, str):
                setattr(user, field, value[: self.UserModel._meta.get_field(field).max_length])
        user.save()
        try:
            apply_groups(
                user, source="oidc", subject=str(claims.get("sub", "")), groups=groups, mapping=mapping
            )
        except DirectorySignInRefused as exc:
            note_problem(self.request, str(exc))
            return None
        return user

    def get_user(self, user_id):
        user = super().get_user(user_id)
        return user if user is not None and user.is_active else None


class _Configured:
    """404 while ``WEFT_OIDC_ISSUER`` is unset."""

    def dispatch(self, request, *args, **kwargs):
        if not settings.WEFT_OIDC_ISSUER:
            raise Http404("single sign-on is not configured")
        return super().dispatch(request, *args, **kwargs)


class SignInStartView(_Configured, OIDCAuthenticationRequestView):
    """``/oidc/authenticate/``: to the provider's authorization endpoint (from discovery); the
    provider down: back to the sign-in page with a message."""

    def __init__(self, *args, **kwargs):
        super(OIDCAuthenticationRequestView, self).__init__(*args, **kwargs)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID

    def get(self, request):
        try:
            self.OIDC_OP_AUTH_ENDPOINT = provider_configuration()["authorization_endpoint"]
        except ProviderUnavailable as exc:
            log.warning("OIDC provider unavailable: %s", exc)
            messages.error(request, unavailable_message())
            return HttpResponseRedirect(reverse(settings.LOGIN_URL))
        return super().get(request)


class SignInCallbackView(_Configured, OIDCAuthenticationCallbackView):
    """``/oidc/callback/``: mozilla-django-oidc's, telling the sign-in page why a sign-in failed.
    A callback whose ``state`` is not this session's (an old link from the history, a sign-in
    started in another browser) is refused with a message and one log line, not Django's 400
    with a traceback."""

    def get(self, request):
        try:
            return super().get(request)
        except SuspiciousOperation as exc:
            log.warning("OIDC callback refused: %s", exc)
            note_problem(
                request, "This sign-in link is not from this browser's sign-in or has expired: sign in again."
            )
            return self.login_failure()

    def login_failure(self):
        problems = problems_of(self.request)
        if not problems:  # the provider answered an error, or the session holds no sign-in started
            log.warning(
                "OIDC sign-in did not complete: %s",
                self.request.GET.get("error", "no sign-in started in this session")[:200],
            )
            problems = [f"Single sign-on through {provider_name()} did not complete."]
        for problem in problems:
            messages.error(self.request, problem)
        return HttpResponseRedirect(reverse(settings.LOGIN_URL))
