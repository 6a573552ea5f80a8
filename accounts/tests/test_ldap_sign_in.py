"""Sign-in through an LDAP directory (issue 26 §1; ``accounts.ldap_auth``, ``accounts.directory``)
against a real slapd on loopback (``tests.support.slapd``) loaded from
``tests/support/directory/weft.ldif``, through the real sign-in page (``/accounts/login/``)."""

from __future__ import annotations

import logging

import ldap
import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.models import AuditEntry, DirectoryAccount
from accounts.roles import Role, role_of
from pools.models import Tenant, TenantMembership
from tests.support.directory_settings import ldap_settings

from .conftest import PASSWORDS

LOGIN = "/accounts/login/"
PEOPLE = "ou=people,dc=weft,dc=test"
GROUPS = "ou=groups,dc=weft,dc=test"


def sign_in(username: str, password: str, client: Client | None = None):
    """POST the sign-in form as a browser does; returns (client, response)."""
    client = client or Client()
    return client, client.post(LOGIN, {"username": username, "password": password, "next": "/"})


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def user(name: str):
    return get_user_model().objects.get(username=name)


@pytest.fixture
def research(db):
    return Tenant.objects.create(name="research")


def test_directory_groups_give_roles_and_tenants(ldap_signin, research):
    """alice (weft-admins and weft-viewers) is an Admin, bob an Operator and research operator,
    carol a Viewer and research viewer; the users are created from the directory's entries, with
    no Weft password, and marked as directory accounts."""
    expected = {
        "alice": (Role.ADMIN, None),
        "bob": (Role.OPERATOR, "operator"),
        "carol": (Role.VIEWER, "viewer"),
    }
    for name, (role, tenant_role) in expected.items():
        client, response = sign_in(name, f"pw-{name}-dir")
        assert response.status_code == 302 and response["Location"] == "/", name
        assert signed_in(client)
        u = user(name)
        assert role_of(u) == role
        assert u.email == f"{name}@weft.test" and not u.has_usable_password()
        account = DirectoryAccount.objects.get(user=u)
        assert account.source == "ldap" and account.subject == f"uid={name},{PEOPLE}"
        membership = TenantMembership.objects.filter(user=u, tenant=research).first()
        assert (membership.role if membership else None) == tenant_role
        assert client.get("/").status_code == 200
    assert AuditEntry.objects.filter(action="user.directory_sync", username="alice").count() == 1
    assert AuditEntry.objects.filter(action="tenant.member_sync", object_repr="research").count() == 2


def test_users_pages_mark_directory_accounts(ldap_signin, people):
    sign_in("bob", "pw-bob-dir")
    admin = Client()
    admin.force_login(people.ada)
    listing = admin.get("/accounts/users/").content.decode()
    assert 'title="signs in through the directory">ldap</span>' in listing
    assert listing.count("signs in through the directory") == 1  # bob only, not the local users
    page = admin.get(f"/accounts/users/{user('bob').pk}/").content.decode()
    assert f"uid=bob,{PEOPLE}" in page and "Role and tenants follow its groups" in page
    assert "user-directory" not in admin.get(f"/accounts/users/{people.vic.pk}/").content.decode()


def test_wrong_password_is_refused_and_counted(ldap_signin):
    client, response = sign_in("alice", "not-her-password")
    assert response.status_code == 200 and not signed_in(client)
    assert b"didn&#x27;t match" in response.content or b"didn't match" in response.content
    assert not get_user_model().objects.filter(username="alice").exists()
    assert AuditEntry.objects.filter(action="user.login_failed", username="alice").count() == 1


def test_disabled_directory_account_is_refused(ldap_signin):
    """dave is in weft-viewers but his entry is locked (ppolicy ``pwdAccountLockedTime``): the
    directory refuses his bind, so Weft does."""
    client, response = sign_in("dave", "pw-dave-dir")
    assert response.status_code == 200 and not signed_in(client)
    assert not get_user_model().objects.filter(username="dave").exists()


def test_user_in_no_weft_group_is_refused_with_a_reason(ldap_signin):
    client, response = sign_in("erin", "pw-erin-dir")
    assert response.status_code == 200 and not signed_in(client)
    assert b"none of the groups that give a role in Weft" in response.content
    assert not get_user_model().objects.filter(username="erin").exists()


@pytest.mark.backend  # the sign-in's row lock and transaction, on PostgreSQL too
def test_group_change_counts_at_the_next_sign_in(ldap_signin, research):
    """alice loses weft-admins: a Viewer at her next sign-in; loses weft-viewers too: refused,
    deactivated, her open session ends; back in a group: signed in and active again. bob moves
    from research-ops to research: a research viewer."""
    directory = ldap_signin
    first, response = sign_in("alice", "pw-alice-dir")
    assert role_of(user("alice")) == Role.ADMIN
    try:
        directory.modify(f"cn=weft-admins,{GROUPS}", [(ldap.MOD_DELETE, "member", [f"uid=alice,{PEOPLE}"])])
        _, response = sign_in("alice", "pw-alice-dir")
        assert response.status_code == 302 and role_of(user("alice")) == Role.VIEWER

        directory.modify(f"cn=weft-viewers,{GROUPS}", [(ldap.MOD_DELETE, "member", [f"uid=alice,{PEOPLE}"])])
        client, response = sign_in("alice", "pw-alice-dir")
        assert response.status_code == 200 and not signed_in(client)
        assert b"none of the groups that give a role in Weft" in response.content
        alice = user("alice")
        assert not alice.is_active and not alice.groups.exists()
        assert DirectoryAccount.objects.get(user=alice).suspended
        assert first.get("/").status_code == 302  # the session opened as an Admin is over

        directory.modify(f"cn=weft-operators,{GROUPS}", [(ldap.MOD_ADD, "member", [f"uid=alice,{PEOPLE}"])])
        client, response = sign_in("alice", "pw-alice-dir")
        assert response.status_code == 302 and signed_in(client)
        alice = user("alice")
        assert alice.is_active and role_of(alice) == Role.OPERATOR
        assert not DirectoryAccount.objects.get(user=alice).suspended

        sign_in("bob", "pw-bob-dir")
        assert TenantMembership.objects.get(user=user("bob"), tenant=research).role == "operator"
        directory.modify(f"cn=research-ops,{GROUPS}", [(ldap.MOD_DELETE, "member", [f"uid=bob,{PEOPLE}"])])
        directory.modify(f"cn=research,{GROUPS}", [(ldap.MOD_ADD, "member", [f"uid=bob,{PEOPLE}"])])
        sign_in("bob", "pw-bob-dir")
        assert TenantMembership.objects.get(user=user("bob"), tenant=research).role == "viewer"
    finally:  # the module's directory as loaded, for the other tests
        for dn, op, who in (
            (f"cn=weft-admins,{GROUPS}", ldap.MOD_ADD, "alice"),
            (f"cn=weft-viewers,{GROUPS}", ldap.MOD_ADD, "alice"),
            (f"cn=weft-operators,{GROUPS}", ldap.MOD_DELETE, "alice"),
            (f"cn=research-ops,{GROUPS}", ldap.MOD_ADD, "bob"),
            (f"cn=research,{GROUPS}", ldap.MOD_DELETE, "bob"),
        ):
            try:
                directory.modify(dn, [(op, "member", [f"uid={who},{PEOPLE}"])])
            except (ldap.TYPE_OR_VALUE_EXISTS, ldap.NO_SUCH_ATTRIBUTE):
                pass


def test_an_admin_deactivation_in_weft_holds(ldap_signin):
    sign_in("carol", "pw-carol-dir")
    carol = user("carol")
    carol.is_active = False
    carol.save()
    client, response = sign_in("carol", "pw-carol-dir")
    assert response.status_code == 200 and not signed_in(client)
    assert b"deactivated in Weft" in response.content
    assert not user("carol").is_active


def test_local_account_is_never_taken_over_by_the_directory(ldap_signin, people):
    """The directory has an "ada" too (an Admin there): her directory password does not sign in
    the local ada, whose Weft password still does (break-glass); nothing about her changes."""
    client, response = sign_in("ada", "pw-ada-dir")
    assert response.status_code == 200 and not signed_in(client)
    client, response = sign_in("ada", PASSWORDS["ada"])
    assert response.status_code == 302 and signed_in(client)
    assert not DirectoryAccount.objects.filter(user=people.ada).exists()
    assert people.ada.has_usable_password()


def test_directory_down_local_admin_still_signs_in(settings, slapd_factory, people, caplog):
    """The directory stopped (its slapd ended by pid): a directory user gets the sign-in page with
    a clear message (no 500), the log has one WARNING line and no traceback, and the local
    break-glass Admin signs in."""
    server = slapd_factory()
    for name, value in ldap_settings(server.uri).items():
        setattr(settings, name, value)
    _, response = sign_in("carol", "pw-carol-dir")
    assert response.status_code == 302  # up: signs in
    server.stop()
    caplog.clear()
    with caplog.at_level(logging.INFO):
        client, response = sign_in("bob", "pw-bob-dir")
        assert response.status_code == 200 and not signed_in(client)
        assert b"The directory cannot be reached now" in response.content
        assert b"Local Weft accounts still can" in response.content
        client, response = sign_in("ada", PASSWORDS["ada"])
        assert response.status_code == 302 and signed_in(client)
    assert not any(r.exc_info for r in caplog.records)
    down = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert down and all(r.levelno == logging.WARNING and r.name == "weft.auth" for r in down)
    assert server.uri in down[0].getMessage()
    assert not any(
        r.name.startswith("django_auth_ldap") and r.levelno >= logging.WARNING for r in caplog.records
    )


def test_lockout_still_applies_to_directory_users(ldap_signin, settings):
    """django-axes runs before the directory: after WEFT_LOGIN_FAILURE_LIMIT wrong passwords of
    bob, his right directory password is refused with the lock-out (429)."""
    limit = settings.AXES_FAILURE_LIMIT
    for _ in range(limit - 1):
        _, response = sign_in("bob", "wrong")
        assert response.status_code == 200
    _, response = sign_in("bob", "wrong")
    assert response.status_code == 429
    client, response = sign_in("bob", "pw-bob-dir")
    assert response.status_code == 429 and not signed_in(client)
    assert b"Too many failed sign-ins" in response.content


def test_no_directory_settings_change_nothing(client, db):
    """Without WEFT_LDAP_URI/WEFT_OIDC_ISSUER: axes and the password backend only, no SSO link,
    the OIDC pages 404."""
    from django.conf import settings

    assert settings.AUTHENTICATION_BACKENDS == [
        "axes.backends.AxesStandaloneBackend",
        "accounts.backends.UserNameCheckedBackend",
    ]
    page = client.get(LOGIN)
    assert page.status_code == 200 and b"oidc-sign-in" not in page.content
    assert client.get("/oidc/authenticate/").status_code == 404
