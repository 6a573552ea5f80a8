"""Sign-in throttling (django-axes, ``accounts.login_throttle``): after ``WEFT_LOGIN_FAILURE_LIMIT``
failures of one user name from one address, that pair's sign-in is refused with a 429 and a clear
message, on the sign-in page, the admin's and the token endpoint, even with the right password,
until the cool-off has passed; other users of the address and the user elsewhere are not locked,
nor are API tokens; every failure is logged and audited (user name, address, time)."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.test import Client
from django.utils import timezone

from accounts.models import ApiToken, AuditEntry

from .conftest import PASSWORDS

LOGIN = "/accounts/login/"
TOKEN = "/api/accounts/users/token/"


def sign_in(username: str, password: str, address: str, url: str = LOGIN):
    return Client().post(url, {"username": username, "password": password}, REMOTE_ADDR=address)


def fail(times: int, *, username=None, address="192.0.2.1") -> list[int]:
    """Sign in with a wrong password ``times`` times from ``address``; returns the status codes.
    The failure that reaches the limit is already answered with the lock-out (axes locks on it)."""
    codes = []
    for i in range(times):
        resp = sign_in(username or f"guess{i}", "wrong-password", address)
        codes.append(resp.status_code)
        if resp.status_code == 200:  # the form again, with its error
            assert b"didn't match" in resp.content
    return codes


def up_to_the_limit() -> list[int]:
    return [200] * (settings.AXES_FAILURE_LIMIT - 1) + [429]


def assert_locked_page(resp) -> None:
    assert resp.status_code == 429
    assert resp["Retry-After"] == str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    assert b'id="login-locked"' in resp.content and b"Too many failed sign-ins" in resp.content
    assert "_auth_user_id" not in resp.wsgi_request.session


def test_defaults_come_from_the_weft_settings():
    assert settings.AXES_FAILURE_LIMIT == settings.WEFT_LOGIN_FAILURE_LIMIT
    assert settings.AXES_COOLOFF_TIME == timedelta(minutes=settings.WEFT_LOGIN_COOLOFF_MIN)
    assert settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]


def test_lockout_per_user_name_and_address(people):
    assert fail(settings.AXES_FAILURE_LIMIT, username="vic", address="198.51.100.7") == up_to_the_limit()
    assert_locked_page(sign_in("vic", PASSWORDS["vic"], "198.51.100.7"))
    # the address is not locked for other users, nor the user elsewhere
    assert sign_in("olga", PASSWORDS["olga"], "198.51.100.7").status_code == 302
    assert sign_in("vic", PASSWORDS["vic"], "198.51.100.8").status_code == 302


def test_failures_of_many_user_names_from_one_address_lock_none_of_the_others(people):
    """Issue 22: five failed sign-ins from one address (a NAT, the host of a UFM client) locked
    every password sign-in from it for 15 minutes."""
    assert fail(settings.AXES_FAILURE_LIMIT, address="203.0.113.9") == [200] * settings.AXES_FAILURE_LIMIT
    assert sign_in("vic", PASSWORDS["vic"], "203.0.113.9").status_code == 302


def test_below_the_limit_the_right_password_still_signs_in(people):
    fail(settings.AXES_FAILURE_LIMIT - 1, username="vic", address="192.0.2.50")
    assert sign_in("vic", PASSWORDS["vic"], "192.0.2.50").status_code == 302


def test_lockout_ends_after_the_cooloff(people):
    assert fail(settings.AXES_FAILURE_LIMIT, username="vic", address="198.51.100.7") == up_to_the_limit()
    assert sign_in("vic", PASSWORDS["vic"], "198.51.100.7").status_code == 429
    AccessAttempt.objects.update(
        attempt_time=timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(seconds=1)
    )
    assert sign_in("vic", PASSWORDS["vic"], "198.51.100.7").status_code == 302


def test_failures_are_logged_and_audited(people, caplog):
    with caplog.at_level(logging.WARNING, logger="weft.auth"):
        assert fail(settings.AXES_FAILURE_LIMIT, username="vic", address="192.0.2.77") == up_to_the_limit()
    failures = AuditEntry.objects.filter(action="user.login_failed").order_by("id")
    assert failures.count() == settings.AXES_FAILURE_LIMIT
    first = failures.first()
    assert (first.username, first.remote_addr, first.object_id) == ("vic", "192.0.2.77", str(people.vic.pk))
    assert first.changes == {"username": "vic", "path": LOGIN}
    assert timezone.now() - first.at < timedelta(minutes=1)
    assert "password" not in str(first.changes)
    lockout = AuditEntry.objects.get(action="user.lockout")
    assert (lockout.username, lockout.remote_addr) == ("vic", "192.0.2.77")
    logged = [r.getMessage() for r in caplog.records if r.name == "weft.auth"]
    assert "failed sign-in for user name 'vic' from 192.0.2.77 at /accounts/login/" in logged
    assert any(m.startswith("sign-in locked out: user name 'vic' from 192.0.2.77") for m in logged)


def test_unknown_user_names_are_audited_too(db):
    sign_in("no-such-user", "x", "192.0.2.5")
    entry = AuditEntry.objects.get(action="user.login_failed")
    assert (entry.username, entry.object_id, entry.remote_addr) == ("no-such-user", "", "192.0.2.5")


def test_token_endpoint_is_throttled_with_the_same_counters(people):
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        resp = client.post(
            TOKEN,
            {"username": "vic", "password": "wrong"},
            content_type="application/json",
            REMOTE_ADDR="192.0.2.1",
        )
        assert resp.status_code == 401, resp.content
    assert fail(1, username="vic") == [429]  # the last one on the page: the counters are shared
    resp = client.post(
        TOKEN,
        {"username": "vic", "password": PASSWORDS["vic"]},
        content_type="application/json",
        REMOTE_ADDR="192.0.2.1",
    )
    assert resp.status_code == 429, resp.content
    assert resp["Retry-After"] == str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    assert resp.json()["detail"].startswith("Too many failed sign-ins")
    assert not ApiToken.objects.exists()
    assert (
        AuditEntry.objects.filter(action="user.login_failed", changes__path=TOKEN).count()
        == settings.AXES_FAILURE_LIMIT
    )


def test_admin_sign_in_is_throttled(people):
    assert fail(settings.AXES_FAILURE_LIMIT, username="root", address="198.51.100.20") == up_to_the_limit()
    resp = sign_in("root", PASSWORDS["root"], "198.51.100.20", url="/admin/login/")
    assert resp.status_code == 429
    assert b"Too many failed sign-ins" in resp.content


@pytest.mark.parametrize("username", ["vic", "ü" * 150, "x' OR '1'='1"])
def test_locked_out_attempts_are_never_a_server_error(people, username):
    client = Client(raise_request_exception=False)
    for i in range(settings.AXES_FAILURE_LIMIT + 2):
        resp = client.post(LOGIN, {"username": username, "password": "wrong"}, REMOTE_ADDR="192.0.2.200")
        assert resp.status_code == (200 if i < settings.AXES_FAILURE_LIMIT - 1 else 429)


@pytest.mark.parametrize("name", ["u" * 400, "a\x00b"])
def test_a_user_name_no_user_can_have_is_a_plain_failure_counted_and_audited(db, name, caplog):
    """``/dologin`` and the UFM API's Basic pass the user name as sent: 400 characters (the
    lock-out's column is 255, the audit's 150) or a NUL (PostgreSQL refuses it in text) made the
    failure's records a DataError, a 500 with a traceback. Now the name is recorded cut to 150
    characters with a NUL shown as U+FFFD; each attempt still counts toward the lock-out."""
    import base64

    cred = base64.b64encode(f"{name}:pw".encode()).decode()
    with caplog.at_level(logging.INFO):
        codes = [Client().post("/dologin", {"httpd_username": name, "httpd_password": "pw"}).status_code,
                 Client().get("/ufmRest/resources/systems", HTTP_AUTHORIZATION=f"Basic {cred}").status_code]  # fmt: skip
    assert codes == [401, 401] and not [r for r in caplog.records if r.exc_info]
    attempt = AccessAttempt.objects.get()
    assert attempt.failures_since_start == 2 and attempt.username == name.replace("\x00", "\ufffd")[:150]
    audited = AuditEntry.objects.filter(action="user.login_failed")
    assert audited.count() == 2 and {e.username for e in audited} == {attempt.username}
