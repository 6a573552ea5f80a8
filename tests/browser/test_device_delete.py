"""Deleting a device through its pages (Chromium, real server): the Admin follows "Delete" from
the device page, is asked to confirm, is refused without the box ticked, and lands on the device
list without it; the audit log has the deletion. A Viewer has no delete link and is refused."""

from __future__ import annotations

import pytest

from tests.support.map_pages import api_get, login
from tests.support.server_api import admin_token, api

pytestmark = pytest.mark.browser


def test_admin_deletes_a_device_after_confirming(weft_server, browser_page):
    server, page = weft_server, browser_page
    token = admin_token(server)
    fabric = api(server, token, "POST", "/api/fabric/fabrics/", {"name": "roce"})
    device = api(server, token, "POST", "/api/devices/devices/", {
        "fabric": fabric["id"], "name": "leaf9", "address": "192.0.2.9", "version": "2c", "community": "c-9",
        "enabled": False,
    })  # fmt: skip
    url = f"/devices/{device['id']}/"

    login(page, server, "viewer", next_url=url)
    assert page.locator("#device-delete-link").count() == 0
    resp = page.goto(f"{server.url}{url}delete/")
    assert resp.status == 403
    page.context.clear_cookies()

    login(page, server, "admin", next_url=url)
    page.click("#device-delete-link")
    page.wait_for_selector("#device-delete")
    assert "leaf9" in page.inner_text("h1")
    with page.expect_navigation():
        page.click("#device-delete button[type=submit]")  # box not ticked
    page.wait_for_selector("#device-delete-error")
    assert api_get(page, server, "/api/devices/devices/?name=leaf9")["count"] == 1
    page.check("#device-delete-confirm")
    with page.expect_navigation():
        page.click("#device-delete button[type=submit]")
    assert page.url == f"{server.url}/devices/"
    assert "Device leaf9 deleted." in page.inner_text("body")
    assert page.locator("[data-device='leaf9']").count() == 0
    assert api_get(page, server, "/api/devices/devices/?name=leaf9")["count"] == 0
    entries = api_get(page, server, "/api/accounts/audit/?action=device.delete")["results"]
    assert [(e["action"], e["object_repr"], e["changes"]["community"]) for e in entries] == [
        ("device.delete", "leaf9", "(set)")
    ]
    assert "c-9" not in str(entries)
