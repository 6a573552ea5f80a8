"""Issue 14's console in Chromium against a real Weft server process: a script gets a token with
a user name and password; the dashboard's "Latest open alarms" table follows alarms live (the
ingest's link.down through the events service and rules, then its clear) without a reload; an
imported fabric reads as a snapshot with disabled controls that look disabled; the menu by role
and the styled 403 (no traceback in the server's log); and no page of the menu, nor the API
docs, asks for anything outside 127.0.0.1."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
import requests

from tests.browser_support import PASSWORD, api, import_topology, login, token, topology

pytestmark = pytest.mark.browser

TOKEN_URL = "/api/accounts/users/token/"


def test_token_by_user_name_and_password_from_a_script(weft_server):
    server = weft_server
    basic = requests.post(
        server.url + TOKEN_URL, auth=("operator", PASSWORD), json={"name": "ci"}, timeout=30
    )
    assert basic.status_code == 200, basic.text
    key = basic.json()["token"]
    assert basic.json()["role"] == "operator"
    me = requests.get(
        server.url + "/api/accounts/users/me/", headers={"Authorization": f"Token {key}"}, timeout=30
    )
    assert me.status_code == 200 and me.json()["username"] == "operator"
    as_json = requests.post(
        server.url + TOKEN_URL, json={"username": "viewer", "password": PASSWORD}, timeout=30
    )
    assert as_json.status_code == 200 and as_json.json()["role"] == "viewer"
    for refused in (
        requests.post(server.url + TOKEN_URL, timeout=30),
        requests.post(server.url + TOKEN_URL, auth=("operator", "wrong"), timeout=30),
    ):
        assert refused.status_code == 401, refused.text
        assert refused.headers["WWW-Authenticate"] == 'Basic realm="api", Token realm="api"'
    tokens = requests.get(
        server.url + "/api/accounts/tokens/", headers={"Authorization": f"Token {key}"}, timeout=30
    )
    assert [t["name"] for t in tokens.json()["results"]] == ["ci"]


def test_dashboard_latest_alarms_are_live(weft_server, browser_page):
    server, page = weft_server, browser_page
    admin = token(server, "admin")
    import_topology(server, admin, topology(with_uplink=True))
    login(page, server, "operator")
    page.goto(server.url + "/")
    page.wait_for_selector("#live-status.live")
    page.evaluate("() => { window.__sameDocument = true; }")  # gone if the page reloads
    assert page.locator("#recent-alarms tbody tr[data-alarm]").count() == 0

    import_topology(server, admin, topology(with_uplink=False))  # the ingest writes link.down
    row = page.locator("#recent-alarms tbody tr[data-alarm]")
    row.first.wait_for(timeout=15000)
    text = row.first.inner_text()
    assert "Link down" in text and "Critical" in text and "leaf01" in text and "lab" in text
    alarm_id = int(row.first.get_attribute("data-alarm"))
    code, _ = api(server, admin, "POST", f"/api/fabric/alarms/{alarm_id}/acknowledge/")
    assert code == 200
    page.wait_for_function(
        f"() => (document.querySelector('#recent-alarms tr[data-alarm=\"{alarm_id}\"]') || {{}}).textContent"
        "?.includes('Acknowledged by admin')",
        timeout=15000,
    )

    import_topology(server, admin, topology(with_uplink=True))  # the cable is back: cleared
    page.wait_for_selector(f'#recent-alarms tr[data-alarm="{alarm_id}"]', state="detached", timeout=15000)
    assert "No open alarms." in page.inner_text("#recent-alarms")
    assert page.evaluate("() => window.__sameDocument === true")
    # cleared by the system after the admin's acknowledgement: not "Cleared by admin"
    page.goto(f"{server.url}/alarms/{alarm_id}/")
    assert page.inner_text("#alarm-state") == "Cleared (acknowledged by admin)"


def test_imported_fabric_reads_as_a_snapshot(weft_server, browser_page):
    server, page = weft_server, browser_page
    import_topology(server, token(server, "admin"), topology(with_uplink=True))
    (fabric,) = api(server, token(server, "admin"), "GET", "/api/fabric/fabrics/")[1]["results"]
    login(page, server, "operator")
    page.goto(f"{server.url}/fabric/{fabric['id']}/")
    assert "Imported snapshot" in page.inner_text("#snapshot-notice")
    button = page.locator("#discover-form button")
    assert button.is_disabled()
    look = button.evaluate(
        "b => { const s = getComputedStyle(b); return [s.cursor, s.backgroundColor, s.opacity]; }"
    )
    accent = page.evaluate(
        "() => { const b = document.createElement('button'); document.body.append(b);"
        " const c = getComputedStyle(b).backgroundColor; b.remove(); return c; }"
    )
    assert look[0] == "not-allowed" and look[1] != accent and float(look[2]) < 1, (look, accent)
    assert page.locator("#snapshot-notice").evaluate("e => getComputedStyle(e).color") != page.evaluate(
        "() => getComputedStyle(document.documentElement).getPropertyValue('--crit')"
    )
    page.goto(f"{server.url}/heatmap/{fabric['id']}/")
    page.wait_for_selector("#hm-banner:not([hidden])")
    assert page.locator("#hm-banner").evaluate("e => e.classList.contains('hm-banner-neutral')")
    assert page.inner_text("#hm-status") == "imported snapshot · no live data"
    page.goto(server.url + "/")
    cell = page.locator(f'#fabric-summary tr[data-fabric="{fabric["id"]}"] td').nth(4)
    assert cell.inner_text() == "imported snapshot" and cell.locator(".sev-critical").count() == 0


ADMIN_ITEMS = {"Policies", "Import", "Users", "Audit log"}


def test_menus_by_role_and_a_styled_403(weft_server, _chromium):
    server = weft_server
    seen = {}
    for user in ("viewer", "operator", "admin"):
        context = _chromium.new_context()
        page = context.new_page()
        login(page, server, user)
        page.goto(server.url + "/")
        seen[user] = set(page.locator("#nav a").all_inner_texts())
        if user == "viewer":
            resp = page.goto(server.url + "/fabric/import/")
            assert resp.status == 403
            assert page.inner_text("#error-page h1") == "Not allowed"
            assert page.locator("#nav").is_visible()  # the site's frame, not a bare page
            assert page.locator("link[href$='weft.css']").count() == 1
        context.close()
    assert {"Dashboard", "Fabrics", "Map", "Heatmap", "Alarms", "Events", "Changes", "Health", "API"} <= seen[
        "viewer"
    ]
    assert not ADMIN_ITEMS & seen["viewer"] and not ADMIN_ITEMS & seen["operator"]
    assert ADMIN_ITEMS <= seen["admin"]
    assert "Traceback" not in server.log() and "WARNING django.request: Forbidden" not in server.log()


def test_no_page_asks_for_anything_outside_127_0_0_1(weft_server, browser_page):
    server, page = weft_server, browser_page
    import_topology(server, token(server, "admin"), topology(with_uplink=False))
    (fabric,) = api(server, token(server, "admin"), "GET", "/api/fabric/fabrics/")[1]["results"]
    outside: list[str] = []

    def route(r):
        host = urlsplit(r.request.url).hostname
        if r.request.url.startswith(("data:", "blob:")) or host in ("127.0.0.1", "localhost"):
            r.continue_()
        else:
            outside.append(f"{page.url} -> {r.request.url}")
            r.abort()

    page.context.route("**/*", route)
    login(page, server, "admin")
    menu = page.eval_on_selector_all("#nav a", "as => as.map(a => a.getAttribute('href'))")
    extra = ["/api/redoc/", f"/fabric/{fabric['id']}/", f"/fabric/{fabric['id']}/subnet-managers/",
             f"/heatmap/{fabric['id']}/", f"/fabric/map/?fabric={fabric['id']}", "/accounts/users/1/"]  # fmt: skip
    for path in [*menu, *extra]:
        page.goto(server.url + path)
        page.wait_for_load_state("networkidle")
    assert len(menu) >= 15, menu
    assert outside == [], "\n".join(outside)
