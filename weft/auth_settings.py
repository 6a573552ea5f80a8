"""The directory sign-in settings (issue 26) that ``weft.settings`` derives from ``WEFT_LDAP_*`` and
``WEFT_OIDC_*``: django-auth-ldap's ``AUTH_LDAP_*`` and mozilla-django-oidc's ``OIDC_*``, and
where their backends sit in ``AUTHENTICATION_BACKENDS``.

Functions of plain values, so the settings module and the tests build the same settings.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

#: ``WEFT_LDAP_GROUP_TYPE`` → (django_auth_ldap.config class, its keyword arguments, the group search filter)
LDAP_GROUP_TYPES: dict[str, tuple[str, dict, str]] = {
    "groupofnames": ("GroupOfNamesType", {"name_attr": "cn"}, "(objectClass=groupOfNames)"),
    "nestedgroupofnames": ("NestedGroupOfNamesType", {"name_attr": "cn"}, "(objectClass=groupOfNames)"),
    "groupofuniquenames": ("GroupOfUniqueNamesType", {"name_attr": "cn"}, "(objectClass=groupOfUniqueNames)"),
    "posixgroup": ("PosixGroupType", {"name_attr": "cn"}, "(objectClass=posixGroup)"),
    "activedirectory": ("ActiveDirectoryGroupType", {"name_attr": "cn"}, "(objectClass=group)"),
    "nestedactivedirectory": ("NestedActiveDirectoryGroupType", {"name_attr": "cn"}, "(objectClass=group)"),
}

LDAP_BACKEND = "accounts.ldap_auth.WeftLDAPBackend"
OIDC_BACKEND = "accounts.oidc_auth.WeftOIDCBackend"
OIDC_SIGN_ALGOS = ("rs256", "es256", "hs256")


def ldap_auth_settings(
    *,
    uri: str,
    user_base: str,
    user_filter: str,
    group_base: str,
    group_type: str,
    role_groups: tuple[tuple[str, str], ...],
    bind_dn: str = "",
    bind_password: str = "",
    start_tls: bool = False,
    deny_group: str = "",
    timeout_s: float = 5.0,
) -> dict[str, Any]:
    """django-auth-ldap's settings (``AUTH_LDAP_*``) for a directory at ``uri``.

    Users are searched under ``user_base`` with ``user_filter`` (``%(user)s`` is the name typed,
    escaped), then bound as with their password; groups are searched under ``group_base`` by
    ``group_type`` (a key of :data:`LDAP_GROUP_TYPES`). Network and operation timeouts are
    ``timeout_s``; referrals are not chased (Active Directory's make searches hang).

    Raises:
        ImproperlyConfigured: a base or the role groups missing, a URI of another scheme, a filter
            without ``%(user)s``.
    """
    import ldap
    from django_auth_ldap import config

    missing = [
        n
        for n, v in (
            ("WEFT_LDAP_USER_BASE", user_base),
            ("WEFT_LDAP_GROUP_BASE", group_base),
            ("WEFT_LDAP_ROLE_GROUPS", role_groups),
        )
        if not v
    ]
    if missing:
        raise ImproperlyConfigured(
            f"WEFT_LDAP_URI is set: set {', '.join(missing)} too (README 'Configuration')"
        )
    bad = [u for u in uri.split() if not u.lower().startswith(("ldap://", "ldaps://", "ldapi://"))]
    if bad:
        raise ImproperlyConfigured(f"WEFT_LDAP_URI: {bad[0]!r} is not an ldap://, ldaps:// or ldapi:// URI")
    if "%(user)s" not in user_filter:
        raise ImproperlyConfigured(f"WEFT_LDAP_USER_FILTER={user_filter!r} must contain %(user)s")
    type_name, type_kwargs, group_filter = LDAP_GROUP_TYPES[group_type]
    return {
        "AUTH_LDAP_SERVER_URI": uri,
        "AUTH_LDAP_START_TLS": start_tls,
        "AUTH_LDAP_BIND_DN": bind_dn,
        "AUTH_LDAP_BIND_PASSWORD": bind_password,
        "AUTH_LDAP_USER_SEARCH": config.LDAPSearch(user_base, ldap.SCOPE_SUBTREE, user_filter),
        "AUTH_LDAP_GROUP_SEARCH": config.LDAPSearch(group_base, ldap.SCOPE_SUBTREE, group_filter),
        "AUTH_LDAP_GROUP_TYPE": getattr(config, type_name)(**type_kwargs),
        "AUTH_LDAP_DENY_GROUP": deny_group or None,
        "AUTH_LDAP_USER_ATTR_MAP": {"first_name": "givenName", "last_name": "sn", "email": "mail"},
        "AUTH_LDAP_ALWAYS_UPDATE_USER": True,
        "AUTH_LDAP_MIRROR_GROUPS": False,  # roles come from WEFT_LDAP_ROLE_GROUPS (accounts.directory)
        "AUTH_LDAP_FIND_GROUP_PERMS": False,
        "AUTH_LDAP_CACHE_TIMEOUT": 0,  # a group change counts at the next sign-in
        "AUTH_LDAP_CONNECTION_OPTIONS": {
            ldap.OPT_NETWORK_TIMEOUT: timeout_s,
            ldap.OPT_TIMEOUT: timeout_s,
            ldap.OPT_REFERRALS: 0,
        },
    }


def oidc_auth_settings(
    *,
    client_id: str,
    client_secret: str,
    sign_algo: str = "rs256",
    scopes: str = "openid email profile",
    timeout_s: float = 10.0,
    verify_tls: bool = True,
) -> dict[str, Any]:
    """mozilla-django-oidc's settings (``OIDC_*``) for a client of the provider; its endpoints come
    from discovery (``accounts.oidc_auth``).

    Raises:
        ImproperlyConfigured: no client id or secret, or ``openid`` not in ``scopes``.
    """
    if not client_id or not client_secret:
        raise ImproperlyConfigured(
            "WEFT_OIDC_ISSUER is set: set WEFT_OIDC_CLIENT_ID and WEFT_OIDC_CLIENT_SECRET too (README 'Configuration')"
        )
    if "openid" not in scopes.split():
        raise ImproperlyConfigured(f"WEFT_OIDC_SCOPES={scopes!r} must include openid")
    return {
        "OIDC_RP_CLIENT_ID": client_id,
        "OIDC_RP_CLIENT_SECRET": client_secret,
        "OIDC_RP_SIGN_ALGO": sign_algo.upper(),
        "OIDC_RP_SCOPES": scopes,
        "OIDC_TIMEOUT": timeout_s,
        "OIDC_VERIFY_SSL": verify_tls,
        "OIDC_USE_NONCE": True,
        "OIDC_USE_PKCE": True,
        "OIDC_STORE_ACCESS_TOKEN": False,
        "OIDC_STORE_ID_TOKEN": False,
        "OIDC_CREATE_USER": True,
        "OIDC_AUTHENTICATION_CALLBACK_URL": "oidc_authentication_callback",
    }


def authentication_backends(*, ldap: bool, oidc: bool) -> list[str]:
    """Axes first (it refuses a locked-out sign-in before any password check), then the
    directory backends that are configured, then Weft's password backend (local accounts,
    break-glass)."""
    return [
        "axes.backends.AxesStandaloneBackend",
        *([LDAP_BACKEND] if ldap else []),
        *([OIDC_BACKEND] if oidc else []),
        "accounts.backends.UserNameCheckedBackend",
    ]
