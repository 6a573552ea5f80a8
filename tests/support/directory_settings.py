"""The settings of the directory sign-in tests (issue 26), built as ``weft.settings`` builds them from
``WEFT_LDAP_*`` / ``WEFT_OIDC_*`` (``weft.auth_settings``), for the directory in
``tests/support/directory/weft.ldif`` and the provider of ``tests/support/oidc_provider``."""

from __future__ import annotations

from weft.auth_settings import authentication_backends, ldap_auth_settings, oidc_auth_settings

GROUPS = "ou=groups,dc=weft,dc=test"
#: WEFT_LDAP_ROLE_GROUPS of the tests (DNs written with other case and spaces on purpose)
LDAP_ROLE_GROUPS = (
    ("admin", f"CN=weft-admins, {GROUPS}"),
    ("operator", f"cn=weft-operators,{GROUPS}"),
    ("viewer", f"cn=weft-viewers,{GROUPS}"),
)
#: WEFT_LDAP_TENANT_GROUPS: research's viewers and operators
LDAP_TENANT_GROUPS = (
    ("research", f"cn=research,{GROUPS}"),
    ("research:operator", f"cn=research-ops,{GROUPS}"),
)


def ldap_settings(uri: str, *, oidc: bool = False, **overrides) -> dict:
    """Every setting the LDAP sign-in needs for the test directory at ``uri``."""
    out = {
        "WEFT_LDAP_URI": uri,
        "WEFT_LDAP_ROLE_GROUPS": LDAP_ROLE_GROUPS,
        "WEFT_LDAP_TENANT_GROUPS": LDAP_TENANT_GROUPS,
        **ldap_auth_settings(
            uri=uri,
            user_base="ou=people,dc=weft,dc=test",
            user_filter="(uid=%(user)s)",
            group_base=GROUPS,
            group_type="groupofnames",
            role_groups=LDAP_ROLE_GROUPS,
            timeout_s=3.0,
        ),
        "AUTHENTICATION_BACKENDS": authentication_backends(ldap=True, oidc=oidc),
    }
    out.update(overrides)
    return out


#: WEFT_OIDC_ROLE_GROUPS / _TENANT_GROUPS of the tests (claim values of the provider's "groups")
OIDC_ROLE_GROUPS = (("admin", "weft-admins"), ("operator", "weft-operators"), ("viewer", "weft-viewers"))
OIDC_TENANT_GROUPS = (("research", "research"),)


def oidc_settings(issuer: str, client_id: str, client_secret: str, **overrides) -> dict:
    """Every setting the OIDC sign-in needs for the provider at ``issuer``."""
    out = {
        "WEFT_OIDC_ISSUER": issuer,
        "WEFT_OIDC_PROVIDER_NAME": "Test IdP",
        "WEFT_OIDC_ROLE_GROUPS": OIDC_ROLE_GROUPS,
        "WEFT_OIDC_TENANT_GROUPS": OIDC_TENANT_GROUPS,
        "WEFT_OIDC_TIMEOUT_S": 5.0,
        **oidc_auth_settings(
            client_id=client_id,
            client_secret=client_secret,
            sign_algo="rs256",
            scopes="openid email profile groups",
            timeout_s=5.0,
        ),
        "AUTHENTICATION_BACKENDS": authentication_backends(ldap=False, oidc=True),
    }
    out.update(overrides)
    return out
