"""Browser tests of the network map and the import page (real server, Debian Chromium).

Data is set up through ``server.manage("import_topology", ...)`` (the real parser and ingest);
expected counts come from that command's JSON summary or from the REST API, never typed in.
The map is checked through what the page reports (``#map[data-*]``, the panel), not pixels;
clicks on the WebGL canvas go to the position sigma.js gives for the node.
"""

from __future__ import annotations

import pytest

from tests.support.map_pages import SELENE, api_get, import_file, login, open_map, overlapping

pytestmark = pytest.mark.browser

NDR = "ibnetdiscover/nvidia_topograph_ndr_dgx.ibnetdiscover.out"  # 40 switches + 582 CAs
SMALL = "ibnetdiscover/ufm_small_topo_file.ibnetdiscover.txt"


def test_map_draws_fabric_search_and_click(weft_server, browser_page, realdata):
    server, page = weft_server, browser_page
    summary = import_file(server, realdata / NDR, "dgx")
    login(page, server, "viewer")
    data = open_map(page, server, "dgx")
    assert int(data["nodes"]) == summary["switches"] + summary["cas"] + summary["routers"]
    assert int(data["links"]) == summary["links"]
    assert 0 < int(data["edges"]) <= summary["links"]
    status = page.inner_text("#map-status")
    assert f"{summary['switches']} switches" in status and f"{summary['cas']} CAs" in status
    assert page.locator("#map-legend li[data-legend]").count() >= 1

    # search a CA by its GUID written unpadded and in capitals: compared as a 64-bit number
    ca = api_get(page, server, "/api/fabric/nodes/?fabric_name=dgx&type=ca&limit=1&offset=17")["results"][0]
    detail = api_get(page, server, f"/api/fabric/nodes/{ca['id']}/")
    page.fill("#map-search", format(int(ca["node_guid"], 16), "X"))
    page.wait_for_selector(f"#map-results li[data-guid='{ca['node_guid']}']")
    page.press("#map-search", "Enter")
    page.wait_for_selector(f"#map[data-selected='{ca['node_guid']}']")
    assert page.text_content("#panel-title") == (ca["description"] or ca["node_guid"])
    page.wait_for_selector("#panel-port-table")
    assert page.locator("#panel-port-table tr.port-row").count() == len(detail["ports"])

    # clear, then click the node where sigma draws it
    page.keyboard.press("Escape")
    page.wait_for_selector("#map:not([data-selected])")
    # once the camera has flown to it (300 ms) and that frame is drawn: where a click lands
    pos = page.wait_for_function(
        "g => window.weftMap.settled() && window.weftMap.viewportPosition(g)", arg=ca["node_guid"]
    ).json_value()
    page.mouse.click(pos["x"], pos["y"])
    page.wait_for_selector(f"#map[data-selected='{ca['node_guid']}']")
    page.wait_for_selector("#panel-port-table tr.port-row")

    # port details and the remote end, from the panel
    linked = next(p for p in detail["ports"] if p["remote"])
    page.click(f"#panel-port-table tr.port-row[data-port='{linked['port_num']}'] td:first-child")
    port_box = page.inner_text("#panel-port")
    assert linked["port_guid"] in port_box and linked["remote"]["node"]["node_guid"] in port_box
    page.click(f"#panel-port-table tr.port-row[data-port='{linked['port_num']}'] a.remote-link")
    remote_guid = linked["remote"]["node"]["node_guid"]
    page.wait_for_selector(f"#map[data-selected='{remote_guid}']")
    page.wait_for_selector("#panel-port-table tr.port-row")
    remote = api_get(page, server, f"/api/fabric/nodes/{linked['remote']['node']['id']}/")
    assert page.locator("#panel-port-table tr.port-row").count() == len(remote["ports"])

    # a port GUID (not in the layout) is looked up through the API
    page.fill("#map-search", linked["port_guid"])
    page.press("#map-search", "Enter")
    page.wait_for_selector(f"#map[data-selected='{ca['node_guid']}']")

    # search by LID lists that node
    if remote["lid"] is not None:
        page.fill("#map-search", str(remote["lid"]))
        page.wait_for_selector(f"#map-results li[data-guid='{remote_guid}']")


def test_admin_imports_a_second_fabric_from_the_ui(weft_server, browser_page, realdata, tmp_path):
    server, page = weft_server, browser_page
    reference = import_file(server, realdata / SMALL, "reference")
    login(page, server, "admin")
    page.goto(server.url + "/fabric/import/")
    page.fill("#import-fabric", "second")
    page.set_input_files("#import-file", str(realdata / SMALL))
    page.click("#import-submit")
    page.wait_for_selector("#import-result[data-status]")
    assert page.get_attribute("#import-result", "data-status") == "201", page.inner_text("#import-result")
    assert page.eval_on_selector("#import-bar", "el => el.value") == 100
    for key, label in (("switches", "switches"), ("cas", "CAs"), ("links", "links")):
        assert page.inner_text(f"#import-summary tr[data-key='{label}'] td") == str(reference[key])
    page.click("#import-map-link")
    page.wait_for_selector("#map[data-state=ready]")
    assert int(page.get_attribute("#map", "data-nodes")) == reference["switches"] + reference["cas"]
    assert page.get_attribute("#map", "data-fabric") == "second"

    # a new discovery of the fabric while the map is open: the map redraws itself
    page.goto(page.url + "&poll=1")
    page.wait_for_selector("#map[data-state=ready]")
    assert page.is_hidden("#map-changed")
    unchanged = import_file(server, realdata / SMALL, "second")
    assert (unchanged["added"], unchanged["removed"], unchanged["changed"]) == (0, 0, 0)
    page.wait_for_timeout(2500)  # two polls
    assert page.is_hidden("#map-changed")
    switch = api_get(page, server, "/api/fabric/nodes/?fabric_name=second&type=switch&limit=1")["results"][0]
    renamed = tmp_path / "renamed.txt"
    lines = (realdata / SMALL).read_text().splitlines(keepends=True)
    header = next(
        k for k, line in enumerate(lines) if line.startswith("Switch") and switch["description"] in line
    )
    lines[header] = lines[header].replace(f'"{switch["description"]}"', '"renamed-by-test"')
    renamed.write_text("".join(lines))
    assert import_file(server, renamed, "second")["changed"] >= 1
    # redrawn in place, without a reload: the banner says so, the new name is drawn
    page.wait_for_selector("#map-changed", state="visible", timeout=30000)
    assert page.get_attribute("#map", "data-reloads") == "1"
    assert "renamed-by-test" in page.evaluate("() => window.weftMap.data.nodes.name")
    assert page.evaluate("() => weftMap.graph.someNode((k, a) => a.label === 'renamed-by-test')")

    # a file that is not topology: the located error, nothing stored
    bad = realdata / "perfquery" / "tacc_stats_2011_perfquery_oldnames.txt"
    page.goto(server.url + "/fabric/import/")
    page.fill("#import-fabric", "broken")
    page.set_input_files("#import-file", str(bad))
    page.click("#import-submit")
    page.wait_for_selector("#import-result[data-status]")
    assert page.get_attribute("#import-result", "data-status") == "400"
    line = page.get_attribute("#import-error", "data-line")
    assert line and int(line) >= 1
    assert bad.name in page.inner_text("#import-error")
    assert api_get(page, server, "/api/fabric/fabrics/?name=broken")["count"] == 0


def test_collapsed_group_labels_stay_inside_the_canvas(weft_server, browser_page, realdata):
    """The DGX NDR fabric (622 nodes) opens with its groups collapsed; their long names (a unit's
    leaves, ``MF0;B09-P1-IBLEAF-{01..04}-07:MQM9701/U1 (68)``) near the canvas's right edge were
    cut off, and neighbours' were drawn over each other. Once the map has settled, every label
    drawn lies inside the canvas and no two overlap, among them one that sigma's own spot (right
    of its node) would have run past the edge."""
    server, page = weft_server, browser_page
    import_file(server, realdata / NDR, "dgx")
    login(page, server, "viewer")
    data = open_map(page, server, "dgx")
    assert data["expanded"] == "0" and int(data["drawnNodes"]) == int(data["groups"]) > 5
    page.wait_for_function("() => weftMap.settled()")
    drawn = page.evaluate("() => weftMap.labelBoxes()")
    groups = set(page.evaluate("() => weftMap.groups()"))
    boxes = [b for b in drawn["boxes"] if b["key"] in groups]
    names = page.evaluate("ks => ks.map((k) => weftMap.graph.getNodeAttribute(k, 'label'))", sorted(groups))
    assert len(boxes) == len(drawn["boxes"]) >= len(groups) - 3, (drawn, names)
    assert all(b["label"] in names for b in boxes)
    width, height = drawn["width"], drawn["height"]
    canvas = page.locator("#map canvas.sigma-labels").bounding_box()
    assert (round(canvas["width"]), round(canvas["height"])) == (round(width), round(height))
    for b in boxes:
        assert 0 <= b["left"] < b["right"] <= width and 0 <= b["top"] < b["bottom"] <= height, (
            b,
            width,
            height,
        )
    assert overlapping(boxes) == []
    # the edge case was there: a group whose label, right of its node, would end past the edge
    assert any(b["x"] + b["size"] + 3 + (b["right"] - b["left"]) > width for b in boxes), (boxes, width)


def test_viewer_cannot_open_import(weft_server, browser_page):
    login(browser_page, weft_server, "viewer")
    resp = browser_page.goto(weft_server.url + "/fabric/import/")
    assert resp.status == 403


@pytest.mark.slow
def test_selene_map_renders(weft_server, browser_page, realdata):
    """The Selene compute fabric (666 switches, 4,341 CAs) draws and answers a search.

    The render time is printed, not asserted (see ``bench/map_render.py`` for the ratio).
    """
    server, page = weft_server, browser_page
    summary = import_file(server, realdata / SELENE, "selene")
    login(page, server, "viewer")
    data = open_map(page, server, "selene", timeout=180000)
    assert int(data["nodes"]) == summary["switches"] + summary["cas"] + summary["routers"]
    assert int(data["links"]) == summary["links"]
    timings = page.evaluate("() => window.weftMap.timings")
    print(f"selene map: {data['nodes']} nodes, {data['edges']} edges, timings {timings}")
    switch = api_get(page, server, "/api/fabric/nodes/?fabric_name=selene&type=switch&tier=spine&limit=1")[
        "results"
    ][0]
    page.fill("#map-search", switch["node_guid"])
    page.press("#map-search", "Enter")
    page.wait_for_selector(f"#map[data-selected='{switch['node_guid']}']")
    page.wait_for_selector("#panel-port-table tr.port-row")
