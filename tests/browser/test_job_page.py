"""Browser test of the job page (real server, Debian Chromium): the job's hosts are marked on the
embedded fabric map and the fabric view's charts are drawn from the stored counter history.

Data goes through the real paths: ``import_topology`` (``tests.support.topologies.RAILS``: host001
and host002, each with mlx5_0 on rail0-leaf and mlx5_1 on rail1-leaf), ``seed_gpus``, a tenant and
pool through the REST API, a job submitted through ``POST /api/scheduler/jobs/`` and placed by the
server's own scheduling pass. Counter history of the job's HCA ports is stored as a sweep stores it
(``telemetry.services.history.build_chunks``) inside the server's database (``manage.py shell``).
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from lab import netgen
from tests.browser_support import login
from tests.support.map_pages import overlapping
from tests.support.pool_pages import DIM, HIGHLIGHT, api, token
from tests.support.topologies import RAILS
from tests.support.waits import wait_for

pytestmark = pytest.mark.browser

#: what the shell writes: 3 sweeps of every CA port of the job's host and of the leaf port each is
#: cabled to; the CA ports flat (as in the lab, whose traffic player writes switch ports only), the
#: leaf ports receiving 3 GB/s + k from the host and sending it 1 GB/s (the view reads the leaf end)
HISTORY = """
import json
from django.db.models import Q
from fabric.models import Link, Port
from scheduler.models import Job
from telemetry.models import CounterChunk
from telemetry.services.history import build_chunks
job = Job.objects.get(pk={job})
ports = list(Port.objects.filter(node__host__name__in=list(job.placement), node__node_type="ca").order_by("pk"))
leaves = []
for p in ports:
    link = Link.objects.get(Q(port_a=p) | Q(port_b=p))
    leaves.append(link.port_b if link.port_a_id == p.pk else link.port_a)
t0 = int(job.placed_at.timestamp())
rows = []
for k in (1, 2, 3):
    entries = [(p.pk, (0.0, 0.0, 0.0, 0, 0)) for p in ports] + [(q.pk, (1.0e9, 3.0e9 + k * 1e8, 0.0, 0, 0)) for q in leaves]
    rows += build_chunks(ports[0].node.fabric_id, t0 + k, sorted(entries))
CounterChunk.objects.bulk_create(rows)
print(json.dumps({{"ports": len(ports), "leaves": len({{q.node_id for q in leaves}}), "t0": t0}}))
"""


def test_job_page_marks_its_hosts_and_draws_its_links(weft_server, browser_page, tmp_path):
    server, page = weft_server, browser_page
    topo = tmp_path / "rails.net"
    topo.write_text(RAILS)
    server.manage("import_topology", str(topo), "--fabric", "rails")
    server.manage("seed_gpus", "--fabric", "rails", "--per-host", "8")
    tok = token(server)
    tenant = api(server, tok, "POST", "/api/pools/tenants/", {"name": "team-a"})
    pool = api(server, tok, "POST", "/api/pools/pools/", {"name": "train", "tenant": tenant["id"]})
    job = api(server, tok, "POST", "/api/scheduler/jobs/",
              {"name": "llm", "pool": pool["id"], "count": 8, "gpus_per_host": 8})  # fmt: skip
    placed = wait_for(
        lambda: (j := api(server, tok, "GET", f"/api/scheduler/jobs/{job['id']}/"))["state"] == "placed"
        and j,
        60,
        "the server's pass to place the job",
    )
    (host,) = placed["placement"]
    # the history must lie inside the job's window (placement .. now): 3 s after the placement
    placed_at = datetime.fromisoformat(placed["placed_at"].replace("Z", "+00:00")).timestamp()
    wait_for(lambda: time.time() >= int(placed_at) + 4, 10, "4 s after the placement")
    out = json.loads(
        server.manage("shell", "-c", HISTORY.format(job=job["id"])).stdout.strip().splitlines()[-1]
    )
    assert out["ports"] == 2 and out["leaves"] == 2  # mlx5_0 on rail0-leaf, mlx5_1 on rail1-leaf
    cas = api(server, tok, "GET", "/api/fabric/nodes/?fabric_name=rails&type=ca&limit=100")["results"]
    mine = sorted(n["node_guid"] for n in cas if n["name"].startswith(f"{host} "))
    others = [n["node_guid"] for n in cas if not n["name"].startswith(f"{host} ")]
    assert len(mine) == 2 and len(others) == 2

    login(page, server, "admin")
    page.goto(f"{server.url}/scheduler/jobs/{job['id']}/")
    assert page.inner_text("#job-name") == "llm"
    assert page.locator(f"#job-gpus tr[data-host='{host}']").count() == 1
    page.wait_for_selector("#map[data-state=ready], #map[data-state=error]", timeout=60000)
    assert page.get_attribute("#map", "data-state") == "ready", page.inner_text("#map")
    assert page.get_attribute("#map", "data-highlighted") == "2"
    assert sorted(page.evaluate("() => window.weftMap.highlighted()")) == mine
    for guid in mine:
        assert page.evaluate("g => window.weftMap.drawn(g)", guid)["color"] == HIGHLIGHT
    for guid in others:
        assert page.evaluate("g => window.weftMap.drawn(g)", guid)["color"] == DIM
    assert page.inner_text("#map-legend li[data-legend=highlight]").strip() == "HCAs of llm on 1 host (2)"

    # the HCA chart: the two links' traffic, read at their leaf ends in the hosts' directions,
    # summed per sweep, drawn; the uplink chart has no history
    page.wait_for_selector("#chart-hca[data-state=ok]")
    assert page.get_attribute("#chart-hca", "data-points") == "3"
    # what a point is, under the chart: a young job's raw sweeps (the view's resolution)
    assert page.get_attribute("#chart-hca", "data-resolution") == "raw"
    assert page.inner_text("#chart-hca .fv-step") == "raw sweeps, ~1 s apart"
    data = page.evaluate("() => window.weftJobFabric.charts.hca.data")
    assert data[0] == [out["t0"] + k for k in (1, 2, 3)]
    assert data[1] == pytest.approx([2 * (3.0e9 + k * 1e8) for k in (1, 2, 3)], rel=1e-4)
    assert data[2] == pytest.approx([2.0e9] * 3, rel=1e-4)
    assert page.get_attribute("#chart-uplink", "data-state") == "empty"
    assert "out of the hosts" in page.inner_text("#chart-hca .u-legend")
    # its times and values as the port page's (weft/timecharts.js): ISO dates, 24-hour clock, the
    # server's time zone, seconds on ticks under a minute apart, the date above the first tick and
    # where the day changes; byte rates in decimal units, fractions as percentages
    zone = ZoneInfo(page.get_attribute("#chart-hca", "data-tz"))
    start = datetime(2026, 12, 1, 23, 59, 58, tzinfo=zone)
    splits = [int((start + timedelta(seconds=s)).timestamp()) for s in (0, 1, 2)]
    shown = page.evaluate(
        """([s, t]) => { const u = weftJobFabric.charts.hca; return {
          ticks: u.axes[0].values(u, s, 0, 110, 1), time: u.series[0].value(u, t),
          rates: [u.series[1].value(u, 6.2e9), u.series[2].value(u, 999), u.axes[1].values(u, [0, 2.5e9])],
          load: [u.series[3].value(u, 0.25), u.series[4].value(u, null), u.axes[2].values(u, [0, 0.5, 1])] }; }""",
        [splits, splits[0] + 7],
    )
    assert shown == {
        "ticks": ["2026-12-01\n23:59:58", "23:59:59", "2026-12-02\n00:00:00"],
        "time": "2026-12-02 00:00:05",
        "rates": ["6.2 GB/s", "999 B/s", ["0 B/s", "2.5 GB/s"]],
        "load": ["25.0 %", "–", ["0 %", "50 %", "100 %"]],
    }
    assert page.locator("#fv-links tr[data-kind=hca]").count() == 2
    # the same numbers in the JSON endpoint
    view = api(server, tok, "GET", f"/api/scheduler/jobs/{job['id']}/fabric/")
    assert view["totals"]["hca"]["summary"]["samples"] == 3 and view["highlight"] == mine
    assert page.csp_violations == []

    # the queue lists it with its host; its dry-run button says why 64 GPUs cannot go anywhere (the
    # pool can never hold them: a job above its pool's capacity is refused, naming count), and
    # the job is still the only one
    page.goto(f"{server.url}/scheduler/")
    assert host in page.inner_text(f"#holding-jobs tr[data-job='{job['id']}']")
    page.click("#dry-run-64")
    page.wait_for_selector("#dry-run-error")
    said = page.inner_text("#dry-run-error")
    assert said.startswith("count: count 64 is more than pool") and "can ever hold: 16 GPUs" in said, said
    assert api(server, tok, "GET", "/api/scheduler/jobs/")["count"] == 1
    assert page.csp_violations == []


def test_job_map_labels_its_hosts_once_each_without_overlap(weft_server, browser_page):
    """A job on 4 hosts of the demo fabric (``lab.netgen.DEMO_SPEC``: 8 HCAs a host, one per rail,
    a host's HCAs a few pixels apart): their 32 names were drawn over each other. The map labels
    each host once on its first HCA ("host001 (8 HCAs)"), inside the canvas, and no two labels
    drawn overlap; an HCA's own name shows when it is selected."""
    server, page = weft_server, browser_page
    topo = server.data_dir / "demo.net"
    topo.write_text(netgen.parse_spec(netgen.DEMO_SPEC))
    server.manage("import_topology", str(topo), "--fabric", "lab")
    server.manage("seed_gpus", "--fabric", "lab", "--per-host", "8")
    tok = token(server)
    tenant = api(server, tok, "POST", "/api/pools/tenants/", {"name": "team-a"})
    pool = api(server, tok, "POST", "/api/pools/pools/", {"name": "train", "tenant": tenant["id"]})
    job = api(server, tok, "POST", "/api/scheduler/jobs/",
              {"name": "llm", "pool": pool["id"], "count": 32, "gpus_per_host": 8})  # fmt: skip
    placed = wait_for(
        lambda: (j := api(server, tok, "GET", f"/api/scheduler/jobs/{job['id']}/"))["state"] == "placed"
        and j,
        60,
        "the server's pass to place the job",
    )
    hosts = sorted(placed["placement"])
    assert len(hosts) == 4

    login(page, server, "admin")
    page.goto(f"{server.url}/scheduler/jobs/{job['id']}/")
    page.wait_for_selector("#map[data-state=ready], #map[data-state=error]", timeout=60000)
    assert page.get_attribute("#map", "data-highlighted") == "32"
    page.wait_for_function("() => weftMap.settled()")
    drawn = page.evaluate("() => weftMap.labelBoxes()")
    boxes = drawn["boxes"]
    mine = [b for b in boxes if b["label"].endswith(" (8 HCAs)")]
    assert sorted(b["label"] for b in mine) == [f"{h} (8 HCAs)" for h in hosts], boxes
    assert not any(" mlx5_" in b["label"] for b in boxes)  # no HCA's own name besides
    # the hosts' HCAs are closer together than a label is wide: drawn right of each, they collided
    xs = sorted(b["x"] for b in mine)
    assert xs[-1] - xs[0] < min(b["right"] - b["left"] for b in mine), (xs, mine)
    assert overlapping(boxes) == []
    for b in boxes:
        assert (
            0 <= b["left"] < b["right"] <= drawn["width"] and 0 <= b["top"] < b["bottom"] <= drawn["height"]
        ), b

    # selected, an HCA shows its own name (the hover box), the host's label stays on the first one
    cas = api(server, tok, "GET", "/api/fabric/nodes/?fabric_name=lab&type=ca&limit=300")["results"]
    ca = next(n for n in cas if n["name"] == f"{hosts[0]} mlx5_3")
    assert page.evaluate("g => window.weftMap.select(g)", ca["node_guid"])
    page.wait_for_selector(f"#map[data-selected='{ca['node_guid']}']")
    assert page.evaluate("g => window.weftMap.drawn(g)", ca["node_guid"])["label"] == f"{hosts[0]} mlx5_3"
    first = next(n for n in cas if n["name"] == f"{hosts[0]} mlx5_0")
    assert (
        page.evaluate("g => window.weftMap.drawn(g)", first["node_guid"])["label"] == f"{hosts[0]} (8 HCAs)"
    )
    assert page.inner_text("#panel-title") == f"{hosts[0]} mlx5_3"


#: what the second test's shell writes: min-hop routes of the fabric (the job→links index then
#: has its paths), a link.down alarm on the job's host's mlx5_1 cable at a known time (a cause:
#: the job degrades), the faults evaluated
DEGRADE = """
import json
from datetime import datetime, UTC
from django.db.models import Q
from events.models import Alarm
from fabric.keys import link_key
from fabric.models import Fabric, Link
from scheduler.models import Job
from scheduler.services import faults, joblinks
from tests.support.routes import min_hop_routes
job = Job.objects.get(pk={job})
host = sorted(job.placement)[0]
min_hop_routes(Fabric.objects.get(name="rails"))
joblinks.refresh([job.pk])
link = Link.objects.select_related("port_a__node", "port_b__node").get(
    Q(port_a__node__name=host + " mlx5_1") | Q(port_b__node__name=host + " mlx5_1"))
a, b = link.port_a, link.port_b
at = datetime.fromtimestamp({at}, tz=UTC)
alarm = Alarm.objects.create(fabric=link.fabric, code="link.down", severity="critical", category="topology",
    object_type="link", object_key=link_key((a.node.node_guid, a.port_num), (b.node.node_guid, b.port_num)),
    object_repr=str(link), message="cable down", first_seen=at, last_seen=at)
faults.evaluate()
print(json.dumps({{"alarm": alarm.pk, "links": len(joblinks.links_of(job.pk)), "host": host,
                  "state": Job.objects.get(pk=job.pk).state}}))
"""


def test_job_page_loads_its_fabric_view_paths_and_alarms_on_demand(weft_server, browser_page, tmp_path):
    """A job on both hosts (its rails have pairs: paths). The job page inlines no fabric-view
    JSON (issue 26 §4: 152 KB for a 12-minute job); its
    script fetches the view and the links on its paths and still shows everything: the degraded
    cause (rendered at once), the HCA link table with links to both ports, the links on its paths
    with their ports, the alarm in its window with its time as an ISO date and clock in the
    server's time zone (UTC here, as on the alarm pages), and the counts in the headings."""
    server, page = weft_server, browser_page
    topo = tmp_path / "rails.net"
    topo.write_text(RAILS)
    server.manage("import_topology", str(topo), "--fabric", "rails")
    server.manage("seed_gpus", "--fabric", "rails", "--per-host", "8")
    tok = token(server)
    tenant = api(server, tok, "POST", "/api/pools/tenants/", {"name": "team-p"})
    pool = api(server, tok, "POST", "/api/pools/pools/", {"name": "train-p", "tenant": tenant["id"]})
    job = api(server, tok, "POST", "/api/scheduler/jobs/",
              {"name": "llm", "pool": pool["id"], "count": 16, "gpus_per_host": 8})  # fmt: skip
    wait_for(lambda: api(server, tok, "GET", f"/api/scheduler/jobs/{job['id']}/")["state"] == "placed", 60,
             "the server's pass to place the job")  # fmt: skip
    api(server, tok, "POST", f"/api/scheduler/jobs/{job['id']}/start/", {})
    at = int(time.time()) + 1  # inside the job's window (it started just now)
    wait_for(lambda: time.time() >= at + 1, 10, "the alarm's time to pass")
    out = json.loads(
        server.manage("shell", "-c", DEGRADE.format(job=job["id"], at=at)).stdout.strip().splitlines()[-1]
    )
    assert out["state"] == "degraded" and out["links"] > 0

    login(page, server, "admin")
    page.goto(f"{server.url}/scheduler/jobs/{job['id']}/")
    html = page.content()
    assert "job-fabric-data" not in html  # nothing inlined
    # the cause, rendered with the page
    fault = page.locator('#job-faults-list li[data-code="hca_link_down"]')
    assert page.locator("#job-faults").is_visible() and fault.count() == 1
    assert out["host"] in fault.inner_text() and "rail 1" in fault.inner_text()
    # the fabric view, fetched
    page.wait_for_selector("#fabric-view[data-state=ok], #fabric-view[data-state=error]")
    assert page.get_attribute("#fabric-view", "data-state") == "ok"
    view = api(server, tok, "GET", f"/api/scheduler/jobs/{job['id']}/fabric/")
    hca = [e for e in view["links"] if e["kind"] == "hca"]
    rows = page.locator("#fv-links tr[data-kind=hca]")
    assert rows.count() == len(hca) == 4  # 2 hosts x 2 rails
    for k, e in enumerate(hca):
        row = rows.nth(k)
        assert row.get_attribute("data-port") == str(e["near"]["id"])
        hrefs = [a.get_attribute("href") for a in row.locator("a").all()]
        assert hrefs == [f"/fabric/ports/{e['near']['id']}/", f"/fabric/ports/{e['far']['id']}/"]
        assert f"rail {e['rail']}" in row.inner_text()
    assert page.inner_text("#fv-hca-count") == "4"
    assert page.inner_text("#fv-uplink-count") == str(view["totals"]["uplink"]["summary"]["links"])
    # the alarm in its window, its time in ISO form (UTC, the server's zone here)
    alarm = page.locator(f"#fv-alarms tr[data-alarm='{out['alarm']}']")
    assert alarm.count() == 1
    first = alarm.locator("td").first.inner_text()
    assert first == datetime.fromtimestamp(at, tz=ZoneInfo("UTC")).strftime("%Y-%m-%d %H:%M:%S"), first
    assert alarm.locator("a").get_attribute("href") == f"/alarms/{out['alarm']}/"
    assert "critical" in alarm.inner_text() and "link.down" in alarm.inner_text()
    assert page.inner_text("#fv-alarm-count") == str(len(view["alarms"]))
    # the links on its paths, fetched, with their ports
    page.wait_for_selector("#job-paths[data-state=ok]")
    paths = api(server, tok, "GET", f"/api/scheduler/jobs/{job['id']}/links/")["links"]
    shown = page.locator("#job-path-links tr[data-port-key]")
    assert shown.count() == len(paths) == out["links"]
    assert [shown.nth(k).get_attribute("data-port-key") for k in range(len(paths))] == [
        p["port_key"] for p in paths
    ]
    first_port = next(p for p in paths if p["port"])
    link = page.locator(f"#job-path-links tr[data-port-key='{first_port['port_key']}'] a")
    assert link.get_attribute("href") == f"/fabric/ports/{first_port['port']}/"
    assert page.inner_text("#job-path-count") == str(len(paths))
    assert page.csp_violations == []
