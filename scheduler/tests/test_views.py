"""The queue and job pages, submit and cancel from the page, the dry run, and the fabric view's
API: roles (Viewer reads, Operator of the tenant writes), tenant isolation (another tenant's job
is not listed and its page, cancel and fabric view are 404s)."""

from __future__ import annotations

import re

import pytest
from django.utils.html import escape

from pools.models import Pool, Tenant, TenantMembership
from scheduler.models import Job
from scheduler.services.queue import JobSpec, run_pass, submit
from tests.support.jobs import gpu_cluster


@pytest.fixture
def setup(db, users):
    c = gpu_cluster(2, 2, 8, name="ui", quota=24)  # 32 GPUs, tenant t-ui with pool p-ui (quota 24)
    other = Tenant.objects.create(name="t-other")
    other_pool = Pool.objects.create(name="p-other", tenant=other, fabric=c.fabric)
    TenantMembership.objects.create(tenant=c.tenant, user=users["operator"], role="operator")
    TenantMembership.objects.create(tenant=c.tenant, user=users["viewer"], role="viewer")
    mine = submit(JobSpec(name="mine-train", pool_id=c.pool.pk, count=16, gpus_per_host=8))
    run_pass()
    big = submit(JobSpec(name="mine-big", pool_id=c.pool.pk, count=16, gpus_per_host=8))
    theirs = submit(JobSpec(name="their-secret", pool_id=other_pool.pk, count=8))
    run_pass()
    for j in (mine, big, theirs):
        j.refresh_from_db()
    assert (mine.state, big.state, big.pending_code) == ("placed", "pending", "quota")
    return c, other_pool, mine, big, theirs


def test_queue_page_lists_the_users_tenants_jobs_with_why_pending(setup, client_for):
    c, other_pool, mine, big, theirs = setup
    page = client_for("viewer").get("/scheduler/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "mine-train" in html and "mine-big" in html and "their-secret" not in html
    # the pending job with its code and the quota explanation, the placed one with its hosts
    row = re.search(rf'<tr data-job="{big.pk}" data-state="pending" data-code="quota">(.*?)</tr>', html, re.S)
    assert row and "quota" in row.group(1) and "24" in row.group(1)
    held = re.search(rf'<tr data-job="{mine.pk}" data-state="placed">(.*?)</tr>', html, re.S)
    assert held and ", ".join(sorted(mine.placement)) in held.group(1)
    # a Viewer gets no submit form and no cancel button
    assert 'id="submit-form"' not in html and "Cancel</button>" not in html
    assert 'href="/scheduler/"' in html  # the nav entry
    # the admin sees every tenant's jobs and filters by tenant and state
    admin = client_for("admin")
    assert "their-secret" in admin.get("/scheduler/").content.decode()
    only = admin.get("/scheduler/", {"tenant": other_pool.tenant_id}).content.decode()
    assert "their-secret" in only and "mine-train" not in only
    pending = admin.get("/scheduler/", {"state": "pending"}).content.decode()
    assert "mine-big" in pending and f'data-job="{mine.pk}"' not in pending


def test_operator_submits_and_cancels_from_the_page(setup, client_for):
    c, other_pool, mine, big, theirs = setup
    op = client_for("operator")
    html = op.get("/scheduler/").content.decode()
    assert 'id="submit-form"' in html and html.count("Cancel</button>") == 2  # mine and big, not theirs
    resp = op.post(
        "/scheduler/submit/",
        {"name": "from-page", "pool": c.pool.pk, "count": 8, "priority_class": "high", "tier": "leaf",
         "tier_mode": "required", "time_limit_s": 600},
    )  # fmt: skip
    job = Job.objects.get(name="from-page")
    assert resp.status_code == 302 and resp["Location"] == f"/scheduler/jobs/{job.pk}/"
    assert (job.tenant_id, job.count, job.priority_class, job.tier, job.tier_mode, job.state) == (
        c.tenant.pk, 8, "high", 1, "required", "pending",
    )  # fmt: skip
    # another tenant's pool is refused, nothing is written
    resp = op.post("/scheduler/submit/", {"name": "x", "pool": other_pool.pk, "count": 1,
                                          "priority_class": "normal", "tier_mode": "preferred"})  # fmt: skip
    assert resp.status_code == 302 and not Job.objects.filter(name="x").exists()
    page = op.get("/scheduler/").content.decode()
    assert "Not submitted: pool:" in page
    # cancel: theirs is a 404, mine is cancelled and its GPUs released
    assert op.post(f"/scheduler/jobs/{theirs.pk}/cancel/").status_code == 404
    resp = op.post(f"/scheduler/jobs/{mine.pk}/cancel/", {"next": "/scheduler/"})
    assert resp.status_code == 302 and resp["Location"] == "/scheduler/"
    mine.refresh_from_db()
    assert mine.state == "cancelled" and mine.allocation.state != "active"
    # a Viewer may not post at all
    viewer = client_for("viewer")
    assert viewer.post(f"/scheduler/jobs/{big.pk}/cancel/").status_code == 403
    assert viewer.post("/scheduler/submit/", {"name": "v", "pool": c.pool.pk, "count": 1}).status_code == 403
    assert Job.objects.get(pk=big.pk).state == "pending"


def test_job_page_and_fabric_api_are_tenant_scoped(setup, client_for):
    c, other_pool, mine, big, theirs = setup
    viewer = client_for("viewer")
    page = viewer.get(f"/scheduler/jobs/{mine.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "16 GPUs (2 hosts × 8)" in html and 'data-step="placed"' in html
    for host in mine.placement:
        assert f'data-host="{host}"' in html
    assert 'data-highlight="' in html and 'id="chart-hca"' in html
    assert f'data-api="/api/scheduler/jobs/{mine.pk}/fabric/?series=totals"' in html  # fetched by its script
    assert 'data-code="placed"' in html  # the placement decision with its explanation
    step = re.search(r'<li data-step="placed">(.*?)</li>', html, re.S)
    assert step and escape(mine.decision["reasons"][0]) in step.group(1)
    assert "Cancel the job" not in html
    # the pending job's page says why it waits
    assert "quota" in viewer.get(f"/scheduler/jobs/{big.pk}/").content.decode()
    # another tenant's job: 404 on the page and in the API, for viewer and operator alike
    for who in ("viewer", "operator"):
        client = client_for(who)
        assert client.get(f"/scheduler/jobs/{theirs.pk}/").status_code == 404
        assert client.get(f"/api/scheduler/jobs/{theirs.pk}/fabric/").status_code == 404
    assert client_for("admin").get(f"/api/scheduler/jobs/{theirs.pk}/fabric/").status_code == 200
    data = viewer.get(f"/api/scheduler/jobs/{mine.pk}/fabric/").json()
    assert [h["name"] for h in data["hosts"]] == sorted(mine.placement)
    assert {e["kind"] for e in data["links"]} == {"hca", "uplink"} and data["fabric"]["id"] == c.fabric.pk
    assert (
        client_for("operator").get(f"/scheduler/jobs/{mine.pk}/").content.decode().count("Cancel the job")
        == 1
    )
    assert viewer.get("/scheduler/jobs/999999/").status_code == 404


def test_dry_run_explains_where_a_job_would_go_and_writes_nothing(setup, client_for):
    c, other_pool, mine, big, theirs = setup
    before = (Job.objects.count(), list(Job.objects.values_list("pk", "state", "pending_code")))
    viewer = client_for("viewer")
    html = viewer.get("/scheduler/dry-run/", {"pool": c.pool.pk, "count": 16, "gpus_per_host": 8,
                                              "priority_class": "normal", "tier_mode": "preferred"}).content.decode()  # fmt: skip
    # 16 held of quota 24: quota; lifted, the fabric has one free host (theirs took another):
    # capacity, with a reservation on the hosts of the job that ends first
    m = re.search(r'id="dry-run-result" data-code="(\w+)"', html)
    assert m and m.group(1) == "quota"
    assert "16 GPUs held + 16 asked &gt; quota 24" in html
    assert re.search(r'id="without-quota">.*?code-capacity', html, re.S)
    assert "16 GPUs asked, 8 free" in html
    assert f"on {', '.join(sorted(mine.placement))}</p>" in html
    assert "1 pending job ahead" in html  # mine-big goes first
    # 8 GPUs fit the quota: placed on the one free host, and said why
    free = sorted(set(c.hosts) - set(mine.placement) - set(theirs.placement))
    html = viewer.get("/scheduler/dry-run/", {"pool": c.pool.pk, "count": 8}).content.decode()
    assert re.search(r'id="dry-run-result" data-code="placed" data-hosts="1"', html)
    assert f"{free[0]} ×8" in html and 'id="without-quota"' not in html
    # the queue's button leads there; another tenant's pool is not offered
    assert "/scheduler/dry-run/?" in viewer.get("/scheduler/").content.decode()
    resp = viewer.get("/scheduler/dry-run/", {"pool": other_pool.pk, "count": 8, "priority_class": "normal",
                                              "tier_mode": "preferred"})  # fmt: skip
    assert 'id="dry-run-result"' not in resp.content.decode() and "pool" in resp.content.decode()
    # an unknown tier is refused naming the field
    bad = viewer.get("/scheduler/dry-run/", {"pool": c.pool.pk, "count": 8, "tier": "rack"}).content.decode()
    assert 'id="dry-run-result"' not in bad and "tier" in bad
    assert (Job.objects.count(), list(Job.objects.values_list("pk", "state", "pending_code"))) == before


def test_job_page_window_is_in_the_servers_time_zone(setup, client_for, settings):
    """The fabric view's window heading reads in the server's time zone, as its charts do."""
    from zoneinfo import ZoneInfo

    settings.TIME_ZONE = "Asia/Tokyo"
    c, other_pool, mine, big, theirs = setup
    html = client_for("viewer").get(f"/scheduler/jobs/{mine.pk}/").content.decode()
    shown = re.search(r"<span class=\"muted\" data-window>(.*?)</span>", html, re.S).group(1)
    start = mine.placed_at.astimezone(ZoneInfo("Asia/Tokyo"))
    assert shown.startswith(start.strftime("%Y-%m-%d %H:%M")) and shown.endswith("JST"), shown
    assert "now" in shown  # the job still runs


def test_submit_form_offers_a_tenant_pool_first(setup, client_for):
    """The submit form's default pool submits as it stands: a tenant's pool, not a shared one
    (which needs a tenant named when the user operates several)."""
    Pool.objects.create(name="aaa-shared")  # first by name, shared
    html = client_for("admin").get("/scheduler/").content.decode()
    select = re.search(r'<select name="pool"[^>]*>(.*?)</select>', html, re.S).group(1)
    options = re.findall(r"<option value=\"\d+\"[^>]*>(.*?)</option>", select)
    assert "aaa-shared (shared)" in options and "(shared)" not in options[0], options


def test_the_submit_form_sent_twice_queues_one_job(setup, client_for):
    """The page's one-time token is the submit's idempotency key: a double click (the same form
    posted twice) queues one job and leads to it; the token reused for another job is refused."""
    c, other_pool, mine, big, theirs = setup
    op = client_for("operator")
    html = op.get("/scheduler/").content.decode()
    token = re.search(r'name="submit_token" value="([0-9a-f]{32})"', html).group(1)
    assert token not in op.get("/scheduler/").content.decode()  # a new one per page shown
    form = {"name": "twice", "pool": c.pool.pk, "count": 8, "priority_class": "normal",
            "tier_mode": "preferred", "submit_token": token}  # fmt: skip
    first, second = op.post("/scheduler/submit/", form), op.post("/scheduler/submit/", form)
    job = Job.objects.get(name="twice")
    assert first["Location"] == second["Location"] == f"/scheduler/jobs/{job.pk}/"
    assert "already submitted from this form" in op.get(second["Location"]).content.decode()
    resp = op.post("/scheduler/submit/", {**form, "count": 16})
    assert resp["Location"] == "/scheduler/" and Job.objects.filter(name="twice").count() == 1
    assert "this form was already used for another job" in op.get("/scheduler/").content.decode()


def test_a_pool_or_tenant_with_queued_jobs_is_not_deleted(setup, client_for):
    """Deleting a pool (or its tenant) whose jobs still wait in the queue is a 409 naming them;
    nothing goes (the jobs vanished without a trace before)."""
    from scheduler.services.queue import JobSpec, cancel, submit

    c = setup[0]
    q = Pool.objects.create(name="q", tenant=c.tenant, fabric=c.pool.fabric, quota_gpus=0)
    job = submit(JobSpec(name="waits", pool_id=q.pk, tenant_id=c.tenant.pk, count=8))
    assert Job.objects.get(pk=job.pk).state == "pending"  # quota 0: it waits
    admin = client_for("admin")
    for url in (f"/api/pools/pools/{q.pk}/", f"/api/pools/tenants/{c.tenant.pk}/"):
        resp = admin.delete(url)
        assert resp.status_code == 409, (url, resp.content)
    resp = admin.delete(f"/api/pools/pools/{q.pk}/")
    assert "1 queued job(s) waiting to be placed: cancel them first" in resp.json()["detail"]
    assert Pool.objects.filter(pk=q.pk).exists() and Job.objects.filter(pk=job.pk).exists()
    cancel(job.pk)
    assert admin.delete(f"/api/pools/pools/{q.pk}/").status_code == 204


def test_placed_job_page_says_who_starts_and_finishes_it(setup, client_for):
    """Weft does not run jobs: the page of a placed job names the API calls that move it on, and
    the calls it names do (a running job's page names finish only; an ended one's nothing)."""
    c, other_pool, mine, big, theirs = setup
    viewer, operator = client_for("viewer"), client_for("operator")
    start, finish = f"/api/scheduler/jobs/{mine.pk}/start/", f"/api/scheduler/jobs/{mine.pk}/finish/"

    def hint() -> str:
        m = re.search(r'<p class="muted" id="job-lifecycle">(.*?)</p>', viewer.get(f"/scheduler/jobs/{mine.pk}/").content.decode(), re.S)  # fmt: skip
        return m.group(1) if m else ""

    text = hint()
    assert f"<code>POST {start}</code> when the job starts" in text and f"<code>POST {finish}</code>" in text
    assert "workload manager" in text
    assert 'id="job-lifecycle"' not in viewer.get(f"/scheduler/jobs/{big.pk}/").content.decode()  # pending
    assert operator.post(start).json()["state"] == "running"
    text = hint()
    assert start not in text and f"<code>POST {finish}</code>" in text
    assert operator.post(finish, {"ok": True}, format="json").json()["state"] == "completed"
    assert hint() == ""


def test_job_page_lists_its_links_and_a_bounded_worst_first_uplink_list(db, users, client_for):
    """A 1-host job on a rail pod: its unit (the rail group) has 16 uplinks over its 4 rail leaves.
    The fabric view lists the host's 4 HCA links and the uplinks of the leaves its HCAs are on,
    worst first (the page shows the first 12, then "4 more" with each leaf's ports view); the JSON
    keeps them all. The map's legend counts hosts (the map counts the HCAs after the label)."""
    from datetime import timedelta

    from django.utils import timezone

    from fabric.services.ingest import import_topology_text
    from lab import netgen
    from pools.lab import seed_lab_gpus
    from telemetry.models import CounterChunk
    from telemetry.services.history import build_chunks

    fabric = import_topology_text(
        "rp", netgen.rail_pod(4, 4, 4, hosts_per_unit=4, speed="HDR"), filename="rp.topo"
    ).fabric
    seed_lab_gpus(fabric, 8)
    tenant = Tenant.objects.create(name="t-rp")
    pool = Pool.objects.create(name="p-rp", tenant=tenant, fabric=fabric)
    TenantMembership.objects.create(tenant=tenant, user=users["viewer"], role="viewer")
    t0 = timezone.now().replace(microsecond=0) - timedelta(minutes=10)
    job = submit(JobSpec(name="llm", pool_id=pool.pk, count=8, gpus_per_host=8), now=t0)
    run_pass(now=t0)
    job.refresh_from_db()
    assert job.state == "placed" and len(job.placement) == 1
    viewer = client_for("viewer")
    data = viewer.get(f"/api/scheduler/jobs/{job.pk}/fabric/").json()
    hca = [e for e in data["links"] if e["kind"] == "hca"]
    up = [e for e in data["links"] if e["kind"] == "uplink"]
    assert len(hca) == 4 and len(up) == 16 and all(e["job_leaf"] for e in up)
    assert len(data["leaves"]) == 4
    # history inside the window: uplink k's leaf end waits k × 1000 ticks/s (its congestion rank)
    begin = int(job.placed_at.timestamp())
    ranked = sorted(up, key=lambda e: e["near"]["id"])
    entries = [(e["near"]["id"], (1.0e9, 1.0e9, 1000.0 * (k + 1), 0, 0)) for k, e in enumerate(ranked)]
    CounterChunk.objects.bulk_create(
        [row for t in (begin + 10, begin + 20) for row in build_chunks(fabric.pk, t, sorted(entries))]
    )
    # the fabric view lists the uplinks worst first (the page's script shows the first 12 of the
    # job's leaves', tests/browser/test_job_page.py); series=totals: the summaries, not the series
    page_data = viewer.get(f"/api/scheduler/jobs/{job.pk}/fabric/?series=totals").json()
    listed = [e for e in page_data["links"] if e["kind"] == "uplink"]
    worst = [e["near"]["id"] for e in reversed(ranked)]
    assert [e["near"]["id"] for e in listed] == worst and all("series" not in e for e in page_data["links"])
    assert page_data["totals"]["uplink"]["series"]["t"] == [begin + 10, begin + 20]
    assert viewer.get(f"/api/scheduler/jobs/{job.pk}/fabric/?series=some").status_code == 400
    html = viewer.get(f"/scheduler/jobs/{job.pk}/").content.decode()
    assert 'data-max-uplinks="12"' in html and 'data-max-leaves="8"' in html
    # the legend: 4 HCAs marked (the map counts them), on 1 host
    assert 'data-highlight-label="HCAs of llm on 1 host"' in html
    assert len(data["highlight"]) == 4
