"""Accounts fixtures: a superuser, an Admin who is not one, an Operator and a Viewer, each with a
known password, and API clients signed in as them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from accounts.roles import set_role

PASSWORDS = {
    "root": "r00t-Pass-phrase!",
    "ada": "ada-Pass-phrase-1",
    "olga": "olga-Pass-phrase-1",
    "vic": "vic-Pass-phrase-1",
}


@pytest.fixture
def people(db) -> SimpleNamespace:
    """``root`` (superuser), ``ada`` (Admin role, not a superuser), ``olga`` (Operator), ``vic`` (Viewer)."""
    User = get_user_model()
    root = User.objects.create_superuser("root", password=PASSWORDS["root"])
    ada = User.objects.create_user("ada", password=PASSWORDS["ada"])
    set_role(ada, "admin")
    olga = User.objects.create_user("olga", password=PASSWORDS["olga"])
    set_role(olga, "operator")
    vic = User.objects.create_user("vic", password=PASSWORDS["vic"])
    set_role(vic, "viewer")
    return SimpleNamespace(root=root, ada=ada, olga=olga, vic=vic)


@pytest.fixture
def api():
    """``api(user)``: an APIClient signed in (session) as ``user``; ``api()``: anonymous."""

    def make(user=None) -> APIClient:
        client = APIClient(raise_request_exception=False)
        if user is not None:
            client.force_login(user)
        return client

    return make


@pytest.fixture(scope="module")
def slapd_directory(tmp_path_factory):
    """A real slapd on loopback with ``tests/support/directory/weft.ldif`` (``tests.support.slapd``),
    stopped by its pid after the module. A process fixture (conftest ``PROCESS_FIXTURES``)."""
    from tests.support.slapd import start_slapd

    server = start_slapd(tmp_path_factory.mktemp("slapd"))
    yield server
    server.stop()


@pytest.fixture
def slapd_factory(tmp_path):
    """``slapd_factory()``: one more slapd with the same entries, stopped after the test."""
    from tests.support.slapd import start_slapd

    started = []

    def make():
        server = start_slapd(tmp_path / f"slapd{len(started)}")
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def ldap_signin(settings, slapd_directory, db):
    """The LDAP sign-in against :func:`slapd_directory`, configured as ``WEFT_LDAP_*`` would
    (``tests.support.directory_settings``)."""
    from tests.support.directory_settings import ldap_settings

    for name, value in ldap_settings(slapd_directory.uri).items():
        setattr(settings, name, value)
    return slapd_directory


@pytest.fixture(scope="module")
def oidc_provider(tmp_path_factory):
    """A real OpenID Connect provider (django-oidc-provider) in a subprocess on loopback
    (``tests.support.oidc_provider``), stopped by its pid after the module. A process fixture."""
    from tests.support.oidc_provider import start_provider
    from tests.support.slapd import free_port

    provider = start_provider(tmp_path_factory.mktemp("oidc"), free_port())
    yield provider
    provider.stop()


@pytest.fixture
def oidc_signin(settings, oidc_provider, db):
    """The OIDC sign-in against :func:`oidc_provider`, configured as ``WEFT_OIDC_*`` would
    (``tests.support.directory_settings``)."""
    from tests.support.directory_settings import oidc_settings
    from tests.support.oidc_provider import CLIENT_ID, CLIENT_SECRET

    for name, value in oidc_settings(oidc_provider.issuer, CLIENT_ID, CLIENT_SECRET).items():
        setattr(settings, name, value)
    return oidc_provider
