"""LDAP / Active Directory sign-in (issue 26): django-auth-ldap's backend with Weft's rules.

Configured by the ``WEFT_LDAP_*`` settings (``weft/settings.py``, README "Configuration"), which
fill django-auth-ldap's ``AUTH_LDAP_*``. On top of ``django_auth_ldap.backend.LDAPBackend``:

* a local account (a user without ``DirectoryAccount``) is never signed in nor changed by the
  directory: its name (in any case) is not sent to the directory at all, so ``ModelBackend``,
  after this backend, checks the Weft password at once (break-glass), however long a hanging
  directory would take; a name that two accounts share in different case is refused with a
  message (django-auth-ldap's case-insensitive lookup would find both);
* the user's groups go through :func:`accounts.directory.apply_groups` (role, tenants,
  suspension) before the sign-in is allowed;
* a directory that cannot be reached or refuses the service bind is one WARNING line
  (``weft.auth``) and a message on the sign-in page, never a traceback or a 500
  (:func:`note_ldap_error`, connected to django-auth-ldap's ``ldap_error`` in
  ``accounts.receivers``); local accounts still sign in.

Django-axes still counts the failures: its backend runs first and ``authenticate`` sends
``user_login_failed`` when every backend declined.
"""

from __future__ import annotations

import logging

import ldap
from django.conf import settings
from django_auth_ldap.backend import LDAPBackend

from .directory import (
    AMBIGUOUS,
    NO_GROUP,
    DirectorySignInRefused,
    GroupMapping,
    apply_groups,
    is_local,
    note_problem,
)
from .login_throttle import USERNAME_MAX

log = logging.getLogger("weft.auth")

#: python-ldap errors that mean "the directory is not there" (connection refused, timeouts)
UNREACHABLE = (ldap.SERVER_DOWN, ldap.TIMEOUT, ldap.CONNECT_ERROR, ldap.TIMELIMIT_EXCEEDED)


def ldap_mapping() -> GroupMapping:
    """The role and tenant groups of ``WEFT_LDAP_ROLE_GROUPS`` / ``WEFT_LDAP_TENANT_GROUPS``."""
    return GroupMapping.from_pairs(settings.WEFT_LDAP_ROLE_GROUPS, settings.WEFT_LDAP_TENANT_GROUPS, dn=True)


def note_ldap_error(request, exception: Exception, context: str = "") -> None:
    """Log a directory error on one line and tell the sign-in page (never the raw error text,
    which may hold the server's internals, to the client)."""
    uri = settings.WEFT_LDAP_URI
    if isinstance(exception, UNREACHABLE):
        note_problem(
            request,
            "The directory cannot be reached now, so directory accounts cannot sign in. "
            "Local Weft accounts still can.",
        )
        log.warning("LDAP directory %s unreachable (%s): %s", uri, context or "sign-in", _describe(exception))
    else:
        note_problem(
            request, "The directory answered with an error, so directory accounts cannot sign in now."
        )
        log.warning("LDAP directory %s error (%s): %s", uri, context or "sign-in", _describe(exception))


def _describe(exception: Exception) -> str:
    """python-ldap's error dict (``{"desc": ..., "info": ...}``) as one line."""
    arg = exception.args[0] if exception.args else {}
    if isinstance(arg, dict):
        return "; ".join(str(arg[k]) for k in ("desc", "info") if arg.get(k)) or type(exception).__name__
    return f"{type(exception).__name__}: {exception}"


def _accounts_named(username: str) -> dict[str, bool]:
    """``{user name: is local}`` of the stored users named ``username`` in any case (the lookup
    django-auth-ldap makes: ``username__iexact``)."""
    from django.contrib.auth import get_user_model

    rows = (
        get_user_model()
        .objects.filter(username__iexact=username)
        .values_list("username", "directory_account")
    )
    return {name: account is None for name, account in rows}


class WeftLDAPBackend(LDAPBackend):
    """django-auth-ldap's backend with the rules of this module's docstring."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        # a name no Weft user can have (a NUL, longer than the user name column) is not looked up
        if not isinstance(username, str) or "\x00" in username or len(username) > USERNAME_MAX:
            return None
        stored = _accounts_named(username.strip())
        if stored.get(username.strip()) or (stored and all(stored.values())):
            # a local account (break-glass): its Weft password signs it in (ModelBackend), so the
            # directory is not asked at all; a directory that is down or hangs does not delay it
            return None
        if len(stored) > 1:
            # django-auth-ldap looks the name up case-insensitively: two accounts answer
            # (MultipleObjectsReturned, a 500 of the sign-in page)
            note_problem(request, AMBIGUOUS)
            log.warning(
                "LDAP sign-in of %r refused: accounts %s differ only in case", username, sorted(stored)
            )
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)

    def get_or_build_user(self, username, ldap_user):
        """django-auth-ldap's lookup, refusing a local account (see the module docstring)."""
        user, built = super().get_or_build_user(username, ldap_user)
        if not built and is_local(user):
            raise ldap_user.AuthenticationFailed(
                f"{username!r} is a local Weft account: its Weft password signs it in"
            )
        if built and not ldap_mapping().role_for(ldap_user.group_dns):
            # no user row for someone the directory gives no role
            note_problem(getattr(ldap_user, "_request", None), NO_GROUP)
            raise ldap_user.AuthenticationFailed("in none of Weft's groups")
        return user, built

    def authenticate_ldap_user(self, ldap_user, password):
        """Authenticate, then apply the user's groups; ``None`` when refused."""
        user = super().authenticate_ldap_user(ldap_user, password)
        if user is None:
            return None
        request = getattr(ldap_user, "_request", None)
        try:
            apply_groups(
                user,
                source="ldap",
                subject=ldap_user.dn or "",
                groups=ldap_user.group_dns,
                mapping=ldap_mapping(),
            )
        except DirectorySignInRefused as exc:
            note_problem(request, str(exc))
            return None
        except ldap.LDAPError as exc:  # the group search failed after the bind
            note_ldap_error(request, exc, "group search")
            return None
        return user

    def get_user(self, user_id):
        """The session's user, ``None`` once deactivated (as ``ModelBackend`` does)."""
        user = super().get_user(user_id)
        return user if user is not None and user.is_active else None
