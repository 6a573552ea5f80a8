"""``GET /api/``: the API's root lists its sections and collections and where the OpenAPI schema
and docs are (the walkthrough found a 404 there); every link it gives answers."""

from __future__ import annotations

import pytest


def test_the_api_root_lists_every_section_and_its_links_answer(admin, anonymous):
    assert anonymous.get("/api/").status_code in (401, 403)
    resp = admin.get("/api/", HTTP_ACCEPT="application/json")
    assert resp.status_code == 200, resp.content[:300]
    body = resp.json()
    assert set(body["sections"]) == {"accounts", "devices", "fabric", "pools", "scheduler"}
    assert body["sections"]["fabric"]["fabrics"] == "http://testserver/api/fabric/fabrics/"
    assert body["sections"]["fabric"]["events"] == "http://testserver/api/fabric/events/"  # events' router
    assert body["sections"]["scheduler"]["jobs"] == "http://testserver/api/scheduler/jobs/"
    assert body["schema"] == "http://testserver/api/schema/" and body["docs"] == "http://testserver/api/docs/"
    links = [u for section in body["sections"].values() for u in section.values()] + [body["schema"]]
    assert len(links) > 30
    for url in links:
        status = admin.get(url.removeprefix("http://testserver")).status_code
        # it exists and answers: 405 for a POST-only action (an agent's report), 400 for a table
        # that needs its query (port-table's fabric)
        assert status in (200, 400, 405), (url, status)


@pytest.mark.parametrize("path", ["/api/", "/api/fabric/fabrics/"])
def test_a_viewer_reads_the_root(viewer, path):
    assert viewer.get(path).status_code == 200
