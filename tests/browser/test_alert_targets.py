"""The Alert targets page in Chromium against a real Weft server process (issue 26 §2): an Admin
adds a signed webhook from the page, presses "Send test" and reads the receiver's answer; a cable
missing from a re-imported fabric raises ``link.down`` in the server, whose worker posts it to the
receiver (signature checked there), and the page's delivery log lists it. An Operator gets 403."""

from __future__ import annotations

import pytest

from tests.browser_support import import_topology, login, token, topology
from tests.support.receivers import HookReceiver
from tests.support.waits import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_admin_adds_a_webhook_target_sends_a_test_and_sees_the_alarm_delivered(weft_server, browser_page):
    server, page = weft_server, browser_page
    admin = token(server, "admin")
    import_topology(server, admin, topology(with_uplink=True))
    hook = HookReceiver(secret="page-secret")
    try:
        login(page, server, "admin")
        page.click("nav >> text=Alert targets")
        page.wait_for_selector("#target-table")
        assert "No alert targets" in page.inner_text("#target-table")
        page.fill("#target-add input[name=name]", "noc-hook")
        page.select_option("#target-add select[name=kind]", "webhook")
        page.fill("#target-add input[name=url]", hook.url)
        page.fill("#target-add input[name=secret]", "page-secret")
        page.select_option("#target-add select[name=min_severity]", "warning")
        page.click("#target-add button")
        page.wait_for_selector("#send-test")
        page.click("#send-test button")
        page.wait_for_selector("#test-result")
        result = page.inner_text("#test-result")
        assert "Test delivered" in result and "answered 200" in result
        assert hook.got[-1]["signed"] and hook.json()["event"] == "alarm.test"

        import_topology(server, admin, topology(with_uplink=False))  # the uplink is gone: link.down
        wait_for(lambda: any(g["body"] and b"alarm.raised" in g["body"] for g in hook.got), 20,
                 "the alarm posted to the receiver", interval=0.2)  # fmt: skip
        raised = next(g for g in hook.got if b"alarm.raised" in g["body"])
        assert raised["signed"]
        page.reload()
        log = page.inner_text("#delivery-table")
        assert "alarm.raised" in log and "alarm.test" in log
        assert page.locator('#delivery-table tr[data-status="delivered"]').count() == 2
        page.goto(f"{server.url}/alert-targets/")
        row = page.inner_text('#target-table tr[data-target="noc-hook"]')
        assert "Signed JSON webhook" in row and "Warning" in row and "alarm.raised: Delivered (200)" in row

        login(page, server, "operator")
        assert page.goto(f"{server.url}/alert-targets/").status == 403
        assert not page.csp_violations
    finally:
        hook.close()
