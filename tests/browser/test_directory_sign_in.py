"""Sign-in through the site's directory in the running system (issue 26 §1): ``manage.py serve``
configured by the ``WEFT_LDAP_*`` / ``WEFT_OIDC_*`` environment, a real slapd and a real OpenID
Connect provider on loopback, Chromium on the sign-in page."""

from __future__ import annotations

import json

import pytest

from tests.browser_support import PASSWORD, free_port, login
from tests.support.oidc_provider import CLIENT_ID, CLIENT_SECRET, password_of, start_provider
from tests.support.slapd import start_slapd

pytestmark = pytest.mark.browser

GROUPS = "ou=groups,dc=weft,dc=test"


def me(page, server) -> dict:
    page.goto(server.url + "/api/accounts/users/me/?format=json")
    return json.loads(page.inner_text("body"))


def test_ldap_sign_in_and_directory_down(weft_server_factory, browser_page, tmp_path):
    directory = start_slapd(tmp_path / "slapd")
    try:
        server = weft_server_factory(
            WEFT_LDAP_URI=directory.uri,
            WEFT_LDAP_USER_BASE="ou=people,dc=weft,dc=test",
            WEFT_LDAP_GROUP_BASE=GROUPS,
            WEFT_LDAP_ROLE_GROUPS=f"admin=cn=weft-admins,{GROUPS}; operator=cn=weft-operators,{GROUPS}",
            WEFT_LDAP_TIMEOUT_S="3",
        )
        page = browser_page
        login(page, server, "bob", "pw-bob-dir")
        assert (me(page, server)["username"], me(page, server)["role"]) == ("bob", "operator")
        page.context.clear_cookies()
        directory.stop()
        login(page, server, "alice", "pw-alice-dir")
        assert "The directory cannot be reached now" in page.inner_text("main")
        login(page, server, "admin", PASSWORD)  # the local break-glass Admin
        assert me(page, server)["role"] == "admin"
        assert "Traceback" not in server.log()
    finally:
        directory.stop()


def test_oidc_sign_in_with_the_provider_button(weft_server_factory, browser_page, tmp_path):
    port = free_port()  # Weft reads the provider's discovery at sign-in: it may start after Weft
    server = weft_server_factory(
        WEFT_OIDC_ISSUER=f"http://127.0.0.1:{port}/openid",
        WEFT_OIDC_CLIENT_ID=CLIENT_ID,
        WEFT_OIDC_CLIENT_SECRET=CLIENT_SECRET,
        WEFT_OIDC_PROVIDER_NAME="Test IdP",
        WEFT_OIDC_SCOPES="openid email profile groups",
        WEFT_OIDC_ROLE_GROUPS="admin=weft-admins; viewer=weft-viewers",
    )
    provider = start_provider(tmp_path / "idp", port, redirect_uri=f"{server.url}/oidc/callback/")
    try:
        page = browser_page
        page.goto(server.url + "/accounts/login/")
        page.click("#oidc-sign-in")  # "Sign in with Test IdP"
        page.wait_for_selector("#idp-login")
        assert page.url.startswith(f"http://127.0.0.1:{port}/")
        page.fill("input[name=username]", "sso-viewer")
        page.fill("input[name=password]", password_of("sso-viewer"))
        page.click("#idp-login button[type=submit]")
        page.wait_for_url(f"{server.url}/**")
        page.wait_for_load_state("networkidle")
        assert "/accounts/login/" not in page.url, (page.url, page.inner_text("main"))
        assert (me(page, server)["username"], me(page, server)["role"]) == ("sso-viewer", "viewer")
    finally:
        provider.stop()
