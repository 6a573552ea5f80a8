import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from accounts.models import AuditEntry
from accounts.roles import Role, role_of

BASE = Path(__file__).resolve().parents[2]


def test_roles_are_ordered(users):
    assert role_of(users["viewer"]) == Role.VIEWER
    assert role_of(users["operator"]) == Role.OPERATOR
    assert role_of(users["admin"]) == Role.ADMIN
    assert Role.ADMIN > Role.OPERATOR > Role.VIEWER


def test_api_requires_auth(db):
    client = APIClient()
    resp = client.get("/api/accounts/users/me/")
    assert (resp.status_code, resp.json()) == (
        401,
        {"detail": "Authentication credentials were not provided."},
    )


def test_user_admin_only_and_audited(users):
    client = APIClient()
    client.force_authenticate(users["operator"])
    assert client.get("/api/accounts/users/").status_code == 403
    assert client.get("/api/accounts/users/me/").json()["role"] == "operator"
    client.force_authenticate(users["admin"])
    resp = client.post("/api/accounts/users/", {"username": "new", "role": "operator"}, format="json")
    assert resp.status_code == 201, resp.content
    assert resp.json()["role"] == "operator"
    entry = AuditEntry.objects.get(action="user.create")
    assert entry.username == "ada" and entry.object_repr == "new"


def test_token_auth(users):
    client = APIClient()
    client.force_authenticate(users["viewer"])
    key = client.post("/api/accounts/users/token/").json()["token"]
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert other.get("/api/accounts/users/me/").json()["username"] == "vic"


@pytest.mark.parametrize(
    "env, message",
    [
        ({"SECRET_KEY": ""}, "development SECRET_KEY"),
        ({"SECRET_KEY": "x" * 40, "WEFT_DEBUG": "1"}, "WEFT_DEBUG"),
    ],
)
def test_production_refuses_unsafe_settings(env, message):
    base = {k: v for k, v in os.environ.items() if k != "WEFT_PRODUCTION"}
    full = {
        **base,
        "DATABASE_URL": "postgres://u@127.0.0.1:5432/x",
        "REDIS_URL": "redis://127.0.0.1:6379/0",
        **env,
    }
    proc = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=BASE, env=full, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0
    assert message in proc.stderr


def test_api_passwords_go_through_the_validators(users):
    client = APIClient()
    client.force_authenticate(users["admin"])
    resp = client.post("/api/accounts/users/", {"username": "weak", "password": "123"}, format="json")
    assert resp.status_code == 400
    assert "too short" in " ".join(resp.json()["password"])
    assert not get_user_model().objects.filter(username="weak").exists()
    resp = client.patch(f"/api/accounts/users/{users['viewer'].pk}/", {"password": "password"}, format="json")
    assert resp.status_code == 400
    ok = client.post(
        "/api/accounts/users/", {"username": "strong", "password": "c0rrect-h0rse-battery"}, format="json"
    )
    assert ok.status_code == 201
    assert get_user_model().objects.get(username="strong").check_password("c0rrect-h0rse-battery")
