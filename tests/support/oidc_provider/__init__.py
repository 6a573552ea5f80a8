"""A real OpenID Connect provider for the single sign-on tests (issue 26 §1): a tiny Django project
around django-oidc-provider (PyPI, maintained), run in a subprocess on loopback by
:func:`tests.support.oidc_provider.start_provider` — no mock of the protocol: Weft's client
(mozilla-django-oidc) talks to its real discovery, authorization, token, JWKS and userinfo
endpoints.

Users (password ``pw-<name>-sso``) and their groups (the ``groups`` claim, scope ``groups``):

* ``sso-admin``: ``weft-admins``; ``sso-viewer``: ``weft-viewers``, ``research``;
* ``sso-stranger``: ``Weft-Admins`` and ``contractors`` — a claim that names no Weft group
  (claim values compare exactly).

The client is ``weft-test`` / :data:`CLIENT_SECRET`, confidential, authorization code, RS256, no
consent, redirect URI ``http://testserver/oidc/callback/`` (Django's test client's host).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CLIENT_ID = "weft-test"
CLIENT_SECRET = "weft-test-client-secret-0123456789"
REDIRECT_URI = "http://testserver/oidc/callback/"
USERS = {
    "sso-admin": ["weft-admins"],
    "sso-viewer": ["weft-viewers", "research"],
    "sso-stranger": ["Weft-Admins", "contractors"],
}


def password_of(name: str) -> str:
    return f"pw-{name}-sso"


@dataclass
class Provider:
    """A running provider: its issuer URL and process."""

    issuer: str
    process: subprocess.Popen
    log: Path

    def stop(self) -> None:
        """End the provider by its pid (its own process group)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def start_provider(
    folder: Path, port: int, timeout: float = 90.0, redirect_uri: str = REDIRECT_URI
) -> Provider:
    """Migrate a fresh SQLite database in ``folder``, load the users and the client (whose redirect
    URI is ``redirect_uri``: a Weft server's ``<url>/oidc/callback/`` for browser tests), and serve
    on ``127.0.0.1:port`` (``serve.py``); returns once the discovery document answers.

    Raises:
        RuntimeError: the provider exited or did not answer within ``timeout`` s (its log in the
            message).
    """
    import requests

    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "provider.log"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("WEFT_", "DJANGO_")) and k not in {"DATABASE_URL", "REDIS_URL"}
    }
    env.update(
        DJANGO_SETTINGS_MODULE="tests.support.oidc_provider.settings",
        OIDC_TEST_DB=str(folder / "provider.sqlite3"),
        OIDC_TEST_SITE_URL=f"http://127.0.0.1:{port}",
        OIDC_TEST_REDIRECT_URI=redirect_uri,
        PYTHONPATH=str(ROOT),
    )
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.oidc_provider.serve", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    provider = Provider(issuer=f"http://127.0.0.1:{port}/openid", process=process, log=log)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the OIDC provider exited {process.returncode}: {log.read_text()[-3000:]}")
        try:
            if requests.get(f"{provider.issuer}/.well-known/openid-configuration", timeout=2).ok:
                return provider
        except requests.RequestException:
            pass
        if time.monotonic() > deadline:
            provider.stop()
            raise RuntimeError(
                f"the OIDC provider did not answer within {timeout} s: {log.read_text()[-3000:]}"
            )
        time.sleep(0.1)
