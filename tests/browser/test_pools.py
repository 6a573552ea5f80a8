"""Browser test of the pool page (real server, Debian Chromium): the pool's hosts are marked on
the embedded fabric map and the history chart is drawn.

Data goes through the real paths: ``import_topology`` (``tests.support.topologies.RAILS``: host001 and
host002, each with mlx5_0 on rail0-leaf and mlx5_1 on rail1-leaf), ``seed_gpus`` (8 GPUs per host), then tenants, the pool and
its allocations through the REST API. Expected GUIDs and GPU ids come from the API.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tests.browser_support import login
from tests.support.pool_pages import DIM, HIGHLIGHT, api, token
from tests.support.topologies import RAILS

pytestmark = pytest.mark.browser

HELD_RGB = (0x4A, 0xA3, 0xFF)


def test_pool_page_marks_its_hosts_on_the_map_and_draws_its_history(weft_server, browser_page, tmp_path):
    server, page = weft_server, browser_page
    topo = tmp_path / "rails.net"
    topo.write_text(RAILS)
    server.manage("import_topology", str(topo), "--fabric", "rails")
    server.manage("seed_gpus", "--fabric", "rails", "--per-host", "8")
    tok = token(server)
    tenant = api(server, tok, "POST", "/api/pools/tenants/", {"name": "team-a"})
    pool = api(server, tok, "POST", "/api/pools/pools/",
               {"name": "train", "tenant": tenant["id"], "quota_gpus": 6, "guaranteed_gpus": 2})  # fmt: skip
    gpus = api(server, tok, "GET", "/api/pools/gpus/?host_name=host001&brief=1&limit=100")["results"]
    ids = sorted(g["id"] for g in gpus)[:3]
    warmup = api(server, tok, "POST", "/api/pools/allocations/allocate/",
                 {"pool": pool["id"], "count": 1, "gpu_ids": ids[:1], "job": "warmup"})  # fmt: skip
    api(server, tok, "POST", f"/api/pools/allocations/{warmup['id']}/release/", {})
    api(server, tok, "POST", "/api/pools/allocations/allocate/",
        {"pool": pool["id"], "count": 3, "gpu_ids": ids, "job": "train-a"})  # fmt: skip
    cas = api(server, tok, "GET", "/api/fabric/nodes/?fabric_name=rails&type=ca&limit=100")["results"]
    mine = sorted(n["node_guid"] for n in cas if n["name"].startswith("host001 "))
    others = [n["node_guid"] for n in cas if not n["name"].startswith("host001 ")]
    assert len(mine) == 2 and len(others) == 2

    login(page, server, "admin")
    page.goto(f"{server.url}/pools/{pool['id']}/")
    page.wait_for_selector("#map[data-state=ready], #map[data-state=error]", timeout=60000)
    assert page.get_attribute("#map", "data-state") == "ready", page.inner_text("#map")
    # the pool's hosts (host001's two CAs) are marked, the other host's CAs are dimmed
    assert page.get_attribute("#map", "data-highlighted") == "2"
    assert page.get_attribute("#map", "data-highlight-missing") == "0"
    assert sorted(page.evaluate("() => window.weftMap.highlighted()")) == mine
    for guid in mine:
        drawn = page.evaluate("g => window.weftMap.drawn(g)", guid)
        assert drawn["color"] == HIGHLIGHT and not drawn["hidden"], drawn
    for guid in others:
        assert page.evaluate("g => window.weftMap.drawn(g)", guid)["color"] == DIM
    # the camera frames them: every marked host is inside the embedded map's box (read once the
    # framed view is drawn; before, positions are those of the whole fabric's view)
    page.wait_for_function("() => window.weftMap.settled()")
    box = page.locator("#map").bounding_box()
    for guid in mine:
        at = page.evaluate("g => window.weftMap.viewportPosition(g)", guid)
        assert box["x"] <= at["x"] <= box["x"] + box["width"], (guid, at, box)
        assert box["y"] <= at["y"] <= box["y"] + box["height"], (guid, at, box)
    # the leaves their HCAs are cabled to (the rails) keep their colour; the spine is dimmed
    switches = api(server, tok, "GET", "/api/fabric/nodes/?fabric_name=rails&type=switch&limit=100")[
        "results"
    ]
    for sw in switches:
        colour = page.evaluate("g => window.weftMap.drawn(g)", sw["node_guid"])["color"]
        assert (colour == DIM) == (sw["name"] == "spine-1"), (sw["name"], colour)
    assert page.inner_text("#map-legend li[data-legend=highlight]").strip() == "HCAs of train on 1 host (2)"

    # the history chart: steps of 1, 0, then 3 GPUs held, drawn on its canvas
    page.wait_for_selector("#pool-history[data-state=ok]")
    hist = page.eval_on_selector("#pool-history", "el => ({...el.dataset})")
    assert (hist["lastGpus"], hist["maxGpus"]) == ("3", "3")
    series = page.evaluate("() => window.weftPoolHistory.chart.data[1]")
    assert series[0] == 0 and series[-1] == 3 and 1 in series
    assert int(hist["points"]) == len(series) >= 4
    held_pixels = page.evaluate(
        """([r, g, b]) => {
          const c = document.querySelector('#pool-history canvas');
          const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          let n = 0;
          for (let i = 0; i < px.length; i += 4) {
            if (Math.abs(px[i] - r) < 8 && Math.abs(px[i + 1] - g) < 8 && Math.abs(px[i + 2] - b) < 8 && px[i + 3] > 200) n++;
          }
          return n;
        }""",
        list(HELD_RGB),
    )
    assert held_pixels > 20, held_pixels
    assert "GPUs held" in page.inner_text("#pool-history .u-legend")
    # its times as the port and device pages' (weft/timecharts.js): ISO dates, 24-hour clock, the
    # server's time zone, the date above the first tick and where the day changes
    zone = ZoneInfo(page.get_attribute("#pool-history", "data-tz"))
    start = datetime(2026, 12, 1, 22, 15, tzinfo=zone)
    splits = [int((start + timedelta(minutes=m)).timestamp()) for m in (0, 10, 120)]
    ticks = page.evaluate(
        "s => { const u = weftPoolHistory.chart; return u.axes[0].values(u, s, 0, 110, 600); }", splits
    )
    assert ticks == ["2026-12-01\n22:15", "22:25", "2026-12-02\n00:15"]
    legend = page.evaluate(
        "t => { const u = weftPoolHistory.chart; return [u.series[0].value(u, t), u.series[1].value(u, 3)]; }",
        splits[0] + 7,
    )
    assert legend == ["2026-12-01 22:15:07", "3"]

    # the map's panel links a marked host to its page
    assert page.evaluate("g => window.weftMap.select(g)", mine[0])
    page.click("#panel-host")
    page.wait_for_selector("#host-name")
    assert page.inner_text("#host-name") == "host001"
    assert page.locator("#gpu-table tr[data-state=allocated]").count() == 3
