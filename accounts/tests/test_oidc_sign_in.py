"""OpenID Connect single sign-on (issue 26 §1; ``accounts.oidc_auth``) against a real provider
(django-oidc-provider in a subprocess on loopback, ``tests.support.oidc_provider``): the
authorization-code flow through its real endpoints, the groups claim mapped to roles and tenants."""

from __future__ import annotations

import logging

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.models import DirectoryAccount
from accounts.roles import Role, role_of
from pools.models import Tenant, TenantMembership
from tests.support.directory_settings import oidc_settings
from tests.support.oidc_flow import back_to_weft, sign_in_at_provider, to_provider
from tests.support.oidc_provider import CLIENT_ID, CLIENT_SECRET, password_of, start_provider
from tests.support.slapd import free_port

from .conftest import PASSWORDS


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def sso(name: str, password: str | None = None):
    """The whole sign-in of ``name`` at the provider; returns (Weft client, Weft's last answer)."""
    weft = Client()
    authorize = to_provider(weft)
    callback = sign_in_at_provider(authorize, name, password or password_of(name))
    return weft, back_to_weft(weft, callback)


def test_sign_in_page_offers_the_provider(oidc_signin):
    page = Client().get("/accounts/login/")
    assert page.status_code == 200
    assert b'id="oidc-sign-in"' in page.content and b"Sign in with Test IdP" in page.content


def test_code_flow_creates_the_user_with_the_claims_role_and_tenant(oidc_signin):
    research = Tenant.objects.create(name="research")
    weft = Client()
    authorize = to_provider(weft)
    assert authorize.startswith(f"{oidc_signin.issuer}/authorize?")
    assert "code_challenge=" in authorize and "response_type=code" in authorize
    callback = sign_in_at_provider(authorize, "sso-admin", password_of("sso-admin"))
    assert "code=" in callback and "state=" in callback
    response = back_to_weft(weft, callback)
    assert response.status_code == 302 and response["Location"] == "/"
    assert signed_in(weft) and weft.get("/").status_code == 200
    admin = get_user_model().objects.get(username="sso-admin")
    assert role_of(admin) == Role.ADMIN
    assert admin.email == "sso-admin@idp.test" and not admin.has_usable_password()
    account = DirectoryAccount.objects.get(user=admin)
    assert account.source == "oidc" and account.groups == ["weft-admins"] and account.subject

    weft, response = sso("sso-viewer")
    assert response.status_code == 302 and signed_in(weft)
    viewer = get_user_model().objects.get(username="sso-viewer")
    assert role_of(viewer) == Role.VIEWER
    assert TenantMembership.objects.get(user=viewer, tenant=research).role == "viewer"
    assert not TenantMembership.objects.filter(user=admin).exists()


def test_a_claim_naming_no_weft_group_gives_no_role(oidc_signin):
    """sso-stranger's groups claim says ``Weft-Admins`` (not ``weft-admins``): no user, no sign-in,
    the reason on the sign-in page."""
    weft, response = sso("sso-stranger")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/"
    assert not signed_in(weft)
    assert not get_user_model().objects.filter(username="sso-stranger").exists()
    page = weft.get("/accounts/login/")
    assert b"none of the groups that give a role in Weft" in page.content


def test_a_local_account_is_not_taken_over(oidc_signin, settings, people):
    """The provider's user name claim names a local account (``ada``): refused, ada unchanged."""
    settings.WEFT_OIDC_USERNAME_CLAIM = "given_name"  # the provider's sso-admin → "Admin"
    people.ada.username = "Admin"
    people.ada.save()
    weft, response = sso("sso-admin")
    assert response["Location"] == "/accounts/login/" and not signed_in(weft)
    assert b"is a local Weft account" in weft.get("/accounts/login/").content
    assert not DirectoryAccount.objects.exists()
    people.ada.refresh_from_db()
    assert people.ada.check_password(PASSWORDS["ada"])


def test_provider_down_gives_a_clear_message(settings, db, people, tmp_path, caplog):
    """A provider stopped by its pid: "Sign in with" comes back to the sign-in page with a message
    (no 500, no traceback); stopped between the provider's sign-in and the callback: the same;
    the local Admin still signs in."""
    provider = start_provider(tmp_path / "idp", free_port())
    try:
        for name, value in oidc_settings(provider.issuer, CLIENT_ID, CLIENT_SECRET).items():
            setattr(settings, name, value)
        weft = Client()
        callback = sign_in_at_provider(to_provider(weft), "sso-admin", password_of("sso-admin"))
    finally:
        provider.stop()
    caplog.clear()
    with caplog.at_level(logging.INFO):
        response = back_to_weft(weft, callback)  # the code cannot be exchanged now
        assert response.status_code == 302 and response["Location"] == "/accounts/login/"
        assert b"Test IdP did not complete the sign-in" in weft.get("/accounts/login/").content

        settings.WEFT_OIDC_ISSUER = f"http://127.0.0.1:{free_port()}/openid"  # nothing listens there
        weft = Client()
        assert to_provider(weft) == "/accounts/login/"
        page = weft.get("/accounts/login/")
        assert page.status_code == 200
        assert b"Test IdP cannot be reached now" in page.content
        assert b"Local Weft accounts can still sign in" in page.content

        local = Client()
        response = local.post("/accounts/login/", {"username": "ada", "password": PASSWORDS["ada"]})
        assert response.status_code == 302 and signed_in(local)
    assert not any(r.exc_info for r in caplog.records)
    assert [r.levelno for r in caplog.records if r.name == "weft.auth" and "OIDC" in r.getMessage()] == [
        logging.WARNING,
        logging.WARNING,
    ]


def test_a_callback_from_another_browser_is_refused_with_a_message(oidc_signin, caplog):
    """The provider's redirect replayed in a browser whose session did not start it: refused
    (the state is not its own), a message, no traceback."""
    callback = sign_in_at_provider(to_provider(Client()), "sso-admin", password_of("sso-admin"))
    other = Client()
    to_provider(other)  # a sign-in of its own started: a state of its own
    with caplog.at_level(logging.INFO):
        response = back_to_weft(other, callback)
    assert response.status_code == 302 and response["Location"] == "/accounts/login/"
    assert not signed_in(other)
    assert not get_user_model().objects.filter(username="sso-admin").exists()
    assert b"not from this browser" in other.get("/accounts/login/").content
    assert not any(r.exc_info for r in caplog.records)


@pytest.mark.parametrize("path", ["/oidc/authenticate/", "/oidc/callback/?code=x&state=y"])
def test_oidc_pages_404_when_not_configured(client, db, path):
    assert client.get(path).status_code == 404
