"""Tenants through their pages (Chromium, real server): the Admin follows the menu to the tenant
list, opens "New tenant", is shown the serializer's message under the field for a name already
taken (nothing written), fixes it and lands on the list with the new tenant and its members; the
API and the audit log agree. The Viewer's menu reaches the list, with no "New tenant"."""

from __future__ import annotations

import pytest

from tests.support.map_pages import api_get, login
from tests.support.server_api import admin_token, api

pytestmark = pytest.mark.browser


def test_admin_creates_a_tenant_through_the_form_and_sees_it_listed(weft_server, browser_page):
    server, page = weft_server, browser_page
    api(server, admin_token(server), "POST", "/api/pools/tenants/", {"name": "taken"})

    login(page, server, "admin", next_url="/pools/")
    with page.expect_navigation():
        page.click("#nav >> text=Tenants")
    assert page.url == f"{server.url}/pools/tenants/"
    with page.expect_navigation():
        page.click("#tenant-add")
    page.fill("#id_name", "taken")
    page.fill("#id_description", "vision team")
    page.fill("#id_members", "viewer\noperator operator")
    with page.expect_navigation():
        page.click("#tenant-form button")
    assert page.inner_text("#id_name_error") == "tenant with this name already exists."
    assert page.input_value("#id_members") == "viewer\noperator operator"  # what was typed is kept
    assert [t["name"] for t in api_get(page, server, "/api/pools/tenants/")["results"]] == ["taken"]

    page.fill("#id_name", "team-vision")
    with page.expect_navigation():
        page.click("#tenant-form button")
    assert page.url.startswith(f"{server.url}/pools/tenants/#tenant-")
    assert "Tenant team-vision saved." in page.inner_text("body")
    row = page.locator("tr[data-tenant='team-vision']")
    assert row.locator(".tenant-name").inner_text() == "team-vision"
    assert "vision team" in row.inner_text() and row.locator("td").nth(1).inner_text() == "2"
    tenant = next(
        t for t in api_get(page, server, "/api/pools/tenants/")["results"] if t["name"] == "team-vision"
    )
    assert sorted((m["username"], m["role"]) for m in tenant["members"]) == [
        ("operator", "operator"), ("viewer", "viewer")
    ]  # fmt: skip
    entries = api_get(page, server, "/api/accounts/audit/?action=tenant.create")["results"]
    assert sorted((e["object_repr"], e["username"]) for e in entries) == [
        ("taken", "admin"),
        ("team-vision", "admin"),
    ]
    page.context.clear_cookies()

    login(page, server, "viewer", next_url="/pools/")
    with page.expect_navigation():
        page.click("#nav >> text=Tenants")
    assert page.locator("#tenant-add").count() == 0
    assert page.locator("tr[data-tenant]").evaluate_all("rows => rows.map(r => r.dataset.tenant)") == [
        "team-vision"
    ]
