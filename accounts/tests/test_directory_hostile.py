"""Directory sign-in against a directory that hangs and user names that differ only in case
(issue 26 §1), through the real sign-in page: a real slapd on loopback for the directory
(``tests.support.slapd``), and a TCP listener that accepts and never answers for the hanging one;
the real OpenID Connect provider for single sign-on (``tests.support.oidc_provider``)."""

from __future__ import annotations

import logging
import socket
import threading
import time

from django.contrib.auth import get_user_model
from django.test import Client

from accounts.models import DirectoryAccount
from tests.support.directory_settings import ldap_settings
from tests.support.oidc_flow import back_to_weft, sign_in_at_provider, to_provider
from tests.support.oidc_provider import password_of

from .conftest import PASSWORDS

LOGIN = "/accounts/login/"


def sign_in(username: str, password: str):
    client = Client()
    return client, client.post(LOGIN, {"username": username, "password": password, "next": "/"})


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


class SilentDirectory:
    """A loopback TCP listener that accepts LDAP connections, counts them, reads what is sent
    and never answers: a directory server that hangs."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.uri = f"ldap://127.0.0.1:{self.listener.getsockname()[1]}"
        self.connections = 0
        self.open: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.listener.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            self.open.append(conn)  # kept open, never answered

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        for conn in self.open:
            conn.close()
        self.listener.close()


def test_a_hanging_directory_does_not_hold_the_local_admin(settings, people, caplog):
    """The directory accepts connections and never answers. The local break-glass Admin signed
    in only after the directory's timeout (the LDAP backend asked the directory first, for every
    sign-in); now a local account's name is never sent to the directory. A directory user waits
    for the timeout and gets the message, not a 500."""
    silent = SilentDirectory()
    try:
        for name, value in ldap_settings(silent.uri).items():  # WEFT_LDAP_TIMEOUT_S 3
            setattr(settings, name, value)
        with caplog.at_level(logging.INFO):
            client, response = sign_in("ada", PASSWORDS["ada"])
            assert response.status_code == 302 and signed_in(client)
            assert silent.connections == 0  # the directory was not asked
            t0 = time.monotonic()
            client, response = sign_in("bob", "pw-bob-dir")
            waited = time.monotonic() - t0
        assert response.status_code == 200 and not signed_in(client)
        assert b"The directory cannot be reached now" in response.content
        assert silent.connections == 1
    finally:
        silent.close()
    print(
        f"\nsign-in of a directory user against a directory that never answers: {waited:.1f} s (timeout 3 s)"
    )
    assert not any(r.exc_info for r in caplog.records)
    assert any("unreachable" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


def test_a_name_two_accounts_have_in_other_case_is_refused_with_a_message(ldap_signin, people, api):
    """bob signed in from the directory; a local "Bob" made later (before the users API refused
    such a name): django-auth-ldap's case-insensitive lookup found both and the sign-in page
    answered 500 (MultipleObjectsReturned). Now a message; the API refuses a name in other case."""
    _, response = sign_in("bob", "pw-bob-dir")
    assert response.status_code == 302
    User = get_user_model()
    User.objects.create_user("Bob", password="Bob-local-Pass-1")
    client, response = sign_in("bob", "pw-bob-dir")
    assert response.status_code == 200 and not signed_in(client)
    assert b"Several Weft accounts have this user name in other upper and lower case" in response.content
    client, response = sign_in("Bob", "Bob-local-Pass-1")  # the local one still signs in
    assert response.status_code == 302 and signed_in(client)

    answer = api(people.ada).post(
        "/api/accounts/users/",
        {"username": "ADA", "password": "Another-Pass-1!", "role": "viewer"},
        format="json",
    )
    assert answer.status_code == 400
    assert answer.json()["username"] == ["the user name 'ada' exists (names differ by more than case)"]
    assert not User.objects.filter(username="ADA").exists()


def test_single_sign_on_does_not_make_a_lookalike_of_a_local_account(oidc_signin, settings, people):
    """The provider's user name claim is "Admin" and a local "admin" exists: a second account
    "Admin" was created beside it, with the provider's Admin role. Now refused as the local one."""
    settings.WEFT_OIDC_USERNAME_CLAIM = "given_name"  # the provider's sso-admin → "Admin"
    people.ada.username = "admin"
    people.ada.save()
    weft = Client()
    callback = sign_in_at_provider(to_provider(weft), "sso-admin", password_of("sso-admin"))
    response = back_to_weft(weft, callback)
    assert response["Location"] == "/accounts/login/" and not signed_in(weft)
    assert b"&#x27;admin&#x27; is a local Weft account" in weft.get(LOGIN).content
    assert list(
        get_user_model().objects.filter(username__iexact="admin").values_list("username", flat=True)
    ) == ["admin"]
    assert not DirectoryAccount.objects.exists()
