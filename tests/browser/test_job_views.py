"""Browser tests: where the admin finds the jobs crossing a hot port or link, and what the
rebalancer proposes for a degraded job (issue 24 §2-5), in Chromium against a real server.

An imported 2-level fat tree (2 leaves × 3 hosts, 2 spines); job ``allreduce`` on 4 hosts (both
leaves: its pairs cross the spines), job ``notify-1`` on one host. ``manage.py shell`` writes
min-hop routes as a routing snapshot (``tests.support.routes``), refreshes the job→links index,
stores one sweep in which the spine ports ``allreduce`` crosses are hot, and pulls
``notify-1``'s HCA cable (its ``link.down`` alarm; the job degraded). Then: the heatmap's hot-spot
list and tooltip name ``allreduce`` with its estimated share and a link to its page; the map's
link panel of a hot spine ↔ leaf link lists it per direction; the queue page's dry run proposes
replacing ``notify-1``'s host as the admin's option, and its button does it.
"""

from __future__ import annotations

import json

import pytest

from lab import netgen
from tests.browser_support import login
from tests.support.map_pages import open_map
from tests.support.pool_pages import api, token
from tests.support.waits import wait_for

pytestmark = pytest.mark.browser

SETUP = """
import json
from django.db.models import Q
from django.utils import timezone
from events.models import Alarm
from fabric.keys import link_key
from fabric.models import Fabric, Link, Port
from scheduler.models import Job, JobLink
from scheduler.services import faults, joblinks
from telemetry.models import PortCounters, Sweep
from tests.support.routes import min_hop_routes
fabric = Fabric.objects.get(name="views")
min_hop_routes(fabric)
joblinks.refresh()
wide = Job.objects.get(pk={wide})
spine_ports = []
for k in sorted(JobLink.objects.filter(job=wide).values_list("port_key", flat=True)):
    guid, num = k.rsplit("/", 1)
    p = Port.objects.select_related("node").get(node__node_guid=guid, port_num=int(num))
    if p.node.node_type == "switch" and "spine" in p.node.name.lower():
        spine_ports.append(p)
now = timezone.now()
sweep = Sweep.objects.create(fabric=fabric, started=now, interval_s=10.0, ports=len(spine_ports))
for i, p in enumerate(spine_ports):
    PortCounters.objects.update_or_create(port=p, defaults={{
        "sweep": sweep, "sampled_at": now, "congestion": 0.9 - 0.1 * i, "utilisation": 0.8, "error_deltas": {{}}}})
hot = spine_ports[0]
link = Link.objects.get(Q(port_a=hot) | Q(port_b=hot))
leaf = link.port_b if link.port_a_id == hot.pk else link.port_a
one = Job.objects.get(pk={one})
(host,) = one.placement
ca_link = Link.objects.select_related("port_a__node", "port_b__node").get(
    Q(port_a__node__host__name=host) | Q(port_b__node__host__name=host), fabric=fabric)
a, b = ca_link.port_a, ca_link.port_b
Alarm.objects.create(fabric=fabric, code="link.down", severity="critical", category="topology", object_type="link",
    object_key=link_key((a.node.node_guid, a.port_num), (b.node.node_guid, b.port_num)), object_repr=str(ca_link),
    message="link down", first_seen=now, last_seen=now)
faults.evaluate([one.pk])
print(json.dumps({{"hot": hot.pk, "hot_node": hot.node_id, "hot_num": hot.port_num, "spine": hot.node.node_guid,
                  "leaf": leaf.node.node_guid, "paths": JobLink.objects.get(job=wide, port_key=f"{{hot.node.node_guid}}/{{hot.port_num}}").paths,
                  "host": host, "state": Job.objects.get(pk=one.pk).state}}))
"""


def test_hot_ports_and_links_name_their_jobs_and_the_dry_run_replaces_a_degraded_job(
    weft_server, browser_page, tmp_path
):
    server, page = weft_server, browser_page
    topo = tmp_path / "views.topo"
    topo.write_text(netgen.fat_tree_2level(2, 2, 3))
    server.manage("import_topology", str(topo), "--fabric", "views")
    server.manage("seed_gpus", "--fabric", "views", "--per-host", "8")
    tok = token(server)
    tenant = api(
        server, tok, "POST", "/api/pools/tenants/", {"name": "team-v", "contacts": ["v@team.example"]}
    )
    pool = api(server, tok, "POST", "/api/pools/pools/", {"name": "train-v", "tenant": tenant["id"]})

    def running(name: str, hosts: int) -> dict:
        job = api(server, tok, "POST", "/api/scheduler/jobs/",
                  {"name": name, "pool": pool["id"], "count": 8 * hosts, "gpus_per_host": 8, "on_fault": "notify"})  # fmt: skip
        wait_for(lambda: api(server, tok, "GET", f"/api/scheduler/jobs/{job['id']}/")["state"] == "placed", 60,
                 f"the server's pass to place {name}")  # fmt: skip
        return api(server, tok, "POST", f"/api/scheduler/jobs/{job['id']}/start/", {})

    wide = running("allreduce", 4)
    one = running("notify-1", 1)
    out = server.manage("shell", "-c", SETUP.format(wide=wide["id"], one=one["id"])).stdout
    s = json.loads(out.strip().splitlines()[-1])
    assert s["state"] == "degraded"

    # the heatmap: the hot-spot list names the job with its estimated share and links to its page
    login(page, server)
    page.goto(f"{server.url}/heatmap/{api(server, tok, 'GET', '/api/fabric/fabrics/')['results'][0]['id']}/")
    first = page.locator(f'#hm-hot li[data-port="{s["hot"]}"]')
    job_link = first.locator(f'.hm-hot-jobs a[data-job="{wide["id"]}"]')
    job_link.wait_for()
    assert job_link.inner_text() == "allreduce"
    assert job_link.get_attribute("href") == f"/scheduler/jobs/{wide['id']}/"
    assert "allreduce 100 % estimated" in first.locator(".hm-hot-jobs").inner_text()
    assert page.locator("#hm-hot-note").is_visible() and "estimated" in page.inner_text("#hm-hot-note")
    # no job on a port nobody's routes cross: the list names none there (notify-1 is alone on a leaf)
    assert page.locator(f'.hm-hot-jobs a[data-job="{one["id"]}"]').count() == 0
    # the tooltip of that cell: the jobs and the word "estimated"
    centre = page.evaluate("([n, p]) => weftHeatmap.cellCentre(n, p)", [s["hot_node"], s["hot_num"]])
    box = page.locator("#hm-canvas").bounding_box()
    page.mouse.move(box["x"] + centre["x"], box["y"] + centre["y"])
    page.wait_for_selector("#hm-tooltip .hm-tip-jobs")
    tip = page.inner_text("#hm-tooltip")
    assert f"allreduce #{wide['id']} 100 %" in tip and "estimated" in tip

    # the map's link panel of the hot spine ↔ leaf link: the job, per direction, share estimated
    open_map(page, server, "views")
    ends = page.evaluate(
        """([a, b]) => {
          const N = weftMap.data.nodes;
          const ia = N.guid.indexOf(a), ib = N.guid.indexOf(b);
          const e = weftMap.edges().find((x) => (x.source === String(ia) && x.target === String(ib))
                                              || (x.source === String(ib) && x.target === String(ia)));
          return e ? [e.source, e.target, String(ia)] : null;
        }""",
        [s["spine"], s["leaf"]],
    )
    assert ends, "the spine-leaf edge is drawn"
    pa = page.wait_for_function("k => weftMap.settled() && weftMap.keyPosition(k)", arg=ends[0]).json_value()
    pb = page.wait_for_function("k => weftMap.settled() && weftMap.keyPosition(k)", arg=ends[1]).json_value()
    # a quarter of the way from one end: clear of the edge crossing it in the middle
    page.mouse.click(pa["x"] + (pb["x"] - pa["x"]) * 0.25, pa["y"] + (pb["y"] - pa["y"]) * 0.25)
    page.wait_for_selector("#panel-edge-jobs tr.edge-job")
    rows = page.locator(f'#panel-edge-jobs tr.edge-job[data-job="{wide["id"]}"]')
    assert rows.count() >= 1
    texts = [rows.nth(i).inner_text() for i in range(rows.count())]
    down = next(t for t in texts if f"[{s['hot_num']}] →" in t)  # spine port → leaf: the hot direction
    assert "allreduce" in down and str(s["paths"]) in down and "100 % estimated" in down
    assert page.locator(f'#panel-edge-jobs a[href="/scheduler/jobs/{wide["id"]}/"]').count() >= 1
    assert "job crossing this link" in page.inner_text("#panel-edge-detail")

    # the queue page's dry run: the degraded notify job's replacement, the admin's option, applied
    page.goto(f"{server.url}/scheduler/")
    page.click('.rebalance-run[data-dry-run="1"]')
    row = page.locator(f'.rebalance-actions tr[data-job="{one["id"]}"][data-kind="replace"]')
    row.wait_for()
    cells = row.locator("td")
    assert cells.nth(0).inner_text() == "replace (admin option)"
    reason = cells.nth(2).inner_text()
    assert f"admin option: replace {s['host']} by host" in reason and "HCA link of rail 0 down" in reason
    assert "proposed" in cells.nth(3).inner_text()
    row.locator("button.rebalance-apply").click()
    page.wait_for_function(
        "id => { const r = document.querySelector(`.rebalance-actions tr[data-job='${id}']`);"
        " return r && r.lastChild.textContent.startsWith('done'); }",
        arg=str(one["id"]),
    )
    moved = api(server, tok, "GET", f"/api/scheduler/jobs/{one['id']}/")
    assert (
        s["host"] not in moved["placement"]
        and moved["faults"] == []
        and moved["state"] in ("placed", "running")
    )
    assert list(moved["placement"])[0] in row.locator("td").nth(3).inner_text()
