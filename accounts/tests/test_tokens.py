"""API tokens: stored hashed, listed and revoked by their owner and by Admins, revoked when the
password changes, optionally expiring; a bad, revoked or expired token is 401 with
``WWW-Authenticate`` (it was 403)."""

from __future__ import annotations

import base64
import hashlib
import importlib
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken, AuditEntry
from accounts.tokens import TokenInvalid, check_key, create_token

from .conftest import PASSWORDS

ME = "/api/accounts/users/me/"
TOKENS = "/api/accounts/tokens/"
ISSUE = "/api/accounts/users/token/"


def with_token(key: str) -> APIClient:
    client = APIClient(raise_request_exception=False)
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def issue(client, **body) -> dict:
    resp = client.post(ISSUE, body, format="json")
    assert resp.status_code == 200, resp.content
    return resp.json()


def assert_401(resp, detail: str) -> None:
    assert resp.status_code == 401, resp.content
    assert resp["WWW-Authenticate"] == 'Token realm="api"'
    assert resp.json()["detail"] == detail


def test_issued_key_works_and_only_its_hash_is_stored(people, api):
    body = issue(api(people.vic), name="grafana")
    key = body["token"]
    assert len(key) == 40 and body["role"] == "viewer" and body["name"] == "grafana"
    assert body["prefix"] == key[:8] and body["expires_at"] is None
    assert with_token(key).get(ME).json()["username"] == "vic"
    stored = ApiToken.objects.get(pk=body["id"])
    assert stored.key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert not ApiToken.objects.filter(key_hash=key).exists()
    entry = AuditEntry.objects.get(action="user.token.create")
    assert (entry.username, entry.object_id, entry.changes["prefix"]) == ("vic", str(people.vic.pk), key[:8])
    # each call issues another token: the first keeps working
    second = issue(api(people.vic))["token"]
    assert second != key and with_token(key).get(ME).status_code == 200


@pytest.mark.parametrize(
    "header, detail",
    [
        ("Token 0123456789abcdef0123456789abcdef01234567", "Invalid token."),
        ("Token", "Invalid token header. No credentials provided."),
        ("Token a b", "Invalid token header. Token string should not contain spaces."),
    ],
)
def test_a_bad_token_is_401_with_a_challenge(db, header, detail):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    assert_401(client.get(ME), detail)


def test_anonymous_api_request_is_401_with_a_challenge(db):
    assert_401(APIClient().get("/api/fabric/fabrics/"), "Authentication credentials were not provided.")


def test_expired_token_is_401(people, api):
    with override_settings(WEFT_TOKEN_TTL_DAYS=2):
        body = issue(api(people.vic))
    expires = timezone.datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00"))
    assert timedelta(days=2) - timedelta(minutes=1) < expires - timezone.now() <= timedelta(days=2)
    assert with_token(body["token"]).get(ME).status_code == 200
    ApiToken.objects.filter(pk=body["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert_401(with_token(body["token"]).get(ME), "Token expired.")
    listed = api(people.vic).get(TOKENS).json()["results"]
    assert [(t["id"], t["expired"]) for t in listed] == [(body["id"], True)]


def test_token_of_an_inactive_user_is_401(people, api):
    """A token that outlived its user's deactivation (a queryset ``update()``, which revokes
    nothing) still does not authenticate."""
    key = issue(api(people.vic))["token"]
    get_user_model().objects.filter(pk=people.vic.pk).update(is_active=False)
    assert_401(with_token(key).get(ME), "User inactive or deleted.")


@pytest.mark.parametrize("how", ["api", "page", "save"])
def test_deactivation_revokes_tokens_and_reactivation_does_not_bring_them_back(people, api, client, how):
    keys = [issue(api(people.vic))["token"] for _ in range(2)]
    other = issue(api(people.olga))["token"]
    if how == "api":
        r = api(people.ada).patch(
            f"/api/accounts/users/{people.vic.pk}/", {"is_active": False}, format="json"
        )
        assert r.status_code == 200, r.content
    elif how == "page":
        client.force_login(people.ada)
        r = client.post(f"/accounts/users/{people.vic.pk}/", {"op": "deactivate"})
        assert r.status_code in (200, 302), r.content
    else:
        people.vic.is_active = False
        people.vic.save()
    assert not ApiToken.objects.filter(user=people.vic).exists()
    entry = AuditEntry.objects.get(action="user.token.revoke")
    assert entry.changes["reason"] == "user deactivated" and len(entry.changes["tokens"]) == 2
    vic = get_user_model().objects.get(pk=people.vic.pk)
    vic.is_active = True
    vic.save()
    for key in keys:
        assert_401(with_token(key).get(ME), "Invalid token.")
    assert with_token(other).get(ME).status_code == 200
    # saving an inactive user again (or an active one) revokes nothing more
    vic.save()
    assert AuditEntry.objects.filter(action="user.token.revoke").count() == 1


def test_owner_lists_and_revokes_their_own_tokens_only(people, api):
    vic_key = issue(api(people.vic), name="mine")["token"]
    olga = issue(api(people.olga), name="olga's")
    listed = with_token(vic_key).get(TOKENS).json()
    assert [(t["user"], t["name"], t["prefix"]) for t in listed["results"]] == [("vic", "mine", vic_key[:8])]
    assert "token" not in listed["results"][0] and "key_hash" not in listed["results"][0]
    # someone else's token: not found, not revoked
    assert with_token(vic_key).delete(f"{TOKENS}{olga['id']}/").status_code == 404
    assert with_token(olga["token"]).get(ME).status_code == 200
    # one's own, even the token in use
    own = listed["results"][0]["id"]
    assert with_token(vic_key).delete(f"{TOKENS}{own}/").status_code == 204
    assert_401(with_token(vic_key).get(ME), "Invalid token.")
    entry = AuditEntry.objects.get(action="user.token.revoke")
    assert entry.changes == {"tokens": [own], "prefixes": [vic_key[:8]], "reason": "revoked by its owner"}


def test_admin_lists_and_revokes_every_users_tokens(people, api):
    vic = issue(api(people.vic))
    olga = issue(api(people.olga))
    admin = api(people.ada)
    assert {t["user"] for t in admin.get(TOKENS).json()["results"]} == {"vic", "olga"}
    assert [t["id"] for t in admin.get(TOKENS, {"user__username": "olga"}).json()["results"]] == [olga["id"]]
    assert admin.delete(f"{TOKENS}{vic['id']}/").status_code == 204
    assert with_token(vic["token"]).get(ME).status_code == 401
    assert AuditEntry.objects.get(action="user.token.revoke").changes["reason"] == "revoked by an admin"


def test_only_a_superuser_revokes_a_superusers_token(people, api):
    root = issue(api(people.root))
    assert api(people.ada).delete(f"{TOKENS}{root['id']}/").status_code == 403
    assert with_token(root["token"]).get(ME).status_code == 200
    assert AuditEntry.objects.filter(action="user.token.revoke_refused", username="ada").count() == 1
    assert api(people.root).delete(f"{TOKENS}{root['id']}/").status_code == 204


def test_password_change_revokes_every_token(people, api):
    keys = [issue(api(people.vic))["token"] for _ in range(2)]
    other = issue(api(people.olga))["token"]
    resp = api(people.ada).patch(
        f"/api/accounts/users/{people.vic.pk}/", {"password": "n3w-Pass-phrase"}, format="json"
    )
    assert resp.status_code == 200, resp.content
    for key in keys:
        assert_401(with_token(key).get(ME), "Invalid token.")
    assert with_token(other).get(ME).status_code == 200
    entry = AuditEntry.objects.get(action="user.token.revoke")
    assert entry.changes["reason"] == "password changed" and len(entry.changes["tokens"]) == 2


def test_password_set_by_command_revokes_tokens_but_a_sign_in_does_not(people, api, client):
    key = issue(api(people.vic))["token"]
    assert (
        client.post("/accounts/login/", {"username": "vic", "password": PASSWORDS["vic"]}).status_code == 302
    )
    assert with_token(key).get(ME).status_code == 200  # last_login was saved: no revocation
    call_command("set_role", "vic", "viewer", "--password", "n3w-Pass-phrase")
    assert with_token(key).get(ME).status_code == 401


def test_sign_in_with_credentials_issues_a_token(people, api):
    body = issue(api(), username="olga", password=PASSWORDS["olga"], name="ci")
    assert body["role"] == "operator"
    assert with_token(body["token"]).get(ME).json()["username"] == "olga"
    entry = AuditEntry.objects.get(action="user.token.create")
    assert (entry.username, entry.changes["via"]) == ("olga", "api credentials")


@pytest.mark.parametrize(
    "body, status",
    [
        ({"username": "olga", "password": "wrong"}, 401),
        ({"username": "nobody", "password": "wrong"}, 401),
        ({"username": "olga"}, 400),
        ({"username": ["olga"], "password": "x"}, 400),
        ({"username": "ol\x00ga", "password": "x"}, 400),
        ({}, 401),
    ],
)
def test_token_endpoint_refusals(people, api, body, status):
    resp = api().post(ISSUE, body, format="json")
    assert resp.status_code == status, resp.content
    assert not ApiToken.objects.exists()


def test_missing_or_wrong_credentials_are_401_with_basic_and_token_challenges(people, api):
    for body in ({}, {"username": "olga", "password": "wrong"}):
        resp = api().post(ISSUE, body, format="json")
        assert resp.status_code == 401, resp.content
        assert resp["WWW-Authenticate"] == 'Basic realm="api", Token realm="api"'
    assert api().post(ISSUE, {}, format="json").json()["detail"] == (
        "Authentication credentials were not provided."
    )
    assert not ApiToken.objects.exists()


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def test_basic_credentials_issue_a_token(people, api):
    client = api()
    resp = client.post(
        ISSUE, {"name": "cron"}, format="json", HTTP_AUTHORIZATION=basic("olga", PASSWORDS["olga"])
    )
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert (body["role"], body["name"]) == ("operator", "cron")
    assert with_token(body["token"]).get(ME).json()["username"] == "olga"
    # no body at all, as `curl -u olga:... -X POST` sends
    resp = client.post(ISSUE, HTTP_AUTHORIZATION=basic("olga", PASSWORDS["olga"]))
    assert resp.status_code == 200, resp.content
    wrong = client.post(ISSUE, HTTP_AUTHORIZATION=basic("olga", "wrong"))
    assert wrong.status_code == 401
    assert wrong["WWW-Authenticate"].startswith('Basic realm="api"')
    assert ApiToken.objects.filter(user=people.olga).count() == 2


@pytest.mark.parametrize("header", ["Basic !!notbase64", "Basic " + base64.b64encode(b"nocolon").decode()])
def test_malformed_basic_header_is_400(people, api, header):
    resp = api().post(ISSUE, HTTP_AUTHORIZATION=header)
    assert resp.status_code == 400, resp.content
    assert "Basic" in resp.json()["detail"]
    assert not ApiToken.objects.exists()


def test_credentials_twice_are_400(people, api):
    resp = api().post(
        ISSUE,
        {"username": "olga", "password": PASSWORDS["olga"]},
        format="json",
        HTTP_AUTHORIZATION=basic("olga", PASSWORDS["olga"]),
    )
    assert resp.status_code == 400
    assert not ApiToken.objects.exists()


def test_create_token_commands(people, capsys):
    call_command("create_token", "vic", "--name", "cron")
    key = capsys.readouterr().out.split()[2]
    assert check_key(key).user == people.vic
    call_command("drf_create_token", "-r", "vic")  # Django REST framework's name and output
    out = capsys.readouterr().out
    assert out.startswith("Generated token ") and out.strip().endswith("for user vic")
    with pytest.raises(TokenInvalid):
        check_key(key)
    assert check_key(out.split()[2]).user == people.vic


@pytest.mark.backend
def test_migration_keeps_drf_tokens_working_and_drops_their_plain_keys(people):
    migration = importlib.import_module("accounts.migrations.0002_apitoken_append_only_audit")
    key = "f" * 8 + "0123456789abcdef0123456789abcdef"
    created = timezone.now() - timedelta(days=30)
    with connection.cursor() as cursor:
        cursor.execute(
            'CREATE TABLE "authtoken_token" (key varchar(40) PRIMARY KEY, user_id integer, created timestamp with time zone)'
        )
        cursor.execute('INSERT INTO "authtoken_token" VALUES (%s, %s, %s)', [key, people.olga.pk, created])
    migration.copy_drf_tokens(apps, SimpleNamespace(connection=connection))  # what it uses of a schema editor
    token = check_key(key)
    assert (token.user, token.prefix, token.created) == (people.olga, key[:8], created)
    with connection.cursor() as cursor:
        cursor.execute('SELECT COUNT(*) FROM "authtoken_token"')
        assert cursor.fetchone()[0] == 0


def test_token_of_a_deleted_user_goes_with_them(people, api):
    key = issue(api(people.vic))["token"]
    get_user_model().objects.filter(pk=people.vic.pk).delete()
    assert not ApiToken.objects.exists()
    assert_401(with_token(key).get(ME), "Invalid token.")


def test_create_token_service_audits_the_given_actor(people):
    issued = create_token(people.vic, "x" * 150, reason="command", actor=people.root)
    assert len(issued.token.name) == 100
    entry = AuditEntry.objects.get(action="user.token.create")
    assert (entry.username, entry.object_repr) == ("root", "vic")
