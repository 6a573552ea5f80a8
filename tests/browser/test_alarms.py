"""The live alarm page and dashboard in Chromium against a real Weft server process.

Data goes in through the REST API as an admin would (topology imports): importing the fabric
without its leaf-spine cable makes the ingest write ``link.down``, the server's in-process worker
runs the rules, and the Channels message must add the row to the already open alarm page (no
reload). The operator acknowledges from the page; a viewer sees no button and gets 403 from the
API; re-importing the full fabric clears the alarm live.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest

from tests.browser_support import login

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def topology(with_uplink: bool = True) -> str:
    """ibnetdiscover text: leaf01 (LID 1) with host01/host02, spine01 (LID 2), uplink leaf01[3]-spine01[3]."""
    leaf_uplink = '[3]\t"S-0002c90200000002"[3]\t\t# "spine01" lid 2 4xHDR\n' if with_uplink else ""
    spine_uplink = '[3]\t"S-0002c90200000001"[3]\t\t# "leaf01" lid 1 4xHDR\n' if with_uplink else ""
    hosts = ""
    leaf_hosts = ""
    for i in (1, 2):
        guid = f"0002c9030000001{i}"
        port_guid = f"0002c9030000002{i}"
        leaf_hosts += f'[{i}]\t"H-{guid}"[1]({port_guid}) \t\t# "host0{i} mlx5_0" lid {10 + i} 4xHDR\n'
        hosts += (
            f"\nvendid=0x2c9\ndevid=0x101b\nsysimgguid=0x{guid}\ncaguid=0x{guid}\n"
            f'Ca\t1 "H-{guid}"\t\t# "host0{i} mlx5_0"\n'
            f'[1]({port_guid}) \t"S-0002c90200000001"[{i}]\t\t# lid {10 + i} lmc 0 "leaf01" lid 1 4xHDR\n'
        )
    return (
        "vendid=0x2c9\ndevid=0xcf08\nsysimgguid=0x0002c90200000001\n"
        "switchguid=0x0002c90200000001(0002c90200000001)\n"
        'Switch\t8 "S-0002c90200000001"\t\t# "leaf01" base port 0 lid 1 lmc 0\n'
        + leaf_hosts
        + leaf_uplink
        + "\nvendid=0x2c9\ndevid=0xcf08\nsysimgguid=0x0002c90200000002\n"
        "switchguid=0x0002c90200000002(0002c90200000002)\n"
        'Switch\t8 "S-0002c90200000002"\t\t# "spine01" base port 0 lid 2 lmc 0\n' + spine_uplink + hosts
    )


def token(server, user: str) -> str:
    out = server.manage("drf_create_token", user).stdout
    match = re.search(r"Generated token (\w+)", out)
    assert match, out
    return match.group(1)


def api(server, tok: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(
        f"{server.url}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Token {tok}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def import_topology(server, tok: str, text: str) -> None:
    # the file is the whole fabric: removing the uplink (a third of its links) is meant
    code, body = api(
        server, tok, "POST", "/api/fabric/fabrics/import/", {"fabric": "lab", "text": text, "replace": True}
    )
    assert code == 201, body


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
