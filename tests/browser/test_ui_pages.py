"""What a first walk through the pages found, checked in Chromium against one real server:
the import form's checkbox sits beside its label and its 409 lists what would go by name in
wrapping text; the heatmap of an imported fabric says why it has no data; the map's search
placeholder fits its box; port charts label time ISO-style, 24-hour, in the server's time zone;
the API docs have the Weft bar with a way back."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from lab import netgen
from tests.browser_support import login

pytestmark = pytest.mark.browser


def _upload(page, server, path, fabric: str) -> str:
    page.goto(server.url + "/fabric/import/")
    page.fill("#import-fabric", fabric)
    page.set_input_files("#import-file", str(path))
    page.click("#import-submit")
    page.wait_for_selector("#import-result[data-status]:not([hidden])", timeout=30000)
    return page.get_attribute("#import-result", "data-status")


def test_first_walk_findings(weft_server, browser_page, tmp_path):
    server, page = weft_server, browser_page
    big, other = tmp_path / "tree.txt", tmp_path / "other.txt"
    big.write_text(netgen.fat_tree_2level(4, 2, 2))
    other.write_text(netgen.fat_tree_2level(1, 1, 1))
    login(page, server, "admin")

    # Import form: the checkbox is a box beside its label's text, not a full-width line above it.
    page.goto(server.url + "/fabric/import/")
    box = page.locator("#import-replace").bounding_box()
    text = page.locator("label:has(#import-replace) span").bounding_box()
    assert box["width"] < 40 and box["x"] + box["width"] <= text["x"], (box, text)
    assert text["y"] <= box["y"] + box["height"] / 2 <= text["y"] + text["height"], (box, text)

    assert _upload(page, server, big, "tree") == "201"
    assert _upload(page, server, other, "tree") == "409"
    error = page.locator("#import-error")
    assert "would remove" in error.inner_text()
    assert error.evaluate("e => e.scrollWidth <= e.clientWidth"), "the message wraps in its box"
    assert "mono" not in error.evaluate("e => getComputedStyle(e).fontFamily")
    items = page.locator("#import-would-remove li").all_inner_texts()
    assert items and all(not re.search(r"0x[0-9a-f]{16}/\d+-0x", i) for i in items), items
    assert any(re.fullmatch(r".+ \[\d+\] <-> .+ \[\d+\]", i) for i in items), items  # links by name

    # Heatmap of a fabric imported from a file: why there is nothing, not "is the worker running?"
    fabrics = page.request.get(server.url + "/api/fabric/fabrics/").json()["results"]
    (fabric,) = [f for f in fabrics if f["name"] == "tree"]
    page.goto(f"{server.url}/heatmap/{fabric['id']}/")
    page.wait_for_selector("#hm-banner:not([hidden])")
    banner = page.inner_text("#hm-banner")
    assert "Imported snapshot" in banner and "read from a file" in banner and "worker" not in banner
    assert page.get_attribute("#heatmap", "data-state") == "snapshot" or "snapshot" in page.inner_text(
        ".hm-status"
    )

    # Map: the search placeholder fits its box (it was cut off).
    page.goto(f"{server.url}/fabric/map/?fabric={fabric['id']}")
    page.wait_for_selector("#map[data-state=ready]")
    needed, room = page.evaluate(
        """() => { const i = document.getElementById('map-search'); const s = getComputedStyle(i);
        const c = document.createElement('canvas').getContext('2d'); c.font = s.font;
        return [c.measureText(i.placeholder).width,
                i.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight) - 20]; }"""
    )
    assert needed <= room, (needed, room)

    # Port charts: ISO dates and a 24-hour clock in the server's time zone (UTC here).
    port = page.request.get(server.url + f"/api/fabric/ports/?fabric={fabric['id']}&limit=1").json()[
        "results"
    ][0]
    page.goto(f"{server.url}/fabric/ports/{port['id']}/")
    page.wait_for_function("() => window.weftPortCharts && weftPortCharts.charts.rates")
    t = int(datetime(2026, 12, 1, 22, 15, 7, tzinfo=UTC).timestamp())
    legend = page.evaluate(
        "t => { const u = weftPortCharts.charts.rates; return u.series[0].value(u, t); }", t
    )
    assert legend == "2026-12-01 22:15:07"
    ticks = page.evaluate(
        "t => { const u = weftPortCharts.charts.rates; return u.axes[0].values(u, [t, t + 600, t + 7200], 0, 110, 600); }",
        t - 7,
    )
    assert ticks == ["2026-12-01\n22:15", "22:25", "2026-12-02\n00:15"]

    # API docs: the Weft bar, and a way back.
    for url in ("/api/docs/", "/api/redoc/"):
        page.goto(server.url + url)
        back = page.locator("#apidocs-back")
        assert back.get_attribute("href") == "/" and "Weft" in page.inner_text("#weft-apidocs"), url
    page.click("#apidocs-back")
    page.wait_for_url(server.url + "/")
