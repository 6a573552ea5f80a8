"""An Admin who is not a superuser cannot change, deactivate or delete a superuser, nor change their
own role or active flag or delete themselves, through the API or the Django admin; the refusal is
audited, and neither its audit entry nor that of a real change can be removed (issue 9: an Admin
set a superuser's password through the API, signed in to /admin/ as them and deleted the audit
entries of it)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from accounts.models import AuditEntry, AuditLogIsAppendOnly
from accounts.roles import Role, role_of

from .conftest import PASSWORDS

NEW_PASSWORD = "an0ther-Pass-phrase"


def user_url(user) -> str:
    return f"/api/accounts/users/{user.pk}/"


def assert_entry_cannot_be_removed(entry: AuditEntry, root) -> None:
    """Through the ORM, the API and the Django admin, as a superuser: the entry stays as it was."""
    before = AuditEntry.objects.values().get(pk=entry.pk)
    with pytest.raises(AuditLogIsAppendOnly):
        entry.delete()
    with pytest.raises(AuditLogIsAppendOnly):
        AuditEntry.objects.filter(pk=entry.pk).delete()
    with pytest.raises(AuditLogIsAppendOnly):
        AuditEntry.objects.filter(pk=entry.pk).update(action="nothing")
    entry.action = "nothing"
    with pytest.raises(AuditLogIsAppendOnly):
        entry.save()
    client = Client()
    client.force_login(root)
    api = f"/api/accounts/audit/{entry.pk}/"
    assert client.delete(api).status_code == 405
    assert client.patch(api, {"action": "x"}, content_type="application/json").status_code == 405
    assert client.post(f"/admin/accounts/auditentry/{entry.pk}/delete/", {"post": "yes"}).status_code == 403
    changelist = client.post(
        "/admin/accounts/auditentry/",
        {"action": "delete_selected", "_selected_action": [entry.pk], "post": "yes"},
    )
    assert changelist.status_code in (200, 302)
    assert AuditEntry.objects.values().get(pk=entry.pk) == before


@pytest.mark.parametrize(
    "method, body",
    [
        ("patch", {"password": NEW_PASSWORD}),
        ("patch", {"role": "viewer"}),
        ("patch", {"is_active": False}),
        ("patch", {"username": "root2"}),
        ("put", {"username": "root", "password": NEW_PASSWORD}),
        ("delete", None),
    ],
)
def test_admin_cannot_change_or_delete_a_superuser(people, api, method, body):
    client = api(people.ada)
    resp = getattr(client, method)(user_url(people.root), body, format="json")
    assert resp.status_code == 403, resp.content
    root = get_user_model().objects.get(pk=people.root.pk)
    assert root.check_password(PASSWORDS["root"]) and root.is_active and root.username == "root"
    assert role_of(root) == Role.ADMIN
    refused = AuditEntry.objects.get(action="user.change_refused")
    assert (refused.username, refused.object_id) == ("ada", str(people.root.pk))
    assert refused.changes["delete"] is (method == "delete")
    assert "superuser" in refused.changes["reason"]


def test_the_reported_attack_fails_and_its_trail_stays(people, api):
    """The sequence of the report: set the superuser's password, sign in as them, delete the trail."""
    resp = api(people.ada).patch(user_url(people.root), {"password": NEW_PASSWORD}, format="json")
    assert resp.status_code == 403
    root = get_user_model().objects.get(pk=people.root.pk)
    assert root.check_password(PASSWORDS["root"]) and not root.check_password(NEW_PASSWORD)
    refused = AuditEntry.objects.get(action="user.change_refused", object_id=str(people.root.pk))
    assert_entry_cannot_be_removed(refused, people.root)


def test_a_real_change_is_audited_and_its_entry_stays(people, api):
    resp = api(people.ada).patch(user_url(people.vic), {"role": "operator"}, format="json")
    assert resp.status_code == 200, resp.content
    assert resp.json()["role"] == "operator"
    entry = AuditEntry.objects.get(action="user.update", object_id=str(people.vic.pk))
    assert entry.changes == {"role": "operator"} and entry.username == "ada"
    assert_entry_cannot_be_removed(entry, people.root)


@pytest.mark.parametrize(
    "body, message",
    [
        ({"role": "viewer"}, "own role"),
        ({"is_active": False}, "own active flag"),
        ({"role": "operator", "is_active": False}, "own active flag and role"),
    ],
)
def test_nobody_changes_their_own_role_or_active_flag(people, api, body, message):
    for user in (people.ada, people.root):
        resp = api(user).patch(user_url(user), body, format="json")
        assert resp.status_code == 403, resp.content
        assert message in resp.json()["detail"]
        fresh = get_user_model().objects.get(pk=user.pk)
        assert fresh.is_active and role_of(fresh) == Role.ADMIN


def test_nobody_deletes_themselves(people, api):
    for user in (people.ada, people.root):
        assert api(user).delete(user_url(user)).status_code == 403
        assert get_user_model().objects.filter(pk=user.pk).exists()
    assert AuditEntry.objects.filter(action="user.change_refused").count() == 2


def test_own_email_password_and_unchanged_role_are_allowed(people, api):
    client = api(people.ada)
    resp = client.patch(
        user_url(people.ada), {"email": "ada@example.org", "role": "admin", "is_active": True}, format="json"
    )
    assert resp.status_code == 200, resp.content
    resp = client.patch(user_url(people.ada), {"password": NEW_PASSWORD}, format="json")
    assert resp.status_code == 200, resp.content
    assert get_user_model().objects.get(pk=people.ada.pk).check_password(NEW_PASSWORD)


def test_admin_still_manages_other_users(people, api):
    client = api(people.ada)
    assert client.patch(user_url(people.olga), {"is_active": False}, format="json").status_code == 200
    assert client.patch(user_url(people.vic), {"password": NEW_PASSWORD}, format="json").status_code == 200
    assert client.delete(user_url(people.olga)).status_code == 204
    assert not get_user_model().objects.filter(username="olga").exists()


def test_a_superuser_manages_another_superuser(people, api):
    other = get_user_model().objects.create_superuser("root2", password=PASSWORDS["root"])
    resp = api(people.root).patch(user_url(other), {"password": NEW_PASSWORD}, format="json")
    assert resp.status_code == 200, resp.content
    assert api(people.root).delete(user_url(other)).status_code == 204


def test_deleting_a_user_keeps_their_audit_entries(people, api):
    entry = AuditEntry.objects.create(user=people.olga, username="olga", action="alarm.acknowledge")
    assert api(people.ada).delete(user_url(people.olga)).status_code == 204
    kept = AuditEntry.objects.get(pk=entry.pk)
    assert (kept.user_id, kept.username, kept.action) == (None, "olga", "alarm.acknowledge")


@pytest.fixture
def staff_admin(people):
    """``ada`` as staff with every permission on users (what the Django admin's user pages need)."""
    people.ada.is_staff = True
    people.ada.save(update_fields=["is_staff"])
    people.ada.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="auth", codename__endswith="_user")
    )
    client = Client()
    client.force_login(people.ada)
    return client


def test_django_admin_pages_follow_the_same_rules(people, staff_admin):
    root = people.root
    resp = staff_admin.post(
        f"/admin/auth/user/{root.pk}/password/", {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD}
    )
    assert resp.status_code == 403
    assert staff_admin.post(f"/admin/auth/user/{root.pk}/delete/", {"post": "yes"}).status_code == 403
    staff_admin.post(
        "/admin/auth/user/", {"action": "delete_selected", "_selected_action": [root.pk], "post": "yes"}
    )
    root = get_user_model().objects.get(pk=root.pk)
    assert root.check_password(PASSWORDS["root"])
    # their own page: the flags and groups are read-only, and deleting themselves is refused
    page = staff_admin.get(f"/admin/auth/user/{people.ada.pk}/change/")
    assert page.status_code == 200
    assert b'name="is_superuser"' not in page.content and b'name="groups"' not in page.content
    assert staff_admin.post(f"/admin/auth/user/{people.ada.pk}/delete/", {"post": "yes"}).status_code == 403
    # another user stays editable
    vic_page = staff_admin.get(f"/admin/auth/user/{people.vic.pk}/change/")
    assert b'name="groups"' in vic_page.content


def test_two_admins_demoting_each_other_cannot_leave_none(people):
    """Ada and Bea, both Admins, each demote the other at once: each request passed the page's
    role check while both were Admins, and both changes were saved (no Admin left). The service
    re-reads the actor's role under a lock of the Admins' rows, so the one that runs second —
    here Bea's, whose role Ada withdrew after Bea's check — is refused and changes nothing."""
    from django.core.exceptions import PermissionDenied

    from accounts import services
    from accounts.api.serializers import UserSerializer
    from accounts.roles import set_role

    bea = get_user_model().objects.create_user("bea", password=PASSWORDS["ada"])
    set_role(bea, "admin")
    bea_as_checked = get_user_model().objects.get(pk=bea.pk)
    assert role_of(bea_as_checked) == Role.ADMIN  # the view's check, cached on the request's user
    ada_change = UserSerializer(bea, data={"role": "viewer"}, partial=True)
    assert ada_change.is_valid()
    services.update_user(people.ada, ada_change)
    bea_change = UserSerializer(people.ada, data={"role": "viewer"}, partial=True)
    assert bea_change.is_valid()
    with pytest.raises(PermissionDenied):
        services.update_user(bea_as_checked, bea_change)
    with pytest.raises(PermissionDenied):
        services.delete_user(bea_as_checked, people.vic)
    assert role_of(get_user_model().objects.get(pk=people.ada.pk)) == Role.ADMIN
    assert get_user_model().objects.filter(pk=people.vic.pk).exists()


def test_refused_demotion_of_the_last_admin_is_audited(people):
    """The lock re-check that keeps the site from losing its last Admin refuses Bea (whose role
    Ada withdrew after Bea's page checked it) demoting Ada and deleting Vic; each refusal leaves a
    ``user.change_refused`` entry naming Bea, the fields and the reason, as the guards' refusals
    do, although the refused transaction itself rolled back."""
    from django.core.exceptions import PermissionDenied

    from accounts import services
    from accounts.api.serializers import UserSerializer
    from accounts.roles import set_role

    bea = get_user_model().objects.create_user("bea", password=PASSWORDS["ada"])
    set_role(bea, "admin")
    bea_as_checked = get_user_model().objects.get(pk=bea.pk)
    demote_bea = UserSerializer(bea, data={"role": "viewer"}, partial=True)
    assert demote_bea.is_valid()
    services.update_user(people.ada, demote_bea)
    before = AuditEntry.objects.filter(action="user.change_refused").count()

    demote_ada = UserSerializer(people.ada, data={"role": "viewer"}, partial=True)
    assert demote_ada.is_valid()
    with pytest.raises(PermissionDenied):
        services.update_user(bea_as_checked, demote_ada)
    with pytest.raises(PermissionDenied):
        services.delete_user(bea_as_checked, people.vic)

    entries = list(AuditEntry.objects.filter(action="user.change_refused").order_by("id"))[before:]
    assert [(e.object_id, e.user_id, e.username) for e in entries] == [
        (str(people.ada.pk), bea.pk, "bea"),
        (str(people.vic.pk), bea.pk, "bea"),
    ]
    assert entries[0].changes == {
        "fields": ["role"],
        "delete": False,
        "reason": "Your admin role was withdrawn meanwhile: nothing changed.",
    }
    assert entries[1].changes["delete"] is True and entries[1].changes["fields"] == []
    assert role_of(get_user_model().objects.get(pk=people.ada.pk)) == Role.ADMIN
    assert not AuditEntry.objects.filter(action="user.update", object_id=str(people.ada.pk)).exists()
