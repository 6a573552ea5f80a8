"""Content-Security-Policy on every page (django-csp): scripts from this origin or with the
response's nonce, styles from this origin; Weft's templates have no inline script, handler or
style attribute; the third-party UIs (API docs, browsable API) get only the style relaxations they
need. And read-only pages answer ``POST`` with 405. (Chromium runs the pages under this policy in
the browser tests, which fail on any violation: ``tests/browser_support.py``.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from accounts.roles import set_role
from fabric.services.ingest import import_topology_text
from tests.support.topologies import BASE

ROOT = Path(__file__).resolve().parents[1]
#: Mail bodies are not served: they keep their inline styles (mail clients drop stylesheets).
NOT_PAGES = {"events/email"}


def policy(resp) -> dict[str, list[str]]:
    header = resp["Content-Security-Policy"]
    return {d.split()[0]: d.split()[1:] for d in (part.strip() for part in header.split(";")) if d}


@pytest.fixture
def admin(db, django_user_model) -> Client:
    user = django_user_model.objects.create_user("ada")
    set_role(user, "admin")
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.fixture
def fabric(db):
    return import_topology_text("f", BASE, filename="base.topo").fabric


def page_templates() -> list[Path]:
    out = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        rel = path.relative_to(ROOT / "templates").as_posix()
        if not any(rel.startswith(prefix) for prefix in NOT_PAGES):
            out.append(path)
    return out


@pytest.mark.parametrize("path", page_templates(), ids=lambda p: p.relative_to(ROOT / "templates").as_posix())
def test_templates_have_no_inline_script_handler_or_style(path):
    text = path.read_text()
    for tag in re.findall(r"<script\b[^>]*>", text):
        assert "src=" in tag or 'nonce="{{ request.csp_nonce }}"' in tag, tag
    assert not re.findall(r"<[^>]*\son[a-z]+\s*=", text), "inline event handler"
    assert not re.findall(r"<[^>]*\sstyle\s*=", text), "style attribute"
    assert "javascript:" not in text


@pytest.mark.parametrize(
    "url",
    [
        "/",
        "/alarms/",
        "/events/",
        "/health/",
        "/fabric/",
        "/fabric/map/",
        "/fabric/changes/",
        "/fabric/import/",
        "/fabric/partitions/",
        "/fabric/partitions/new/",
        "/heatmap/",
        "/pools/",
        "/pools/hosts/",
        "/pools/tenants/",
        "/pools/new/",
        "/pools/tenants/new/",
    ],
)
def test_pages_carry_the_strict_policy(admin, fabric, url):
    resp = admin.get(url, follow=True)
    assert resp.status_code == 200
    csp = policy(resp)
    assert csp["script-src"][0] == "'self'" and all(s.startswith("'nonce-") for s in csp["script-src"][1:])
    assert csp["style-src"] == ["'self'"]
    assert csp["default-src"] == ["'self'"] and csp["object-src"] == ["'none'"]
    assert csp["frame-ancestors"] == ["'none'"] and csp["base-uri"] == ["'self'"]
    assert csp["connect-src"] == ["'self'"]  # the websockets of the same host and port (CSP3 'self')


def test_login_page_carries_the_policy(db):
    resp = Client().get("/accounts/login/")
    assert policy(resp)["script-src"] == ["'self'"]  # no nonce asked for: none offered


def test_redoc_gets_a_nonce_for_its_start_up_script(admin):
    resp = admin.get("/api/redoc/")
    assert resp.status_code == 200
    csp = policy(resp)
    nonce = re.search(r"'nonce-([^']+)'", " ".join(csp["script-src"])).group(1)
    inline = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", resp.content.decode())
    assert inline == [f'<script nonce="{nonce}">']
    assert "'unsafe-inline'" in csp["style-src"] and "'unsafe-inline'" not in csp["script-src"]
    assert "fonts.googleapis.com" not in resp.content.decode()


@pytest.mark.parametrize("url", ["/api/redoc/", "/api/docs/"])
def test_api_docs_reference_no_outside_host(admin, url):
    """README: nothing comes from a CDN. Neither the page nor its policy names another host (ReDoc's
    bundle still contains Redocly's logo URL: the page's start-up script keeps it from loading, which
    the browser test checks request by request)."""
    resp = admin.get(url)
    assert resp.status_code == 200
    html = resp.content.decode()
    assert re.findall(r"(?:https?:)?//[a-z0-9.-]+", html) == []
    sources = [s for values in policy(resp).values() for s in values]
    assert [s for s in sources if "." in s or "//" in s] == []


def test_swagger_ui_loads_its_start_up_script_as_a_file(admin):
    resp = admin.get("/api/docs/")
    assert resp.status_code == 200
    scripts = re.findall(r"<script\b[^>]*>", resp.content.decode())
    assert scripts and all("src=" in tag for tag in scripts)
    script_url = re.findall(r'<script src="([^"]+script[^"]*)"', resp.content.decode())[-1]
    js = admin.get(script_url.replace("&amp;", "&"))
    assert js.status_code == 200 and js["Content-Type"].startswith("application/javascript")
    assert b"SwaggerUIBundle" in js.content
    assert "'unsafe-inline'" in policy(resp)["style-src"]


def test_browsable_api_gets_inline_styles_only(admin):
    resp = admin.get("/api/fabric/fabrics/", HTTP_ACCEPT="text/html")
    assert resp.status_code == 200 and resp["Content-Type"].startswith("text/html")
    csp = policy(resp)
    assert csp["style-src"] == ["'self'", "'unsafe-inline'"] and "'unsafe-inline'" not in csp["script-src"]
    json_resp = admin.get("/api/fabric/fabrics/", HTTP_ACCEPT="application/json")
    assert policy(json_resp)["style-src"] == ["'self'"]


@pytest.mark.parametrize(
    "url",
    [
        "/",
        "/dashboard/summary.json",
        "/alarms/",
        "/events/",
        "/fabric/",
        "/fabric/{fabric}/",
        "/fabric/map/",
        "/fabric/changes/",
        "/fabric/import/",
        "/fabric/partitions/",
        "/heatmap/",
        "/heatmap/{fabric}/",
        "/favicon.ico",
    ],
)
def test_post_to_a_read_only_page_is_405(admin, fabric, url):
    url = url.format(fabric=fabric.pk)
    assert admin.get(url).status_code in (200, 301, 302)
    resp = admin.post(url, {"x": "1"})
    assert resp.status_code == 405, (url, resp.status_code)
    assert "GET" in resp["Allow"]
