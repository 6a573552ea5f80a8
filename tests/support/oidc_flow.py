"""The browser's side of an OpenID Connect authorization-code sign-in (issue 26), for tests: Weft
through Django's test client, the provider (``tests.support.oidc_provider``) over real HTTP with
``requests``, each redirect followed by hand so the code comes back to Weft's callback."""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

import requests

CALLBACK = "http://testserver/oidc/callback/"


def to_provider(weft) -> str:
    """Click "Sign in with ...": Weft's ``/oidc/authenticate/`` answer's ``Location`` (the
    provider's authorization endpoint, or Weft's sign-in page when the provider is down)."""
    response = weft.get("/oidc/authenticate/?next=/")
    assert response.status_code == 302, response.status_code
    return response["Location"]


def sign_in_at_provider(authorize_url: str, username: str, password: str, limit: int = 8) -> str:
    """Follow the provider's redirects from ``authorize_url``, signing in on its login form, until
    it sends the browser back to Weft; returns that callback URL (with ``code`` and ``state``).

    Raises:
        AssertionError: the provider answered something else (its status and body start).
    """
    browser = requests.Session()
    url = authorize_url
    for _ in range(limit):
        if url.startswith(CALLBACK):
            return url
        response = browser.get(url, allow_redirects=False, timeout=10)
        if response.status_code in (301, 302, 303):
            url = urljoin(url, response.headers["Location"])
            continue
        form = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.text)
        assert response.status_code == 200 and form, (response.status_code, response.text[:500])
        nxt = re.search(r'name="next" value="([^"]*)"', response.text)
        posted = browser.post(
            url,
            data={
                "csrfmiddlewaretoken": form.group(1),
                "username": username,
                "password": password,
                "next": nxt.group(1).replace("&amp;", "&") if nxt else "",
            },
            headers={"Referer": url},
            allow_redirects=False,
            timeout=10,
        )
        assert posted.status_code == 302, (posted.status_code, posted.text[:500])
        url = urljoin(url, posted.headers["Location"])
    raise AssertionError(f"the provider did not send the browser back within {limit} steps: {url}")


def back_to_weft(weft, callback_url: str):
    """Weft's answer to the provider's redirect (``/oidc/callback/?code=...&state=...``)."""
    parts = urlsplit(callback_url)
    return weft.get(f"{parts.path}?{parts.query}")
