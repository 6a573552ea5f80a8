"""Weft's pages under their Content-Security-Policy in Chromium: each page works (its scripts run,
the live websocket connects, the handlers moved out of the markup still act) and reports no
violation (``browser_page`` fails a test on any); a locked-out sign-in shows its message."""

from __future__ import annotations

import json

import pytest

from tests.browser_support import PASSWORD, login

pytestmark = pytest.mark.browser

TOPOLOGY = (
    "vendid=0x2c9\ndevid=0xcf08\nsysimgguid=0x0002c90200000001\n"
    "switchguid=0x0002c90200000001(0002c90200000001)\n"
    'Switch\t8 "S-0002c90200000001"\t\t# "leaf01" base port 0 lid 1 lmc 0\n'
    '[1]\t"H-0002c90300000001"[1](0002c90300000001)\t\t# "host01 mlx5_0" lid 2 4xHDR\n'
    "\nvendid=0x2c9\ndevid=0x101b\nsysimgguid=0x0002c90300000001\n"
    "caguid=0x0002c90300000001\n"
    'Ca\t1 "H-0002c90300000001"\t\t# "host01 mlx5_0"\n'
    '[1](0002c90300000001)\t"S-0002c90200000001"[1]\t\t# lid 2 lmc 0 "leaf01" lid 1 4xHDR\n'
)


def import_fabric(server, tmp_path) -> None:
    path = tmp_path / "lab.topo"
    path.write_text(TOPOLOGY)
    server.manage("import_topology", str(path), "--fabric", "lab")


def test_pages_work_under_the_policy(weft_server, browser_page, tmp_path):
    server, page = weft_server, browser_page
    import_fabric(server, tmp_path)
    login(page, server, "admin")
    # the dashboard's scripts run and its websocket (connect-src 'self') opens
    page.goto(server.url + "/")
    page.wait_for_selector("#live-status.live")
    for path in (
        "/alarms/",
        "/events/",
        "/health/",
        "/fabric/",
        "/fabric/import/",
        "/fabric/changes/",
        "/pools/",
    ):
        resp = page.goto(server.url + path)
        assert resp.status == 200, path
        assert "script-src 'self'" in resp.headers["content-security-policy"].split("; ")
        page.wait_for_load_state("networkidle")
    page.goto(server.url + "/fabric/map/")
    page.wait_for_selector("#map[data-state=ready]")
    page.goto(server.url + "/heatmap/")
    page.wait_for_selector("#heatmap:not([data-state=loading])")


def test_handlers_moved_out_of_the_markup_still_act(weft_server, browser_page, tmp_path):
    """``data-autosubmit`` (was ``onchange="this.form.submit()"``) on the changes page."""
    server, page = weft_server, browser_page
    import_fabric(server, tmp_path)
    login(page, server, "viewer")
    page.goto(server.url + "/fabric/changes/")
    with page.expect_navigation():
        page.check("input[name=changed]")
    assert "changed=1" in page.url


def test_api_docs_render_under_the_policy(weft_server, browser_page):
    server, page = weft_server, browser_page
    login(page, server, "viewer")
    page.goto(server.url + "/api/docs/")
    page.wait_for_selector(".swagger-ui .info .title")
    assert "Weft API" in page.inner_text(".swagger-ui .info .title")
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(server.url + "/api/redoc/")
    page.wait_for_selector("#redoc-container h1")
    assert "Weft API" in page.inner_text("#redoc-container h1")
    page.wait_for_selector(".menu-content a[href='https://redocly.com/redoc/']")  # the logo's place
    page.wait_for_load_state("networkidle")
    outside = [u for u in requested if not u.startswith((server.url, "data:", "blob:"))]
    assert outside == []  # Redocly's logo (cdn.redoc.ly) is not fetched
    page.goto(server.url + "/api/accounts/users/me/")  # DRF's browsable API
    page.wait_for_selector(".response-info")


def test_a_violation_is_caught(weft_server, browser_page):
    """The check itself: an inline script added to a page is refused and reported."""
    page = browser_page
    page.goto(weft_server.url + "/accounts/login/")
    page.evaluate(
        "() => { const s = document.createElement('script'); s.textContent = 'window.ran = 1'; document.body.append(s); }"
    )
    assert page.evaluate("() => window.ran") is None
    page.evaluate("() => true")  # a round trip: the report has arrived
    assert any("script-src" in v for v in page.csp_violations), page.csp_violations
    page.csp_violations.clear()


def test_locked_out_sign_in_shows_its_message(weft_server_factory, browser_page):
    server = weft_server_factory(WEFT_LOGIN_FAILURE_LIMIT="2", WEFT_LOGIN_COOLOFF_MIN="1")
    page = browser_page
    login(page, server, "operator", "wrong-password")
    assert "didn't match" in page.inner_text("main")
    statuses = []
    page.on("response", lambda r: statuses.append(r.status) if r.url.endswith("/accounts/login/") else None)
    login(page, server, "operator", "wrong-password")
    assert "Too many failed sign-ins" in page.inner_text("#login-locked")
    login(page, server, "operator", PASSWORD)  # the right password, still locked
    assert "Too many failed sign-ins" in page.inner_text("#login-locked")
    assert statuses[-1] == 429
    page.goto(server.url + "/api/accounts/users/me/?format=json")
    assert json.loads(page.inner_text("body"))["detail"] == "Authentication credentials were not provided."
