"""Users and roles, tokens and the audit log in the UI (Admin only, same guards and audit as the
API); the menu by role; styled 403/404 pages, and a refused page is one INFO log line without a
traceback (it was a WARNING with ~30 lines)."""

from __future__ import annotations

import logging
import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.models import ApiToken, AuditEntry
from accounts.roles import role_of
from accounts.tokens import check_key, create_token

from .conftest import PASSWORDS


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def nav(html: str) -> list[str]:
    return re.findall(r'href="([^"]+)"', re.search(r'<nav id="nav">(.*?)</nav>', html, re.S).group(1))


ADMIN_ONLY = {"/event-policies/", "/fabric/import/", "/accounts/users/", "/accounts/audit/"}
EVERYONE = {"/", "/fabric/", "/fabric/map/", "/heatmap/", "/alarms/", "/events/", "/fabric/changes/", "/fabric/compare/",
            "/health/", "/api/docs/"}  # fmt: skip


@pytest.mark.parametrize("who, admin_links", [("vic", False), ("olga", False), ("ada", True), ("root", True)])
def test_menu_by_role(people, who, admin_links):
    client = signed_in(getattr(people, who))
    links = set(nav(client.get("/").content.decode()))
    assert EVERYONE <= links
    assert (ADMIN_ONLY <= links) if admin_links else not (ADMIN_ONLY & links)
    assert ("/admin/" in links) == (who == "root")  # the Django admin: staff only
    for url in links - {"/api/docs/"}:
        assert client.get(url).status_code == 200, url


@pytest.mark.parametrize(
    "url", ["/accounts/users/", "/accounts/audit/", "/fabric/import/", "/event-policies/"]
)
def test_viewer_gets_a_styled_403_and_no_traceback_in_the_log(people, url, caplog):
    caplog.set_level(logging.INFO)
    resp = signed_in(people.vic).get(url)
    assert resp.status_code == 403
    html = resp.content.decode()
    assert 'id="error-page" data-status="403"' in html and "/static/weft/weft.css" in html
    assert "needs the" in html and "vic (viewer)" in html
    assert '<nav id="nav">' in html and "/fabric/import/" not in nav(html)
    refused = [r for r in caplog.records if r.name == "django.request"]
    assert [(r.levelno, r.getMessage(), r.exc_info) for r in refused] == [
        (logging.INFO, f"Forbidden (Permission denied): {url}", None)
    ]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_404_is_styled(people):
    resp = signed_in(people.vic).get("/fabric/nodes/999999/")
    assert resp.status_code == 404
    assert 'data-status="404"' in resp.content.decode()


def test_500_template_renders_without_a_request():
    from django.template.loader import render_to_string

    html = render_to_string("500.html")
    assert 'data-status="500"' in html and "/static/weft/weft.css" in html


def test_admin_creates_a_user_sets_the_role_and_deactivates(people):
    client = signed_in(people.ada)
    resp = client.post(
        "/accounts/users/",
        {"username": "ci-bot", "email": "", "password": "Ci-bot-Pass-phrase-9", "role": "operator"},
    )
    assert resp.status_code == 302
    bot = get_user_model().objects.get(username="ci-bot")
    assert role_of(bot).name == "OPERATOR" and bot.check_password("Ci-bot-Pass-phrase-9")
    assert resp["Location"] == f"/accounts/users/{bot.pk}/"
    assert "ci-bot" in client.get("/accounts/users/").content.decode()
    assert (
        client.post(
            f"/accounts/users/{bot.pk}/", {"op": "update", "role": "viewer", "email": "b@x.org"}
        ).status_code
        == 302
    )
    bot = get_user_model().objects.get(pk=bot.pk)  # role_of caches on the instance
    assert role_of(bot).name == "VIEWER" and bot.email == "b@x.org"
    assert client.post(f"/accounts/users/{bot.pk}/", {"op": "deactivate"}).status_code == 302
    bot.refresh_from_db()
    assert not bot.is_active
    actions = list(
        AuditEntry.objects.filter(object_id=str(bot.pk)).order_by("id").values_list("action", "username")
    )
    assert actions == [("user.create", "ada"), ("user.update", "ada"), ("user.update", "ada")]


@pytest.mark.parametrize(
    "form, located",
    [
        (
            {"username": "vic", "password": "Long-enough-Pass-9", "role": "viewer"},
            "username: A user with that",
        ),
        ({"username": "new", "password": "x", "role": "viewer"}, "password: This password is too short"),
        ({"username": "new", "password": "Long-enough-Pass-9", "role": "boss"}, "role: "),
    ],
)
def test_create_form_errors_are_located_and_nothing_is_written(people, form, located):
    resp = signed_in(people.ada).post("/accounts/users/", form)
    assert resp.status_code == 400
    assert located in resp.content.decode()
    assert not AuditEntry.objects.filter(action="user.create").exists()
    assert not get_user_model().objects.filter(username="new").exists()


def test_guards_hold_in_the_ui(people):
    client = signed_in(people.ada)
    # an Admin cannot change a superuser nor their own role: the styled 403, audited refusal
    assert client.post(f"/accounts/users/{people.root.pk}/", {"op": "deactivate"}).status_code == 403
    assert (
        client.post(f"/accounts/users/{people.ada.pk}/", {"op": "update", "role": "viewer"}).status_code
        == 403
    )
    people.root.refresh_from_db()
    assert people.root.is_active and role_of(get_user_model().objects.get(pk=people.ada.pk)).name == "ADMIN"
    assert AuditEntry.objects.filter(action="user.change_refused").count() == 2


def test_admin_issues_and_revokes_a_users_token(people):
    client = signed_in(people.ada)
    resp = client.post(f"/accounts/users/{people.olga.pk}/", {"op": "issue_token", "name": "grafana"})
    assert resp.status_code == 200
    key = re.search(r'id="new-token-key">([0-9a-f]+)<', resp.content.decode()).group(1)
    token = check_key(key)
    assert (token.user, token.name) == (people.olga, "grafana")
    assert f'data-token="{token.pk}"' in client.get(f"/accounts/users/{people.olga.pk}/").content.decode()
    assert key not in client.get(f"/accounts/users/{people.olga.pk}/").content.decode()  # shown once
    resp = client.post(f"/accounts/users/{people.olga.pk}/", {"op": "revoke_token", "token": token.pk})
    assert resp.status_code == 302 and not ApiToken.objects.filter(pk=token.pk).exists()
    # a superuser's token: not by an Admin who is not one
    root_token = create_token(people.root, "x").token
    assert (
        client.post(
            f"/accounts/users/{people.root.pk}/", {"op": "revoke_token", "token": root_token.pk}
        ).status_code
        == 403
    )
    assert ApiToken.objects.filter(pk=root_token.pk).exists()


def test_audit_log_page_filters(people):
    client = signed_in(people.ada)
    client.post("/accounts/users/", {"username": "n1", "password": PASSWORDS["olga"] + "x", "role": "viewer"})
    create_token(people.olga, "ci", actor=people.olga)
    html = client.get("/accounts/audit/?action=user.create").content.decode()
    assert "user.create" in html and "user.token.create" not in html
    html = client.get("/accounts/audit/?username=olga").content.decode()
    assert "user.token.create" in html and "user.create" not in html.replace("user.create</", "")
    assert signed_in(people.olga).get("/accounts/audit/").status_code == 403
    assert Client().get("/accounts/audit/").status_code == 302  # anonymous: to the sign-in page


def test_token_forms_refuse_a_bad_token_id_or_a_too_long_name_naming_the_field(people, caplog):
    """The users page's token operations check their fields as the API does: a revoke with a
    token id that is not a row id is a 400 naming ``token`` (it was a 500: ValueError in the
    lookup), and a name over 100 characters is a 400 naming ``name`` with no token written (the
    API refuses it; on PostgreSQL the column overflowed: a 500)."""
    client = Client(raise_request_exception=False)
    client.force_login(people.ada)
    token = create_token(people.olga, "keep").token
    for bad in ("abc", "1.5", "-1", "99999999999999999999999"):
        resp = client.post(f"/accounts/users/{people.olga.pk}/", {"op": "revoke_token", "token": bad})
        assert resp.status_code == 400 and "token" in resp.content.decode(), bad
    assert ApiToken.objects.filter(pk=token.pk).exists()
    resp = client.post(f"/accounts/users/{people.olga.pk}/", {"op": "issue_token", "name": "n" * 101})
    assert resp.status_code == 400 and "name" in resp.content.decode()
    assert list(ApiToken.objects.filter(user=people.olga).values_list("name", flat=True)) == ["keep"]
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def test_nul_in_a_token_name_or_an_audit_filter_is_a_400_naming_the_field(people, caplog):
    """PostgreSQL refuses a NUL in a text parameter: the token name was a DataError (500) on the
    users page, and so was an audit-log filter."""
    client = Client(raise_request_exception=False)
    client.force_login(people.ada)
    resp = client.post(f"/accounts/users/{people.olga.pk}/", {"op": "issue_token", "name": "ci\x00"})
    assert resp.status_code == 400 and "name" in resp.content.decode()
    assert not ApiToken.objects.filter(user=people.olga).exists()
    for field in ("action", "username", "object_type"):
        resp = client.get("/accounts/audit/", {field: "user\x00"})
        assert resp.status_code == 400 and field in resp.content.decode(), field
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def test_a_host_not_allowed_is_one_warning_line_not_a_traceback(client, caplog, settings):
    """A health check by IP or a scanner: 400, and one WARNING line naming the Host (a wrong
    ALLOWED_HOSTS shows there) instead of an ERROR with a traceback per request."""
    settings.ALLOWED_HOSTS = ["weft.example.org"]
    caplog.set_level(logging.INFO)
    resp = client.get("/accounts/login/", HTTP_HOST="10.0.0.5:8000")
    assert resp.status_code == 400
    rows = [r for r in caplog.records if r.name == "django.security.DisallowedHost"]
    assert [(r.levelno, r.exc_info, r.exc_text) for r in rows] == [(logging.WARNING, None, None)]
    assert "10.0.0.5:8000" in rows[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_audit_changes_read_as_key_value_lists_not_python_dicts(people):
    """The walkthrough: the audit log and a user's page showed each entry's changes as a raw Python
    dict (``{'state': ['pending', 'placed'], 'victims': [], 'pkey': None}``); they read as the alarm
    details do (``core.templatetags.weft_format.details_items``): ``key: value`` items."""
    from accounts.audit import record

    changes = {"state": ["pending", "placed"], "victims": [], "pkey": None, "placement": {"host018": 8}}
    record("job.place", None, changes, user=people.ada)
    record("user.note", people.ada, {"backfilled": False, "detail": None}, user=people.ada)
    client = signed_in(people.ada)
    for url in ("/accounts/audit/", f"/accounts/users/{people.ada.pk}/"):
        html = client.get(url).content.decode()
        assert "{&#x27;" not in html and "{'" not in html and "None" not in html, url
    html = client.get("/accounts/audit/?action=job.place").content.decode()
    cell = re.search(r'<td class="audit-changes">(.*?)</td>', html, re.S).group(1)
    text = re.sub(r"<[^>]+>", "", cell)
    assert text == "pkey: —; placement: host018=8; state: pending, placed; victims: —", text
