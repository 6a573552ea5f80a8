"""Browser-test helpers for the map pages (shared by the map, group, ethernet, tenant and device
browser tests): sign in landing on a page, import a topology file through ``manage.py
import_topology``, read the REST API as the page's session, open the map and wait until it is drawn."""

from __future__ import annotations

import json

from tests.browser_support import PASSWORD

SELENE = "ibnetdiscover/selene_compute.ibnetdiscover.txt.gz"


def login(page, server, user: str, next_url: str = "/fabric/") -> None:
    """Sign in through the login form, landing on ``next_url`` (not the dashboard, another app's
    page that these tests do not depend on)."""
    page.goto(f"{server.url}/accounts/login/?next={next_url}")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", PASSWORD)
    page.click("#login-form button[type=submit]")
    page.wait_for_url(f"{server.url}{next_url}")


def import_file(server, path, fabric: str) -> dict:
    """``manage.py import_topology path --fabric fabric`` on ``server``: its JSON summary (last line)."""
    proc = server.manage("import_topology", str(path), "--fabric", fabric)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def api_get(page, server, url: str) -> dict:
    """GET ``url`` as the page's session: the decoded JSON (asserts a 2xx)."""
    resp = page.request.get(server.url + url, headers={"Accept": "application/json"})
    assert resp.ok, f"{url}: HTTP {resp.status}"
    return resp.json()


def open_map(page, server, fabric: str, timeout: float = 60000) -> dict:
    """Open the map of ``fabric`` and wait until it is drawn: the ``#map`` element's data attributes."""
    page.goto(f"{server.url}/fabric/map/?fabric={fabric}")
    page.wait_for_selector("#map[data-state=ready], #map[data-state=error]", timeout=timeout)
    data = page.eval_on_selector("#map", "el => ({...el.dataset})")
    assert data["state"] == "ready", page.inner_text("#map")
    return data


def overlapping(boxes: list[dict]) -> list[tuple[str, str]]:
    """Pairs of label boxes (``weftMap.labelBoxes()``) whose text boxes intersect."""
    return [
        (a["label"], b["label"])
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if a["left"] < b["right"]
        and b["left"] < a["right"]
        and a["top"] < b["bottom"]
        and b["top"] < a["bottom"]
    ]
