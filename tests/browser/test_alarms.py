"""The live alarm page and dashboard in Chromium against a real Weft server process.

Data goes in through the REST API as an admin would (topology imports): importing the fabric
without its leaf-spine cable makes the ingest write ``link.down``, the server's in-process worker
runs the rules, and the Channels message must add the row to the already open alarm page (no
reload). The operator acknowledges from the page; a viewer sees no button and gets 403 from the
API; re-importing the full fabric clears the alarm live.
"""

from __future__ import annotations

import json

import pytest

from tests.browser_support import api, import_topology, login, token, topology

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_alarm_page_live_acknowledge_and_roles(weft_server, browser_page, _chromium):
    server = weft_server
    admin = token(server, "admin")
    import_topology(server, admin, topology(with_uplink=True))

    page = browser_page
    login(page, server, "operator")
    page.goto(f"{server.url}/alarms/")
    page.wait_for_selector("#live-status.live")
    assert page.locator("#alarm-table tbody tr[data-alarm]").count() == 0

    # A second window: the dashboard, as a viewer.
    viewer_ctx = _chromium.new_context()
    dash = viewer_ctx.new_page()
    login(dash, server, "viewer")
    dash.goto(f"{server.url}/")
    dash.wait_for_selector("#live-status.live")
    assert dash.inner_text('#alarm-counts [data-sev="critical"]') == "0"

    import_topology(server, admin, topology(with_uplink=False))  # the uplink is gone

    row = page.locator("#alarm-table tbody tr[data-alarm]")
    row.first.wait_for(timeout=15000)
    assert row.count() == 1
    text = row.first.inner_text()
    assert "Link down" in text and "Critical" in text and "leaf01" in text and "spine01" in text
    assert page.inner_text('#severity-counts [data-sev="critical"]') == "1"
    dash.wait_for_function(
        "() => document.querySelector('#alarm-counts [data-sev=\"critical\"]').textContent.trim() === '1'",
        timeout=15000,
    )

    # Viewer: no button on the page, 403 from the API.
    dash.goto(f"{server.url}/alarms/")
    dash.wait_for_selector("#alarm-table tbody tr[data-alarm]")
    assert dash.locator("button.ack").count() == 0
    alarm_id = int(row.first.get_attribute("data-alarm"))
    code, _ = api(server, token(server, "viewer"), "POST", f"/api/fabric/alarms/{alarm_id}/acknowledge/")
    assert code == 403

    # Operator acknowledges from the page; the viewer's page sees it live.
    page.click(f'button.ack[data-id="{alarm_id}"]')
    page.wait_for_selector(f'#alarm-table tr[data-alarm="{alarm_id}"][data-state="acknowledged"]')
    assert "by operator" in page.inner_text(f'#alarm-table tr[data-alarm="{alarm_id}"] .state')
    dash.wait_for_selector(
        f'#alarm-table tr[data-alarm="{alarm_id}"][data-state="acknowledged"]', timeout=15000
    )
    code, body = api(server, admin, "GET", f"/api/fabric/alarms/{alarm_id}/")
    assert body["state"] == "acknowledged" and body["acknowledged_by"] == "operator"

    # The cable is back: the alarm clears and leaves the open list, live.
    import_topology(server, admin, topology(with_uplink=True))
    page.wait_for_selector(f'#alarm-table tr[data-alarm="{alarm_id}"]', state="detached", timeout=15000)
    code, body = api(server, admin, "GET", f"/api/fabric/alarms/{alarm_id}/")
    assert body["state"] == "cleared" and body["clear_reason"].startswith("link.up")
    out = server.manage("alarms", "--fabric", "lab").stdout.strip().splitlines()[-1]
    rows = json.loads(out)
    assert [(r["type"], r["state"]) for r in rows] == [("link.down", "cleared")]
    viewer_ctx.close()
