"""Browser test: the job page shows a job going ``degraded`` and back live (issue 24 §3).

A running job on an imported topology (``tests.support.topologies.RAILS``); an open ``link.down``
alarm on one of its host's HCA links is stored (``manage.py shell``) with a second one elsewhere;
clearing that second alarm through the REST API makes the server's alarm engine commit a change,
on which the server evaluates its jobs: the open page, without a reload, shows the state
``degraded`` and the cause (host and rail) over ``ws/jobs/``; clearing the HCA link's alarm brings
it back to ``running``.
"""

from __future__ import annotations

import json

import pytest

from tests.browser_support import login
from tests.support.pool_pages import api, token
from tests.support.topologies import RAILS
from tests.support.waits import wait_for

pytestmark = pytest.mark.browser

ALARMS = """
import json
from django.db.models import Q
from django.utils import timezone
from events.models import Alarm
from fabric.keys import link_key
from fabric.models import Link
from scheduler.models import Job
job = Job.objects.get(pk={job})
(host,) = job.placement
link = Link.objects.select_related("port_a__node", "port_b__node").filter(
    Q(port_a__node__host__name=host) | Q(port_b__node__host__name=host)).order_by("pk").first()
a, b = link.port_a, link.port_b
now = timezone.now()
mine = Alarm.objects.create(fabric=link.fabric, code="link.down", severity="critical", category="topology",
    object_type="link", object_key=link_key((a.node.node_guid, a.port_num), (b.node.node_guid, b.port_num)),
    object_repr=str(link), message="down", first_seen=now, last_seen=now)
other = Alarm.objects.create(fabric=link.fabric, code="link.down", severity="critical", category="topology",
    object_type="link", object_key="0x0000000000000001/1-0x0000000000000002/1", object_repr="elsewhere",
    message="down", first_seen=now, last_seen=now)
print(json.dumps({{"mine": mine.pk, "other": other.pk, "host": host}}))
"""


def test_the_job_page_shows_degraded_and_recovered_live(weft_server, browser_page, tmp_path):
    server, page = weft_server, browser_page
    topo = tmp_path / "rails.net"
    topo.write_text(RAILS)
    server.manage("import_topology", str(topo), "--fabric", "rails")
    server.manage("seed_gpus", "--fabric", "rails", "--per-host", "8")
    tok = token(server)
    tenant = api(
        server, tok, "POST", "/api/pools/tenants/", {"name": "team-d", "contacts": ["d@team.example"]}
    )
    pool = api(server, tok, "POST", "/api/pools/pools/", {"name": "train-d", "tenant": tenant["id"]})
    job = api(server, tok, "POST", "/api/scheduler/jobs/",
              {"name": "llm", "pool": pool["id"], "count": 8, "gpus_per_host": 8})  # fmt: skip
    wait_for(lambda: api(server, tok, "GET", f"/api/scheduler/jobs/{job['id']}/")["state"] == "placed", 60,
             "the server's pass to place the job")  # fmt: skip
    api(server, tok, "POST", f"/api/scheduler/jobs/{job['id']}/start/", {})
    ids = json.loads(
        server.manage("shell", "-c", ALARMS.format(job=job["id"])).stdout.strip().splitlines()[-1]
    )

    login(page, server)
    page.goto(f"{server.url}/scheduler/jobs/{job['id']}/")
    state = page.locator("#job-state")
    assert state.get_attribute("data-state") == "running"
    assert not page.locator("#job-faults").is_visible()
    page.wait_for_selector('#jobs-live[data-live="on"]')
    # an alarm change committed by the server's engine: the server evaluates its jobs, the page follows
    api(server, tok, "POST", f"/api/fabric/alarms/{ids['other']}/clear/", {"reason": "test"})
    page.wait_for_selector('#job-state[data-state="degraded"]', timeout=10000)
    assert state.inner_text() == "Degraded (fabric fault)"
    fault = page.locator('#job-faults-list li[data-code="hca_link_down"]')
    assert page.locator("#job-faults").is_visible() and fault.count() == 1
    assert f"{ids['host']}: HCA link of rail" in fault.inner_text()
    # the cable back (its alarm cleared): running again, the faults card gone
    api(server, tok, "POST", f"/api/fabric/alarms/{ids['mine']}/clear/", {"reason": "cable back"})
    page.wait_for_selector('#job-state[data-state="running"]', timeout=10000)
    assert not page.locator("#job-faults").is_visible()
    # and the queue lists it with its state
    page.goto(f"{server.url}/scheduler/")
    assert page.locator(f'tr[data-job="{job["id"]}"]').get_attribute("data-state") == "running"
