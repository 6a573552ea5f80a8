"""End-to-end latency of the live heatmap: counter change -> websocket message, N clients.

What runs (all real): a lab fabric (ibsim + OpenSM, a 2-level fat tree), a Weft server process
(``manage.py serve``: daphne + the in-process worker and beat, embedded deployment) polling the lab
every ``poll_interval_s``, and ``clients`` websocket clients (the ``websockets`` library) logged
in as a viewer and subscribed to the fabric's heatmap.

Each sample waits a random phase of the poll interval, raises PortXmitWait on one spine port with
ibsim's ``PerformanceSet`` (time ``t0``), and records for every client the arrival of the first
``heatmap.delta`` whose cell for that port shows congestion > 0. Reported (seconds):

* ``p50_s``/``p95_s``/``max_s``: counter change -> message, over clients × samples. This includes
  waiting for the next sweep (on average half a poll interval), the sweep itself, the commit, the
  producer, the channel layer and the fan-out to all clients;
* ``publish_p50_s``/``publish_p95_s``: producer publish (the payload's ``published`` stamp, same
  host clock) -> message, i.e. the Channels fan-out to ``clients`` sockets alone;
* ``lost``: client × sample pairs with no message within 5 poll intervals.

``measure(clients=100) -> dict``; ``python bench/ws_latency.py [--clients N] [--samples K]
[--poll S] [--tiny]`` prints the dict as JSON on its last line, with ``load`` (load averages at
start and end) and ``quiet`` (false when the 1-minute load at start was above 0.5). The server's
database is its own, in a temporary folder. ``--tiny``: 2 clients, 2 samples (seconds: the bench
runs).
"""

from __future__ import annotations

import argparse
import asyncio
import http.cookiejar
import json
import random
import re
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from lab import Lab, netgen  # noqa: E402
from tests.browser_support import PASSWORD, WeftServer  # noqa: E402


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def _api(server: WeftServer, token: str, method: str, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(
        f"{server.url}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"{}")


def _session_cookie(server: WeftServer, user: str) -> str:
    """Log ``user`` in through the login form; returns the ``Cookie`` header value."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(f"{server.url}/accounts/login/", timeout=30).read().decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    data = urllib.parse.urlencode(
        {"username": user, "password": PASSWORD, "csrfmiddlewaretoken": csrf}
    ).encode()
    req = urllib.request.Request(
        f"{server.url}/accounts/login/", data=data, headers={"Referer": f"{server.url}/accounts/login/"}
    )
    opener.open(req, timeout=30).read()
    cookies = {c.name: c.value for c in jar}
    if "sessionid" not in cookies:
        raise RuntimeError(f"login as {user} failed on {server.url}")
    return "; ".join(f"{k}={v}" for k, v in cookies.items())


def _setup(lab: Lab, server: WeftServer) -> tuple[dict, dict]:
    out = server.manage("drf_create_token", "admin").stdout
    token = re.search(r"Generated token (\w+)", out).group(1)
    fabric = _api(server, token, "POST", "/api/fabric/fabrics/", {"name": "bench", "tool_env": lab.tool_env})
    server.manage("discover", "--fabric", "bench")
    snap = _api(server, token, "GET", f"/api/fabric/heatmap/{fabric['id']}/")
    spine = next(r for r in snap["rows"] if r["tier_name"] == "spine")
    port = next(c[0] for c in snap["cells"] if c[1] == spine["node"] and c[2] == 1)
    return fabric, {"guid": spine["guid"], "port_num": 1, "port_id": port}


async def _run(
    server: WeftServer, lab: Lab, fabric: dict, target: dict, clients: int, samples: int, poll: float
):
    import websockets

    cookie = _session_cookie(server, "viewer")
    url = server.url.replace("http://", "ws://") + f"/ws/heatmap/{fabric['id']}/"
    headers = {"Cookie": cookie, "Origin": server.url}
    sockets = [
        await websockets.connect(url, additional_headers=headers, max_size=2**24, open_timeout=30)
        for _ in range(clients)
    ]
    port_id = target["port_id"]
    arrivals: list[list[tuple[float, float]]] = [[] for _ in range(clients)]  # (recv time, published)

    async def reader(i: int, ws) -> None:
        async for text in ws:
            now = time.time()
            msg = json.loads(text)
            if msg.get("type") != "heatmap.delta":
                continue
            for cell in msg["payload"]["cells"]:
                if cell[0] == port_id and (cell[4] or 0) > 0:
                    arrivals[i].append((now, msg["payload"].get("published", now)))

    readers = [asyncio.create_task(reader(i, ws)) for i, ws in enumerate(sockets)]
    # Let a few sweeps pass so the port has a rate (first sample) and the deltas are small.
    await asyncio.sleep(3 * poll)
    latencies: list[float] = []
    fanout: list[float] = []
    lost = 0
    value = 0
    for _ in range(samples):
        await asyncio.sleep(random.uniform(0, poll))
        for a in arrivals:
            a.clear()
        value += 500_000  # one jump of PortXmitWait: congestion > 0 for exactly one interval
        t0 = time.time()
        await asyncio.to_thread(lab.perf_set, target["guid"], target["port_num"], "PortXmitWait", value)
        deadline = t0 + 5 * poll
        while time.time() < deadline and not all(arrivals):
            await asyncio.sleep(0.01)
        for a in arrivals:
            if not a:
                lost += 1
                continue
            latencies.append(a[0][0] - t0)
            fanout.append(a[0][0] - a[0][1])
        # Wait for the following sweep (congestion back to 0) before the next sample.
        await asyncio.sleep(1.5 * poll)
    for task in readers:
        task.cancel()
    for ws in sockets:
        await ws.close()
    return latencies, fanout, lost


def measure(clients: int = 100, samples: int = 15, poll_interval_s: float = 1.0) -> dict:
    """Run the benchmark (see the module docstring) and return its numbers.

    Returns ``{"clients", "samples", "poll_interval_s", "p50_s", "p95_s", "max_s",
    "publish_p50_s", "publish_p95_s", "lost"}`` (seconds). Raises ``lab.LabError`` when the lab
    cannot start, ``AssertionError`` when the server cannot.
    """
    lab = Lab(netgen.fat_tree_2level(2, 2, 2))
    tmp = tempfile.TemporaryDirectory(prefix="weft-wsbench-")
    server = WeftServer(
        Path(tmp.name),
        {
            "WEFT_POLL_INTERVAL_S": str(poll_interval_s),
            "WEFT_DISCOVERY_INTERVAL_S": "3600",
            "WEFT_LOG_LEVEL": "WARNING",
        },
    )
    try:
        lab.start()
        server.start()
        fabric, target = _setup(lab, server)
        latencies, fanout, lost = asyncio.run(
            _run(server, lab, fabric, target, clients, samples, poll_interval_s)
        )
    finally:
        server.stop()
        lab.stop()
        tmp.cleanup()
    return {
        "clients": clients,
        "samples": samples,
        "poll_interval_s": poll_interval_s,
        "p50_s": _percentile(latencies, 0.5),
        "p95_s": _percentile(latencies, 0.95),
        "max_s": max(latencies) if latencies else None,
        "mean_s": statistics.fmean(latencies) if latencies else None,
        "publish_p50_s": _percentile(fanout, 0.5),
        "publish_p95_s": _percentile(fanout, 0.95),
        "lost": lost,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--poll", type=float, default=1.0, help="poll interval in seconds")
    parser.add_argument("--tiny", action="store_true", help="seconds: 2 clients, 2 samples")
    parser.add_argument(
        "--json", action="store_true", help="accepted for symmetry: the output is one JSON line"
    )
    args = parser.parse_args(argv)
    if args.tiny:
        args.clients, args.samples = 2, 2
    import benchkit  # bench/ is on sys.path when this runs as a script

    kit = benchkit.Bench("ws-latency")  # SIGTERM: measure's finally stops the server and the lab
    print(json.dumps(kit.finish(measure(args.clients, args.samples, args.poll))))


if __name__ == "__main__":
    main()
