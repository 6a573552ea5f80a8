"""Benchmark: how long the network map takes to draw the Selene compute fabric in Chromium,
as a ratio against drawing a small fabric (a ratio, not a timed test).

Starts a real Weft server (``manage.py serve`` on a temporary SQLite database, as the browser
tests do), imports ``$WEFT_REALDATA/ibnetdiscover/ufm_small_topo_file.ibnetdiscover.txt`` (15
nodes) and ``selene_compute.ibnetdiscover.txt.gz`` (5,007 nodes, 12,852 links), then opens each
map ``--runs`` times in a fresh page of Debian Chromium and reads the page's own timings
(``window.weftMap.timings``, ms from the script start: layout fetched, graph built, sigma.js
started, first frame drawn). It also measures interaction: frames per second while the camera
zooms and pans for ~1 s (requestAnimationFrame count).

    python bench/map_render.py [--runs 3] [--tiny] [--json]

``--tiny``: the small fabric in place of Selene, one run (seconds: the bench runs). The server's
database is its own, in a temporary folder (removed at the end, SIGTERM included: the server and
Chromium are stopped).

The last line of stdout is a JSON object: ``small_ms``, ``selene_ms`` (medians of ``total_ms``,
first frame), ``ratio`` (selene over small), ``selene_fetch_ms``, ``selene_graph_ms``,
``selene_renderer_ms``, ``selene_cold_ms`` (the first load, layout not cached server-side),
``selene_fps``/``small_fps`` (frames per second during a scripted zoom/pan), ``nodes``, ``edges``.
Headless Chromium here draws WebGL in software (SwiftShader), so fps is a lower bound. Also
``load`` (load averages at start and end) and ``quiet`` (false when the 1-minute load at start was
above 0.5).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import benchkit

from tests.browser_support import CHROMIUM, CHROMIUM_ARGS, PASSWORD, WeftServer

REALDATA = benchkit.realdata()
SMALL = REALDATA / "ibnetdiscover" / "ufm_small_topo_file.ibnetdiscover.txt"
SELENE = REALDATA / "ibnetdiscover" / "selene_compute.ibnetdiscover.txt.gz"

FPS_SCRIPT = """async () => {
  const cam = window.weftMap.renderer.getCamera();
  let frames = 0, stop = false;
  const tick = () => { frames++; if (!stop) requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
  const t0 = performance.now();
  await cam.animate({ratio: 0.2, x: 0.3, y: 0.6}, {duration: 500});
  await cam.animate({ratio: 1, x: 0.5, y: 0.5}, {duration: 500});
  stop = true;
  return frames / ((performance.now() - t0) / 1000);
}"""


def login(page, server) -> None:
    page.goto(f"{server.url}/accounts/login/?next=/fabric/")
    page.fill("input[name=username]", "viewer")
    page.fill("input[name=password]", PASSWORD)
    page.click("#login-form button[type=submit]")
    page.wait_for_url(f"{server.url}/fabric/")


#: navigation start to the map's first frame (the performance mark map.js sets then), ms
FIRST_FRAME_SCRIPT = """() => {
  const m = performance.getEntriesByName("weft-map-first-frame")[0];
  return m ? Math.round(m.startTime) : null;
}"""


def open_map(context, server, fabric: str, fps: bool = True) -> tuple[dict, dict]:
    """Open the map of ``fabric`` (name or id) in a new page of ``context``: ``(#map's dataset,
    timings)``, the timings map.js's own (ms from its script's start) plus ``first_frame_ms``
    (from the navigation's start: what a user waits) and, when ``fps``, ``fps`` during a
    scripted zoom and pan."""
    page = context.new_page()
    try:
        page.goto(f"{server.url}/fabric/map/?fabric={fabric}")
        page.wait_for_selector("#map[data-state=ready]", timeout=300000)
        data = page.eval_on_selector("#map", "el => ({...el.dataset})")
        timings = page.evaluate("() => window.weftMap.timings")
        timings["first_frame_ms"] = page.evaluate(FIRST_FRAME_SCRIPT)
        if fps:
            timings["fps"] = page.evaluate(FPS_SCRIPT)
        return data, timings
    finally:
        page.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tiny", action="store_true", help="seconds: the small fabric twice, 1 run")
    parser.add_argument("--json", action="store_true", help="only the JSON line")
    args = parser.parse_args()
    big = SMALL if args.tiny else SELENE
    if args.tiny:
        args.runs = 1
    from playwright.sync_api import sync_playwright

    kit = benchkit.Bench("map-render")
    data_dir = Path(tempfile.mkdtemp(prefix="weft-bench-map-"))
    kit.on_exit(lambda: shutil.rmtree(data_dir, ignore_errors=True))
    server = kit.stops(WeftServer(data_dir, {}))  # its own SQLite database in data_dir
    server.start()
    try:
        for path, name in ((SMALL, "small"), (big, "selene")):
            server.manage("import_topology", str(path), "--fabric", name)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            login(context.new_page(), server)
            results: dict[str, list[dict]] = {"small": [], "selene": []}
            data = {}
            for run in range(args.runs + 1):  # run 0 of selene is the cold (uncached layout) load
                for name in ("small", "selene"):
                    t0 = time.perf_counter()
                    data[name], timings = open_map(context, server, name)
                    timings["wall_ms"] = round((time.perf_counter() - t0) * 1000)
                    results[name].append(timings)
                    if not args.json:
                        print(f"run {run} {name}: {timings}", flush=True)
            browser.close()
    finally:
        server.stop()

    def median(name: str, key: str, warm: bool = True) -> float:
        rows = results[name][1:] if warm else results[name]
        return statistics.median(r[key] for r in rows)

    small_ms, selene_ms = median("small", "total_ms"), median("selene", "total_ms")
    out = {
        "small_ms": small_ms,
        "selene_ms": selene_ms,
        "ratio": round(selene_ms / small_ms, 2),
        "selene_cold_ms": results["selene"][0]["total_ms"],
        "selene_fetch_ms": median("selene", "fetch_ms"),
        "selene_graph_ms": median("selene", "graph_ms"),
        "selene_renderer_ms": median("selene", "renderer_ms"),
        "selene_fps": round(median("selene", "fps"), 1),
        "small_fps": round(median("small", "fps"), 1),
        "nodes": int(data["selene"]["nodes"]),
        "edges": int(data["selene"]["edges"]),
        "runs": args.runs,
        "tiny": args.tiny,
    }
    print(json.dumps(kit.finish(out)))


if __name__ == "__main__":
    main()
