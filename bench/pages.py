"""Benchmark: page speed of the network map and the job page on the demo fabric (issue 26 §4).

Targets (issue 26, "What that walkthrough hit"), measured here; no figure is asserted:

* the map of the demo fabric (``lab.netgen.DEMO_SPEC``: 32 hosts x 8 rails, 280 nodes) drawn in
  Chromium in <= 1.5 s (``map_first_frame_ms``: navigation start to the map's first WebGL frame,
  the page's ``weft-map-first-frame`` performance mark);
* the job page: <= 300 ms server time and <= 60 KB of HTML whatever the job's age
  (``job_young_*``: a job running for 12 minutes, ``job_old_*``: one running for 48 hours; the
  HTML must not grow with age: ``job_size_growth`` = old bytes / young bytes);
* the map of Selene's compute fabric (``$WEFT_REALDATA/ibnetdiscover/selene_compute.
  ibnetdiscover.txt.gz``, 5,007 nodes) drawn in <= 5 s (``selene_first_frame_ms``).

Set-up, in a scratch database (SQLite in a temporary folder as the demo's, or a new database on
``DATABASE_URL``'s PostgreSQL server; dropped at the end, SIGTERM included): the demo topology
imported (``fabric.services.ingest.import_topology_text``), min-hop routes of it stored as a routing
snapshot (``tests.support.routes.min_hop_routes``: the job→links index then has paths), 8 GPUs a
host (``pools.lab.seed_lab_gpus``), a tenant and pool, two jobs of 32 GPUs on 4 hosts submitted,
placed and started through the queue's services at their ages, the job→links index refreshed, a
sweep's latest counters on every linked port (``telemetry.PortCounters``) and the counter history a
sweep every 5 s (the demo's interval) would store: raw chunks over the last 13 minutes, per-minute
rollups over the last 49 hours and per-hour rollups of its complete hours (the means of the
minutes, as telemetry's rollup task writes them; ``telemetry.services.history.build_chunks``),
with traffic on the jobs' links and congestion on some uplinks; alarms raised and cleared on the
old job's HCAs and links through its window (a flapping counter: the alarm list of an old job is
long).

Measured:

1. **Server time** of each job page and of its on-demand data (``/api/scheduler/jobs/{id}/
   fabric/``), in this process with Django's test client on the same database: ``--runs``
   requests after one warm-up each, median and [min, max], the HTML size and the SQL queries.
2. **Chromium** (Debian's, headless, via Playwright) against a real server (``manage.py serve``) on
   the same database: the demo map and the Selene map, ``--runs`` fresh pages each after a cold
   one (``map.js``'s own timings: layout fetched, graph built, renderer started, first frame, from
   the script's start; and the first frame from navigation start), and the job pages until their
   charts and map are drawn (``job_*_complete_ms``).

    python bench/pages.py [--runs 5] [--tiny] [--json]

Measured 2026-12-07 (SQLite, 2 cores shared with other work: load 11.0 at start, peak 14.1, so
``"quiet": false``; 5 runs, medians [min, max]): job page server time 71.7 ms [69.4, 108.8]
(12-minute job) and 112.8 ms [78.1, 133.5] (48-hour job), 11.7 KB both (growth 1.0), 16 queries;
its data on demand 0.68 s / 124 KB and 12.4 s / 475 KB; demo map first frame 1,670 ms [1,335,
1,815] (map.js: fetched 291, graph 295, renderer 344, first frame 724 ms after its script
started), cold 2,220 ms; Selene 1,229 ms [1,087, 2,118], cold 1,621 ms; job page drawn 2.4 s and
11.4 s. A run at load 10: demo map 1,160 ms [632, 1,869], Selene 1,395 ms.

``--tiny``: a small rail pod (4 hosts x 2 rails) and the 15-node real fabric in place of Selene, a
10-minute old job, one run (seconds: ``bin/bench-smoke``). The last line of stdout is a JSON
object with the figures, ``load`` (start, end, peak: ``benchkit.LoadWatch``) and ``quiet``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import benchkit
from map_render import login, open_map

from tests.browser_support import CHROMIUM, CHROMIUM_ARGS, PASSWORD, WeftServer

REALDATA = benchkit.realdata()
SELENE = REALDATA / "ibnetdiscover" / "selene_compute.ibnetdiscover.txt.gz"
TINY_SELENE = REALDATA / benchkit.TINY_TOPOLOGY
TINY_SPEC = "rail:hosts=4,su=2,rails=2,spines=2,speed=HDR"
#: the demo's sweep interval (``manage.py demo --poll-interval``), seconds
SWEEP_S = 5
#: ages of the two jobs, seconds (full run, --tiny)
AGES = {"young": (12 * 60, 2 * 60), "old": (48 * 3600, 10 * 60)}


def _entry(k: int, pid: int, busy: bool, uplink: bool) -> tuple:
    """A port's sample ``k`` (bytes/s out, in, PortXmitWait ticks/s, errors, flags): the jobs'
    links carry GB/s with a slow wave, some uplinks wait (congestion), the rest idle."""
    if not busy:
        return (1.0e3, 1.0e3, 0.0, 0, 0)
    wave = 1.0 + 0.5 * math.sin(k / 17.0 + pid)
    wait = 2.0e5 * (pid % 5) if uplink else 0.0
    return (4.0e9 * wave, 3.0e9 * wave, wait, 1 if (k + pid) % 97 == 0 else 0, 0)


def build_demo(args) -> dict:
    """The data set (module docstring), written in this process; returns the ids the runs need."""
    from django.contrib.auth import get_user_model
    from django.db.models import Q
    from django.utils import timezone

    from accounts.roles import set_role
    from events.models import Alarm
    from fabric.keys import link_key
    from fabric.models import Link, Port
    from fabric.services.ingest import import_topology_text
    from lab import netgen
    from pools.lab import seed_lab_gpus
    from pools.models import Pool, Tenant, TenantMembership
    from scheduler.models import Job
    from scheduler.services import joblinks
    from scheduler.services.queue import JobSpec, run_pass, start, submit
    from telemetry.models import CounterChunk, PortCounters, Resolution
    from telemetry.services.history import build_chunks
    from tests.support.routes import min_hop_routes

    t_setup = time.monotonic()
    for name, role in (("admin", "admin"), ("viewer", "viewer")):
        user, _ = get_user_model().objects.get_or_create(username=name)
        user.set_password(PASSWORD)
        user.save()
        set_role(user, role)
    spec = TINY_SPEC if args.tiny else netgen.DEMO_SPEC
    fabric = import_topology_text("demo", netgen.parse_spec(spec), filename="demo.topo").fabric
    min_hop_routes(fabric)
    seed_lab_gpus(fabric, 8)
    tenant = Tenant.objects.create(name="research")
    pool = Pool.objects.create(name="research-h100", tenant=tenant, fabric=fabric)
    TenantMembership.objects.create(
        tenant=tenant, user=get_user_model().objects.get(username="viewer"), role="viewer"
    )
    now = timezone.now().replace(microsecond=0)
    hosts = 2 if args.tiny else 4  # two at least: a rail's pairs have paths
    jobs = {}
    for which in ("old", "young"):  # the old one first: its hosts, then the young one's
        age = AGES[which][1 if args.tiny else 0]
        t0 = now - timedelta(seconds=age)
        job = submit(
            JobSpec(name=f"train-{which}", pool_id=pool.pk, count=8 * hosts, gpus_per_host=8,
                    time_limit_s=7 * 86400),
            now=t0 - timedelta(seconds=20),
        )  # fmt: skip
        run_pass(now=t0 - timedelta(seconds=10))
        start(job.pk, now=t0)
        jobs[which] = Job.objects.get(pk=job.pk)
        assert jobs[which].state == "running", (which, jobs[which].state, jobs[which].reason)
    joblinks.refresh([j.pk for j in jobs.values()])

    # the jobs' ports: their hosts' HCA ports and the leaf ports they are cabled to (busy), and
    # the leaves' uplinks (busy, some congested)
    links = list(Link.objects.filter(fabric=fabric).select_related("port_a__node", "port_b__node"))
    job_hosts = {h for j in jobs.values() for h in j.placement}
    busy: set[int] = set()
    uplink_ports: set[int] = set()
    for link in links:
        a, b = link.port_a, link.port_b
        if a.node.node_type == "switch" and b.node.node_type == "switch":
            uplink_ports.update((a.pk, b.pk))
        elif any(p.node.node_type == "ca" and p.node.host and p.node.host.name in job_hosts for p in (a, b)):
            busy.update((a.pk, b.pk))
    busy |= uplink_ports
    linked = sorted({p for link in links for p in (link.port_a_id, link.port_b_id)})

    def rows(t: int, k: int, resolution: int) -> list:
        entries = [(pid, _entry(k, pid, pid in busy, pid in uplink_ports)) for pid in linked]
        return build_chunks(fabric.pk, t, entries, resolution)

    end = int(now.timestamp())
    old_age = AGES["old"][1 if args.tiny else 0]
    young_age = AGES["young"][1 if args.tiny else 0]
    chunks = []
    for k, t in enumerate(range(end - young_age - 60, end, SWEEP_S)):
        chunks += rows(t, k, Resolution.RAW)
    hours: dict[int, list[int]] = {}  # hour start -> the minute samples (k) in it
    for k, t in enumerate(range(end - old_age - 3600, end, 60)):
        chunks += rows(t - t % 60, k, Resolution.MINUTE)
        hours.setdefault(t - t % 3600, []).append(k)
        if len(chunks) > 5000:
            CounterChunk.objects.bulk_create(chunks, batch_size=1000)
            chunks = []
    # per-hour rollups of the complete hours, as telemetry's rollup task writes them from the
    # per-minute rows (telemetry.services.history: rates averaged, errors summed, flags or-ed)
    for hour, ks in hours.items():
        if hour + 3600 > end:
            continue
        entries = []
        for pid in linked:
            samples = [_entry(k, pid, pid in busy, pid in uplink_ports) for k in ks]
            entries.append((pid, (
                sum(e[0] for e in samples) / len(ks), sum(e[1] for e in samples) / len(ks),
                sum(e[2] for e in samples) / len(ks), sum(e[3] for e in samples), 0,
            )))  # fmt: skip
        chunks += build_chunks(fabric.pk, hour, entries, Resolution.HOUR)
    CounterChunk.objects.bulk_create(chunks, batch_size=1000)
    PortCounters.objects.bulk_create(
        [
            PortCounters(
                port_id=pid,
                xmit_bytes_per_s=_entry(0, pid, pid in busy, pid in uplink_ports)[0],
                rcv_bytes_per_s=_entry(0, pid, pid in busy, pid in uplink_ports)[1],
                utilisation=0.4 if pid in busy else 0.0,
                congestion=(pid % 5) / 20 if pid in uplink_ports else 0.0,
            )
            for pid in linked
        ],
        batch_size=2000,
    )

    # a flapping error counter on one of the old job's leaf ports: raised and cleared every
    # 10 minutes of its life (the alarm list of an old job is long), one still open
    old = jobs["old"]
    port = (
        Port.objects.filter(node__host__name__in=list(old.placement), node__node_type="ca")
        .order_by("pk")
        .first()
    )
    link = (
        Link.objects.filter(Q(port_a=port) | Q(port_b=port))
        .select_related("port_a__node", "port_b__node")
        .first()
    )
    leaf = link.port_b if link.port_a_id == port.pk else link.port_a
    key = link_key(
        (link.port_a.node.node_guid, link.port_a.port_num), (link.port_b.node.node_guid, link.port_b.port_num)
    )
    flaps = []
    times = list(range(end - old_age + 60, end, 600))
    for k, t in enumerate(times):
        first = datetime.fromtimestamp(t, tz=UTC)
        last = k == len(times) - 1  # one open alarm per object at most (the engine's constraint)
        flaps.append(
            Alarm(
                fabric=fabric, code="port.symbol_errors", severity="minor", state="active" if last else "cleared",
                object_type="port", object_key=f"{leaf.node.node_guid}/{leaf.port_num}",
                object_repr=str(leaf), node=leaf.node, port=leaf, message="symbol errors rising (3 in 10 s)",
                first_seen=first, last_seen=first + timedelta(seconds=60),
                cleared_at=None if last else first + timedelta(seconds=300),
            )
        )  # fmt: skip
        if k % 2:
            flaps.append(
                Alarm(
                    fabric=fabric, code="link.down", severity="critical", state="cleared", object_type="link",
                    object_key=key, object_repr=key, message="link down", first_seen=first,
                    last_seen=first, cleared_at=first + timedelta(seconds=30),
                )
            )  # fmt: skip
    Alarm.objects.bulk_create(flaps, batch_size=500)
    return {
        "fabric": fabric.pk,
        "jobs": {k: j.pk for k, j in jobs.items()},
        "nodes": fabric.nodes.count(),
        "ports_linked": len(linked),
        "chunks": CounterChunk.objects.count(),
        "alarms": len(flaps),
        "path_links": {k: len(joblinks.links_of(j.pk)) for k, j in jobs.items()},
        "setup_s": round(time.monotonic() - t_setup, 1),
    }


def import_selene(args) -> int:
    from fabric.services.ingest import import_topology_text

    path = TINY_SELENE if args.tiny else SELENE
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()
    return import_topology_text("selene", text, filename=path.name).fabric.pk


def server_times(ids: dict, runs: int) -> dict:
    """Part 1 (module docstring): the job pages and their data, in this process."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, setup_test_environment

    setup_test_environment()
    client = Client()
    client.force_login(get_user_model().objects.get(username="viewer"))
    out: dict = {}
    for which, pk in ids["jobs"].items():
        for part, url in (
            ("page", f"/scheduler/jobs/{pk}/"),
            ("data", f"/api/scheduler/jobs/{pk}/fabric/?series=totals"),
        ):
            times = []
            for run in range(runs + 1):
                with CaptureQueriesContext(connection) as queries:
                    t0 = time.perf_counter()
                    resp = client.get(url)
                    body = resp.content
                    took = time.perf_counter() - t0
                assert resp.status_code == 200, (url, resp.status_code, body[:300])
                if run:  # run 0 warms the caches (the locality tree, the map layout)
                    times.append(took * 1000)
            med, spread = benchkit.median_spread(times, 1)
            prefix = f"job_{which}" if part == "page" else f"job_{which}_data"
            out[f"{prefix}_server_ms"] = med
            out[f"{prefix}_server_spread_ms"] = spread
            out[f"{prefix}_kb"] = round(len(body) / 1024, 1)
            out[f"{prefix}_queries"] = len(queries)
    out["job_size_growth"] = round(out["job_old_kb"] / out["job_young_kb"], 3)
    return out


def browser_times(server: WeftServer, ids: dict, runs: int) -> dict:
    """Part 2 (module docstring): Chromium against the real server."""
    from playwright.sync_api import sync_playwright

    out: dict = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            login(context.new_page(), server)
            for name, fabric in (("map", "demo"), ("selene", "selene")):
                rows = []
                for run in range(runs + 1):  # run 0: the layout not cached server-side yet
                    data, timings = open_map(context, server, fabric, fps=False)
                    if run == 0:
                        out[f"{name}_cold_first_frame_ms"] = timings["first_frame_ms"]
                    else:
                        rows.append(timings)
                out[f"{name}_nodes"] = int(data["nodes"])
                for key in ("first_frame_ms", "total_ms", "fetch_ms", "graph_ms", "renderer_ms"):
                    med, spread = benchkit.median_spread([r[key] for r in rows], 0)
                    out[f"{name}_{key}"] = med
                    if key == "first_frame_ms":
                        out[f"{name}_{key}_spread"] = spread
            for which, pk in ids["jobs"].items():
                done = []
                for _ in range(runs):
                    page = context.new_page()
                    try:
                        t0 = time.perf_counter()
                        page.goto(f"{server.url}/scheduler/jobs/{pk}/")
                        page.wait_for_selector("#chart-hca:not([data-state=loading])", timeout=120000)
                        page.wait_for_selector(
                            "#map[data-state=ready], #map[data-state=error]", timeout=120000
                        )
                        done.append((time.perf_counter() - t0) * 1000)
                        assert page.get_attribute("#map", "data-state") == "ready"
                    finally:
                        page.close()
                med, spread = benchkit.median_spread(done, 0)
                out[f"job_{which}_complete_ms"], out[f"job_{which}_complete_spread_ms"] = med, spread
        finally:
            browser.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tiny", action="store_true", help="seconds: a small pod and fabric, 1 run")
    parser.add_argument("--json", action="store_true", help="only the JSON line")
    args = parser.parse_args()
    if args.tiny:
        args.runs = 1
    kit = benchkit.Bench("pages")
    out: dict = {"tiny": args.tiny, "runs": args.runs}
    with kit.scratch_database(benchkit.pg_server_from_env()) as url:
        benchkit.django_setup()
        ids = build_demo(args)
        out.update(ids)
        t = time.monotonic()
        out["selene_id"] = import_selene(args)
        out["selene_import_s"] = round(time.monotonic() - t, 1)
        if not args.json:
            print(f"set up: {ids}", flush=True)
        out.update(server_times(ids, args.runs))
        if not args.json:
            print(f"server: {out}", flush=True)
        from django.db import connections

        connections.close_all()  # the server process writes the same SQLite file
        env = {"WEFT_DATA_DIR": os.environ["WEFT_DATA_DIR"]}
        if url.startswith("postgres"):
            env["DATABASE_URL"] = url
        server = WeftServer(Path(os.environ["WEFT_DATA_DIR"]), env)
        server.prepare = lambda: None  # migrated and the users made above
        kit.stops(server).start(timeout=120)
        out.update(browser_times(server, ids, args.runs))
        out["targets_met"] = {
            "map_1_5_s": out["map_first_frame_ms"] <= 1500,
            "job_page_300_ms": max(out["job_young_server_ms"], out["job_old_server_ms"]) <= 300,
            "job_page_60_kb": max(out["job_young_kb"], out["job_old_kb"]) <= 60,
            "selene_5_s": out["selene_first_frame_ms"] <= 5000,
        }
        print(json.dumps(kit.finish(out)))


if __name__ == "__main__":
    main()
