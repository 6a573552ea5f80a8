"""``weft/settings.py`` read from the environment: every variable parsed into its typed setting,
a bad value stopping start-up with an ``ImproperlyConfigured`` that names the variable, and the
README's configuration table listing every variable the settings read."""

from __future__ import annotations

import os
import re
import runpy
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

import weft.env
from weft.env import env_choice, env_float, env_int, env_int_map

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = ROOT / "weft" / "settings.py"


@pytest.fixture
def load(monkeypatch, tmp_path):
    """``load(**env)``: execute a fresh copy of ``weft/settings.py`` with exactly ``env`` (on top of
    an environment without any Weft, database or mail variable) and return its globals."""
    for name in list(os.environ):
        if name.startswith("WEFT_") or name in {"DATABASE_URL", "REDIS_URL", "EMAIL_URL", "SECRET_KEY"}:
            monkeypatch.delenv(name)
    monkeypatch.setenv("WEFT_DATA_DIR", str(tmp_path))

    def _load(**env: str) -> dict:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return runpy.run_path(str(SETTINGS))

    return _load


def test_defaults(load):
    s = load()
    assert {
        name: s[name]
        for name in (
            "WEFT_EVENT_RETENTION_DAYS",
            "WEFT_ALARM_RETENTION_DAYS",
            "WEFT_NOTIFICATION_RETENTION_DAYS",
            "WEFT_HEALTH_RETENTION_DAYS",
            "WEFT_HEALTH_ERROR_THRESHOLDS",
            "WEFT_MAD_TIMEOUT_S",
            "WEFT_POLL_MECHANISM",
            "WEFT_POLL_WINDOW",
            "WEFT_POLL_PROCESSES",
            "WEFT_POLL_PERSISTENT",
            "WEFT_POLL_GROUPS",
            "WEFT_POLL_PARALLELISM",
            "WEFT_XMIT_WAIT_TICK_NS",
            "WEFT_TOOL_TIMEOUT_S",
            "WEFT_SM_WATCH_INTERVAL_S",
            "WEFT_HEALTH_INTERVAL_S",
            "WEFT_MAIL_STORM_THRESHOLD",
            "WEFT_MAIL_RATE_LIMIT",
            "WEFT_MAIL_CRITICAL_RATE_LIMIT",
            "WEFT_MAIL_RATE_WINDOW_S",
            "WEFT_IMPORT_MAX_BYTES",
            "WEFT_API_MAX_LIMIT",
            "WEFT_AGENT_MAX_BODY_BYTES",
            "WEFT_AGENT_BIND_ON_FIRST_REPORT",
        )
    } == {
        "WEFT_EVENT_RETENTION_DAYS": 365.0,
        "WEFT_ALARM_RETENTION_DAYS": 365.0,
        "WEFT_NOTIFICATION_RETENTION_DAYS": 30.0,
        "WEFT_HEALTH_RETENTION_DAYS": 90.0,
        "WEFT_HEALTH_ERROR_THRESHOLDS": {},
        "WEFT_MAD_TIMEOUT_S": 1.0,
        "WEFT_POLL_MECHANISM": "mad",
        "WEFT_POLL_WINDOW": 64,
        "WEFT_POLL_PROCESSES": 1,
        "WEFT_POLL_PERSISTENT": True,
        "WEFT_POLL_GROUPS": 1,
        "WEFT_POLL_PARALLELISM": 8,
        "WEFT_XMIT_WAIT_TICK_NS": 1000.0,
        "WEFT_TOOL_TIMEOUT_S": 120.0,
        "WEFT_SM_WATCH_INTERVAL_S": 30.0,
        "WEFT_HEALTH_INTERVAL_S": 86400.0,
        "WEFT_MAIL_STORM_THRESHOLD": 5,
        "WEFT_MAIL_RATE_LIMIT": 10,
        "WEFT_MAIL_CRITICAL_RATE_LIMIT": 10,
        "WEFT_MAIL_RATE_WINDOW_S": 600.0,
        "WEFT_IMPORT_MAX_BYTES": 256 * 1024 * 1024,
        "WEFT_API_MAX_LIMIT": 10000,
        "WEFT_AGENT_MAX_BODY_BYTES": 4 * 1024 * 1024,
        "WEFT_AGENT_BIND_ON_FIRST_REPORT": True,
    }


def test_the_mad_timeout_has_one_default():
    """The sweep (the setting) and ``run_madpoll`` wait the same per MAD by default."""
    import inspect

    from django.conf import settings

    from telemetry.collectors import madpoll
    from telemetry.collectors.counters import run_madpoll

    assert madpoll.DEFAULT_TIMEOUT_S == 1.0
    assert inspect.signature(run_madpoll).parameters["mad_timeout_s"].default == madpoll.DEFAULT_TIMEOUT_S
    if "WEFT_MAD_TIMEOUT_S" not in os.environ:
        assert settings.WEFT_MAD_TIMEOUT_S == madpoll.DEFAULT_TIMEOUT_S


@pytest.mark.parametrize(
    "variable, value, expected",
    [
        ("WEFT_EVENT_RETENTION_DAYS", "30", 30.0),
        ("WEFT_ALARM_RETENTION_DAYS", "7.5", 7.5),
        ("WEFT_NOTIFICATION_RETENTION_DAYS", "0", 0.0),
        ("WEFT_HEALTH_RETENTION_DAYS", "400", 400.0),
        (
            "WEFT_HEALTH_ERROR_THRESHOLDS",
            " symbol_errors=50 , link_downed=2,,",
            {"symbol_errors": 50, "link_downed": 2},
        ),
        ("WEFT_MAD_TIMEOUT_S", "0.25", 0.25),
        ("WEFT_POLL_MECHANISM", "PerfQuery", "perfquery"),
        ("WEFT_POLL_WINDOW", "128", 128),
        ("WEFT_POLL_PROCESSES", "2", 2),
        ("WEFT_POLL_PERSISTENT", "off", False),
        ("WEFT_POLL_GROUPS", "4", 4),
        ("WEFT_POLL_PARALLELISM", "16", 16),
        ("WEFT_XMIT_WAIT_TICK_NS", "4.096", 4.096),
        ("WEFT_TOOL_TIMEOUT_S", "30", 30.0),
        ("WEFT_HISTORY_RAW_HOURS", "1", 1.0),
        ("WEFT_HISTORY_MINUTE_HOURS", "24", 24.0),
        ("WEFT_HISTORY_HOUR_HOURS", "720", 720.0),
        ("WEFT_SWEEP_RETENTION_HOURS", "12", 12.0),
        ("WEFT_SM_WATCH_INTERVAL_S", "5", 5.0),
        ("WEFT_HEALTH_INTERVAL_S", "3600", 3600.0),
        ("WEFT_ROLLUP_INTERVAL_S", "120", 120.0),
        ("WEFT_MAIL_STORM_THRESHOLD", "3", 3),
        ("WEFT_MAIL_RATE_LIMIT", "0", 0),
        ("WEFT_MAIL_CRITICAL_RATE_LIMIT", "3", 3),
        ("WEFT_MAIL_RATE_WINDOW_S", "60", 60.0),
        ("WEFT_ALERT_EMAILS", "a@example.org, b@example.org", ["a@example.org", "b@example.org"]),
        ("WEFT_METRICS_TOKENS", "t1,t2", ["t1", "t2"]),
        ("WEFT_METRICS_ALLOW", "10.0.0.0/8", ["10.0.0.0/8"]),
        ("WEFT_IMPORT_MAX_BYTES", "1024", 1024),
        ("WEFT_API_MAX_LIMIT", "500", 500),
        ("WEFT_AGENT_MAX_BODY_BYTES", "1048576", 1048576),
        ("WEFT_AGENT_BIND_ON_FIRST_REPORT", "off", False),
        ("WEFT_BASE_URL", "https://weft.example.org", "https://weft.example.org"),
        ("WEFT_LOGIN_FAILURE_LIMIT", "10", 10),
        ("WEFT_LOGIN_COOLOFF_MIN", "2.5", 2.5),
        ("WEFT_TOKEN_TTL_DAYS", "30", 30.0),
    ],
)
def test_each_variable_sets_its_setting(load, variable, value, expected):
    assert load(**{variable: value})[variable] == expected


def test_sign_in_throttling_comes_from_its_settings(load):
    defaults = load()  # first: load() keeps the variables of earlier calls
    assert (defaults["AXES_FAILURE_LIMIT"], defaults["AXES_COOLOFF_TIME"]) == (5, timedelta(minutes=15))
    assert defaults["WEFT_TOKEN_TTL_DAYS"] == 0.0
    s = load(WEFT_LOGIN_FAILURE_LIMIT="7", WEFT_LOGIN_COOLOFF_MIN="3")
    assert (s["AXES_FAILURE_LIMIT"], s["AXES_COOLOFF_TIME"]) == (7, timedelta(minutes=3))


def test_beat_periods_come_from_their_settings(load):
    s = load(WEFT_SM_WATCH_INTERVAL_S="5", WEFT_HEALTH_INTERVAL_S="3600", WEFT_POLL_INTERVAL_S="2")
    beat = s["CELERY_BEAT_SCHEDULE"]
    assert beat["sm-watch"]["schedule"].total_seconds() == 5
    assert beat["health-report"]["schedule"].total_seconds() == 3600
    assert beat["poll-all-fabrics"]["schedule"].total_seconds() == 2
    s = load(WEFT_PARTITIONS_RECONCILE_INTERVAL_S="120")
    assert s["CELERY_BEAT_SCHEDULE"]["reconcile-partitions"]["schedule"].total_seconds() == 120
    assert (
        s["CELERY_BEAT_SCHEDULE"]["reconcile-partitions"]["task"] == "fabric.tasks.reconcile_partitions_task"
    )


@pytest.mark.parametrize(
    "variable, value, message",
    [
        ("WEFT_EVENT_RETENTION_DAYS", "a year", "is not a number"),
        ("WEFT_ALARM_RETENTION_DAYS", "-1", "must be at least 0"),
        ("WEFT_NOTIFICATION_RETENTION_DAYS", "nan", "is not a finite number"),
        ("WEFT_HEALTH_RETENTION_DAYS", "90d", "is not a number"),
        ("WEFT_HEALTH_ERROR_THRESHOLDS", "symbol_errors", "is not key=value"),
        ("WEFT_HEALTH_ERROR_THRESHOLDS", "symbol_errors=ten", "is not an integer"),
        ("WEFT_HEALTH_ERROR_THRESHOLDS", "symbol_error=10", "'symbol_error' is not one of"),
        ("WEFT_HEALTH_ERROR_THRESHOLDS", "link_downed=1,link_downed=2", "given twice"),
        ("WEFT_HEALTH_ERROR_THRESHOLDS", "link_downed=-1", "at least 0"),
        ("WEFT_MAD_TIMEOUT_S", "0", "must be greater than 0"),
        ("WEFT_MAD_TIMEOUT_S", "1s", "is not a number"),
        ("WEFT_POLL_MECHANISM", "snmp", "is not one of mad, perfquery"),
        ("WEFT_POLL_WINDOW", "0", "must be at least 1"),
        ("WEFT_POLL_WINDOW", "6.4", "is not an integer"),
        ("WEFT_POLL_PERSISTENT", "maybe", "is not a boolean"),
        ("WEFT_POLL_GROUPS", "0", "must be at least 1"),
        ("WEFT_XMIT_WAIT_TICK_NS", "-4", "must be greater than 0"),
        ("WEFT_TOOL_TIMEOUT_S", "inf", "is not a finite number"),
        ("WEFT_SM_WATCH_INTERVAL_S", "0", "must be greater than 0"),
        ("WEFT_PARTITIONS_RECONCILE_SAMPLE", "0", "must be at least 1"),
        ("WEFT_PARTITIONS_PENDING_ALARM_S", "-5", "must be greater than 0"),
        ("WEFT_POLL_INTERVAL_S", "ten", "is not a number"),
        ("WEFT_MAIL_STORM_THRESHOLD", "0", "must be at least 1"),
        ("WEFT_IMPORT_MAX_BYTES", "256M", "is not an integer"),
        ("WEFT_API_MAX_LIMIT", "0", "must be at least 1"),
        ("WEFT_AGENT_MAX_BODY_BYTES", "4M", "is not an integer"),
        ("WEFT_AGENT_MAX_BODY_BYTES", "100", "must be at least 1024"),
        ("WEFT_HSTS_SECONDS", "-5", "must be at least 0"),
        ("WEFT_LOGIN_FAILURE_LIMIT", "0", "must be at least 1"),
        ("WEFT_LOGIN_COOLOFF_MIN", "0", "must be greater than 0"),
        ("WEFT_TOKEN_TTL_DAYS", "-1", "must be at least 0"),
        # a facility or SD-ID syslog cannot carry made every message of the alarm engine raise
        ("WEFT_SYSLOG_FACILITY", "24", "a facility 0-23"),
        ("WEFT_SYSLOG_SD_ID", "weft id", "an SD-ID is 1-32 printable ASCII characters"),
        ("WEFT_SYSLOG_SD_ID", "weft=1", "an SD-ID is 1-32 printable ASCII characters"),
    ],
)
def test_a_bad_value_names_the_variable(load, variable, value, message):
    env = {variable: value}
    if variable == "WEFT_HSTS_SECONDS":  # read in production only
        env.update(WEFT_PRODUCTION="1", SECRET_KEY="k" * 40)
    with pytest.raises(ImproperlyConfigured) as info:
        load(**env)
    assert str(info.value).startswith(variable)
    assert message in str(info.value)


def test_readme_lists_every_variable_the_settings_read(load, monkeypatch):
    read: list[str] = []
    original = weft.env.env_str

    def recording(name: str, default: str = "") -> str:
        read.append(name)
        return original(name, default)

    monkeypatch.setattr(weft.env, "env_str", recording)
    load(WEFT_PRODUCTION="1", SECRET_KEY="k" * 40)  # production reads the cookie/HSTS variables too
    table = re.findall(r"^\| `([A-Z_]+)` \|", (ROOT / "README.md").read_text(), re.M)
    assert "WEFT_HEALTH_ERROR_THRESHOLDS" in read and "WEFT_HSTS_SECONDS" in read
    assert sorted(set(read) - set(table)) == []
    assert sorted(set(table) - set(read)) == []


# -- the readers ------------------------------------------------------------------------------------


def test_env_int_map(monkeypatch):
    monkeypatch.setenv("X_MAP", "a=1, b = 2")
    assert env_int_map("X_MAP", keys=("a", "b")) == {"a": 1, "b": 2}
    monkeypatch.setenv("X_MAP", "")
    default = {"a": 3}
    got = env_int_map("X_MAP", default)
    assert got == {"a": 3} and got is not default
    monkeypatch.setenv("X_MAP", "=5")
    with pytest.raises(ImproperlyConfigured, match=r"^X_MAP: '=5' is not key=value"):
        env_int_map("X_MAP")


def test_range_checks_apply_to_values_not_defaults(monkeypatch):
    monkeypatch.delenv("X_NUM", raising=False)
    assert env_int("X_NUM", 0, min_value=1) == 0
    assert env_float("X_NUM", -1.0, positive=True) == -1.0
    monkeypatch.setenv("X_NUM", "1")
    assert env_int("X_NUM", 0, min_value=1) == 1
    assert env_float("X_NUM", 0.0, positive=True) == 1.0
    monkeypatch.setenv("X_NUM", "  MAD ")
    assert env_choice("X_NUM", "perfquery", ("mad", "perfquery")) == "mad"


def test_production_does_not_redirect_a_local_prometheus(load, db):
    """With production settings, ``/metrics`` from 127.0.0.1 over plain HTTP is answered (a same-host
    Prometheus), while pages still redirect to https."""
    from django.test import Client, override_settings

    s = load(WEFT_PRODUCTION="1", SECRET_KEY="k" * 40)
    assert s["SECURE_SSL_REDIRECT"] is True
    names = (
        "SECURE_SSL_REDIRECT",
        "SECURE_REDIRECT_EXEMPT",
        "SECURE_PROXY_SSL_HEADER",
        "SECURE_HSTS_SECONDS",
    )
    with override_settings(**{name: s[name] for name in names}):
        metrics = Client(REMOTE_ADDR="127.0.0.1").get("/metrics")
        page = Client(REMOTE_ADDR="127.0.0.1").get("/accounts/login/")
    assert metrics.status_code == 200 and b"weft_" in metrics.content
    assert page.status_code == 301 and page["Location"] == "https://testserver/accounts/login/"


# -- the directory sign-in (issue 26) ----------------------------------------------------------------


def test_env_pairs_reads_dns_with_commas_and_equal_signs(monkeypatch):
    from weft.env import env_pairs

    monkeypatch.setenv("X_PAIRS", "admin=cn=a,ou=g,dc=x; Operator = cn=b,dc=x\nadmin=cn=c,dc=x;")
    assert env_pairs("X_PAIRS", keys=("viewer", "operator", "admin")) == (
        ("admin", "cn=a,ou=g,dc=x"),
        ("operator", "cn=b,dc=x"),
        ("admin", "cn=c,dc=x"),
    )
    for bad, message in (
        ("boss=cn=a", r"'boss' is not one of viewer, operator, admin"),
        ("admin", r"'admin' is not key=value"),
        ("admin=", r"is not key=value"),
        ("admin=cn=a; admin=cn=a", r"given twice"),
    ):
        monkeypatch.setenv("X_PAIRS", bad)
        with pytest.raises(ImproperlyConfigured, match=message):
            env_pairs("X_PAIRS", keys=("viewer", "operator", "admin"))
    monkeypatch.setenv("X_PAIRS", "research:owner=cn=r")
    with pytest.raises(ImproperlyConfigured, match="'research:owner' is not a valid key"):
        env_pairs("X_PAIRS", key_pattern=r"[^:\s][^:]{0,63}(:(viewer|operator))?")


def test_directory_sign_in_settings(load, monkeypatch):
    """Unset: local accounts only. LDAP and OIDC set: their backends between axes and the password
    backend, django-auth-ldap's and mozilla-django-oidc's settings filled; missing parts refused."""
    s = load()
    assert s["AUTHENTICATION_BACKENDS"] == [
        "axes.backends.AxesStandaloneBackend",
        "accounts.backends.UserNameCheckedBackend",
    ]
    assert "AUTH_LDAP_SERVER_URI" not in s and s["OIDC_RP_CLIENT_ID"] == ""
    s = load(
        WEFT_LDAP_URI="ldap://dc1.example.org",
        WEFT_LDAP_USER_BASE="ou=people,dc=example,dc=org",
        WEFT_LDAP_GROUP_BASE="ou=groups,dc=example,dc=org",
        WEFT_LDAP_GROUP_TYPE="activedirectory",
        WEFT_LDAP_ROLE_GROUPS="admin=cn=weft-admins,ou=groups,dc=example,dc=org",
        WEFT_LDAP_TIMEOUT_S="2.5",
        WEFT_OIDC_ISSUER="https://sso.example.org/realms/hpc",
        WEFT_OIDC_CLIENT_ID="weft",
        WEFT_OIDC_CLIENT_SECRET="s3cret",
        WEFT_OIDC_ROLE_GROUPS="viewer=hpc",
    )
    assert s["AUTHENTICATION_BACKENDS"] == [
        "axes.backends.AxesStandaloneBackend",
        "accounts.ldap_auth.WeftLDAPBackend",
        "accounts.oidc_auth.WeftOIDCBackend",
        "accounts.backends.UserNameCheckedBackend",
    ]
    assert s["AUTH_LDAP_SERVER_URI"] == "ldap://dc1.example.org"
    assert type(s["AUTH_LDAP_GROUP_TYPE"]).__name__ == "ActiveDirectoryGroupType"
    assert s["AUTH_LDAP_GROUP_SEARCH"].filterstr == "(objectClass=group)"
    assert 2.5 in s["AUTH_LDAP_CONNECTION_OPTIONS"].values()
    assert (s["OIDC_RP_CLIENT_ID"], s["OIDC_RP_SIGN_ALGO"], s["OIDC_USE_PKCE"]) == ("weft", "RS256", True)

    def fresh(**env):
        for name in [n for n in os.environ if n.startswith(("WEFT_LDAP_", "WEFT_OIDC_"))]:
            monkeypatch.delenv(name)
        return load(**env)

    ldap = {
        "WEFT_LDAP_URI": "ldap://dc1.example.org",
        "WEFT_LDAP_USER_BASE": "ou=people,dc=example,dc=org",
        "WEFT_LDAP_GROUP_BASE": "ou=groups,dc=example,dc=org",
        "WEFT_LDAP_ROLE_GROUPS": "admin=cn=weft-admins,ou=groups,dc=example,dc=org",
    }
    with pytest.raises(
        ImproperlyConfigured, match="set WEFT_LDAP_USER_BASE, WEFT_LDAP_GROUP_BASE, WEFT_LDAP_ROLE_GROUPS"
    ):
        fresh(WEFT_LDAP_URI="ldap://dc1.example.org")
    with pytest.raises(ImproperlyConfigured, match="must contain %\\(user\\)s"):
        fresh(**ldap, WEFT_LDAP_USER_FILTER="(uid=bob)")
    with pytest.raises(
        ImproperlyConfigured, match="'http://dc1' is not an ldap://, ldaps:// or ldapi:// URI"
    ):
        fresh(**{**ldap, "WEFT_LDAP_URI": "ldaps://dc2 http://dc1"})
    with pytest.raises(ImproperlyConfigured, match="WEFT_LDAP_GROUP_TYPE='ldap' is not one of"):
        fresh(WEFT_LDAP_GROUP_TYPE="ldap")
    with pytest.raises(ImproperlyConfigured, match="set WEFT_OIDC_ROLE_GROUPS"):
        fresh(
            WEFT_OIDC_ISSUER="https://sso.example.org", WEFT_OIDC_CLIENT_ID="w", WEFT_OIDC_CLIENT_SECRET="s"
        )
    with pytest.raises(ImproperlyConfigured, match="set WEFT_OIDC_CLIENT_ID and WEFT_OIDC_CLIENT_SECRET"):
        fresh(WEFT_OIDC_ISSUER="https://sso.example.org", WEFT_OIDC_ROLE_GROUPS="admin=x")
