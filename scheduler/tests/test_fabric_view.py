"""The per-job fabric view (``scheduler.services.fabric_view``): a job placed by a real pass on a
fabric imported through the ingest, with counter history stored as the sweep stores it
(``telemetry.services.history.build_chunks`` rows in ``CounterChunk``) for its HCA links and its
unit's uplinks; the view reads back the values written, inside the job's window only, the
congestion of the far end, the errors of both ends, and the alarms of the window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from events.models import Alarm
from fabric.models import Link, Node
from scheduler.services.fabric_view import MAX_STEPS, job_fabric_view
from scheduler.services.queue import JobSpec, finish, run_pass, start, submit
from scheduler.services.state import current_locality
from telemetry.models import CounterChunk, Resolution
from telemetry.semantics import congestion_index, link_bytes_per_s
from telemetry.services.history import build_chunks
from tests.support.jobs import gpu_cluster


@pytest.fixture
def placed(db):
    c = gpu_cluster(2, 2, 8, name="fv")
    t0 = timezone.now().replace(microsecond=0) - timedelta(minutes=10)
    job = submit(JobSpec(name="train", pool_id=c.pool.pk, count=16, gpus_per_host=8, tier="leaf"), now=t0)
    run_pass(now=t0)
    job.refresh_from_db()
    assert job.state == "placed"
    start(job.pk, now=t0 + timedelta(seconds=5))
    job.refresh_from_db()
    return c, job, t0


def _links(c, job):
    """(HCA links near/far, uplinks near/far) as the view should pick them."""
    hosts = sorted(job.placement)
    cas = list(Node.objects.filter(host__name__in=hosts, fabric=c.fabric, node_type="ca"))
    hca = []
    for link in Link.objects.filter(Q(port_a__node__in=cas) | Q(port_b__node__in=cas)).select_related(
        "port_a__node", "port_b__node"
    ):
        near, far = (link.port_a, link.port_b) if link.port_a.node in cas else (link.port_b, link.port_a)
        hca.append((near, far))
    loc = current_locality()
    (unit,) = {loc.hosts[h].unit for h in hosts}
    dom = loc.domains[unit]
    up = []
    for link in Link.objects.filter(pk__in=dom.uplinks).select_related("port_a__node", "port_b__node"):
        a_leaf = link.port_a.node.node_guid in dom.switches
        up.append((link.port_a, link.port_b) if a_leaf else (link.port_b, link.port_a))
    return hca, up, dom


def test_fabric_view_reads_the_stored_history_of_the_jobs_links(placed):
    c, job, t0 = placed
    hca, up, dom = _links(c, job)
    assert len(hca) == 2 and len(up) == 2  # one HCA per host, a leaf with two spines
    begin = int(job.started_at.timestamp())
    rows = []
    # three sweeps inside the window, one before the job started (must not be read)
    for i, t in enumerate((begin - 30, begin + 10, begin + 20, begin + 30)):
        entries = []
        for near, far in hca:
            # the HCA end is flat (as in the lab, whose traffic player writes switch ports only);
            # the leaf port facing it receives host → leaf 2 GB/s + i and sends leaf → host 1 GB/s,
            # and waits (an incast into the host)
            entries.append((near.pk, (0.0, 0.0, 0.0, 0, 0)))
            entries.append((far.pk, (1.0e9, 2.0e9 + i * 1e8, 2.0e5 * i, 1 if i == 3 else 0, 0)))
        for near, far in up:
            entries.append((near.pk, (5.0e9, 4.0e9, 1.0e5, 0, 0)))
            entries.append((far.pk, (4.0e9, 5.0e9, 0.0, 2, 0)))
        rows += build_chunks(c.fabric.pk, t, sorted(entries))
    CounterChunk.objects.bulk_create(rows)
    # alarms: one on a leaf port during the job, one cleared before it started, one elsewhere
    leaf_port = hca[0][1]
    at = job.started_at + timedelta(seconds=15)
    Alarm.objects.create(
        fabric=c.fabric, code="port.congestion", severity="minor", category="performance", object_type="port",
        object_key="k1", object_repr=str(leaf_port), port=leaf_port, node=leaf_port.node, message="waits",
        first_seen=at, last_seen=at,
    )  # fmt: skip
    old = job.started_at - timedelta(hours=1)
    Alarm.objects.create(
        fabric=c.fabric, code="port.errors", severity="minor", category="performance", object_type="port",
        object_key="k2", object_repr=str(leaf_port), port=leaf_port, message="old", first_seen=old, last_seen=old,
        state="cleared", cleared_at=old + timedelta(minutes=1),
    )  # fmt: skip
    other = Node.objects.filter(fabric=c.fabric, host__name="host004").first()
    Alarm.objects.create(
        fabric=c.fabric, code="node.unreachable", severity="critical", category="topology", object_type="node",
        object_key=other.node_guid, object_repr=str(other), node=other, message="elsewhere",
        first_seen=at, last_seen=at,
    )  # fmt: skip

    view = job_fabric_view(job, now=job.started_at + timedelta(seconds=40))

    assert view["window"]["start_epoch"] == job.started_at.timestamp() and view["window"]["ongoing"]
    assert [h["name"] for h in view["hosts"]] == sorted(job.placement)
    assert all(h["gpus"] == list(range(8)) for h in view["hosts"])
    cas = sorted(
        Node.objects.filter(host__name__in=job.placement, node_type="ca").values_list("node_guid", flat=True)
    )
    assert view["highlight"] == cas
    assert view["fabric"] == {"id": c.fabric.pk, "name": c.fabric.name}
    assert [u["key"] for u in view["units"]] == [dom.key]
    assert {(h["unit"], h["unit_name"]) for h in view["hosts"]} == {(dom.key, dom.name)}
    kinds = [e["kind"] for e in view["links"]]
    assert kinds == ["hca", "hca", "uplink", "uplink"]

    e = next(x for x in view["links"] if x["near"]["id"] == hca[0][0].pk)
    s = e["series"]
    assert s["t"] == [begin + 10, begin + 20, begin + 30] and s["resolution"] == "raw"
    # the traffic is the leaf port's, in the HCA's directions: out of the host = the leaf's rcv
    assert e["traffic_end"] == "far" and e["far"]["id"] == hca[0][1].pk
    assert s["xmit_bytes_per_s"] == pytest.approx([2.1e9, 2.2e9, 2.3e9], rel=1e-4)
    assert s["rcv_bytes_per_s"] == pytest.approx([1.0e9] * 3, rel=1e-4)
    cap = link_bytes_per_s(hca[0][1].rate_gbps)
    assert cap and s["utilisation"] == pytest.approx([x / cap for x in (2.1e9, 2.2e9, 2.3e9)], rel=1e-4)
    tick = settings.WEFT_XMIT_WAIT_TICK_NS
    # the HCA port never waited: the link's congestion is the leaf port's (towards the host)
    assert s["congestion_near"] == [0.0, 0.0, 0.0]
    want = [congestion_index(2.0e5 * i, tick) for i in (1, 2, 3)]
    assert want[-1] > 0 and s["congestion"] == pytest.approx(want, rel=1e-4)
    assert s["congestion_far"] == pytest.approx(want, rel=1e-4)
    assert s["errors"] == [0, 0, 1]
    assert e["summary"]["congestion_max"] == pytest.approx(want[-1], rel=1e-4)
    assert e["summary"]["errors"] == 1 and e["summary"]["samples"] == 3

    hca_total = view["totals"]["hca"]
    assert hca_total["summary"]["links"] == 2
    assert hca_total["series"]["xmit_bytes_per_s"] == pytest.approx([4.2e9, 4.4e9, 4.6e9], rel=1e-4)
    assert hca_total["series"]["errors"] == [0, 0, 2]
    assert {x["traffic_end"] for x in view["links"] if x["kind"] == "uplink"} == {"near"}
    up_total = view["totals"]["uplink"]
    assert up_total["series"]["rcv_bytes_per_s"] == pytest.approx([8.0e9] * 3, rel=1e-4)
    assert up_total["series"]["congestion"] == pytest.approx([congestion_index(1.0e5, tick)] * 3, rel=1e-4)
    assert up_total["summary"]["errors"] == 2 * 2 * 3

    assert [(a["code"], a["message"]) for a in view["alarms"]] == [("port.congestion", "waits")]
    assert view["notes"] == []

    # the job ends: its window ends there, a later sweep is not read
    finish(job.pk, now=job.started_at + timedelta(seconds=25))
    job.refresh_from_db()
    ended = job_fabric_view(job)
    assert not ended["window"]["ongoing"]
    assert ended["links"][0]["series"]["t"] == [begin + 10, begin + 20]
    assert ended["hosts"] == view["hosts"]  # what it held, after the release


def test_a_job_never_placed_has_an_empty_view(db):
    c = gpu_cluster(1, 1, 8, name="fv0")
    job = submit(JobSpec(name="big", pool_id=c.pool.pk, count=8))  # no pass has run
    view = job_fabric_view(job)
    assert view["hosts"] == [] and view["links"] == [] and view["fabric"] is None
    assert view["window"]["start"] is None and "not placed" in view["notes"][0]


def test_a_link_whose_preferred_end_has_no_rate_is_read_from_the_other_end(placed):
    """An HCA link whose leaf port has no history in the window (not swept) is read from the HCA
    end as it is; an uplink whose leaf end has none from the spine end, directions swapped (up to
    the spine = the spine port's rcv). Congestion still comes from both ends."""
    c, job, t0 = placed
    hca, up, dom = _links(c, job)
    begin = int(job.started_at.timestamp())
    rows = []
    for i, t in enumerate((begin + 10, begin + 20)):
        entries = []
        for near, _far in hca:
            entries.append((near.pk, (3.0e9 + i * 1e8, 5.0e8, 1.0e5, 0, 0)))  # HCA end only
        for _near, far in up:
            entries.append((far.pk, (4.0e9, 6.0e9 + i * 1e8, 3.0e5, 0, 0)))  # spine end only
        rows += build_chunks(c.fabric.pk, t, sorted(entries))
    CounterChunk.objects.bulk_create(rows)

    view = job_fabric_view(job, now=job.started_at + timedelta(seconds=40))
    tick = settings.WEFT_XMIT_WAIT_TICK_NS
    hca_links = [x for x in view["links"] if x["kind"] == "hca"]
    assert [x["traffic_end"] for x in hca_links] == ["near", "near"]
    s = hca_links[0]["series"]
    assert s["xmit_bytes_per_s"] == pytest.approx([3.0e9, 3.1e9], rel=1e-4)
    assert s["rcv_bytes_per_s"] == pytest.approx([5.0e8] * 2, rel=1e-4)
    assert s["congestion_far"] == [None, None]
    assert s["congestion"] == pytest.approx([congestion_index(1.0e5, tick)] * 2, rel=1e-4)
    uplinks = [x for x in view["links"] if x["kind"] == "uplink"]
    assert [x["traffic_end"] for x in uplinks] == ["far", "far"]
    u = uplinks[0]["series"]
    assert u["xmit_bytes_per_s"] == pytest.approx([6.0e9, 6.1e9], rel=1e-4)  # leaf → spine
    assert u["rcv_bytes_per_s"] == pytest.approx([4.0e9] * 2, rel=1e-4)
    assert u["congestion_near"] == [None, None]
    assert u["congestion"] == pytest.approx([congestion_index(3.0e5, tick)] * 2, rel=1e-4)
    assert view["totals"]["uplink"]["series"]["xmit_bytes_per_s"] == pytest.approx([12.0e9, 12.2e9], rel=1e-4)


@pytest.fixture
def aligned(db):
    """A job of two hosts (one HCA each) started on a whole minute 10 minutes ago, with 12 raw
    sweeps 10 s apart from its start stored for its HCA links' leaf ends: leaf port ``j`` (of
    the HCA link ``j``) receives host → leaf ``(i + 1) GB/s + j × 0.5 GB/s`` at sweep ``i``,
    waits ``(i % 3) × 1e5`` ticks/s and counts 1 error a sweep; its HCA end is flat."""
    c = gpu_cluster(2, 2, 8, name="fvr")
    begin = (int(timezone.now().timestamp()) - 600) // 60 * 60
    at = datetime.fromtimestamp(begin, UTC)
    job = submit(JobSpec(name="train", pool_id=c.pool.pk, count=16, gpus_per_host=8, tier="leaf"), now=at)
    run_pass(now=at)
    start(job.pk, now=at)
    job.refresh_from_db()
    assert int(job.started_at.timestamp()) == begin
    hca, _up, _dom = _links(c, job)
    hca.sort(key=lambda nf: nf[0].pk)
    rows = []
    for i in range(12):
        entries = []
        for j, (near, far) in enumerate(hca):
            entries.append((near.pk, (0.0, 0.0, 0.0, 0, 0)))
            entries.append((far.pk, (1.0e9, (i + 1) * 1.0e9 + j * 5.0e8, (i % 3) * 1.0e5, 1, 0)))
        rows += build_chunks(c.fabric.pk, begin + 10 * i, sorted(entries))
    CounterChunk.objects.bulk_create(rows)
    return c, job, begin, hca


def _hca_series(view, hca):
    by_near = {e["near"]["id"]: e for e in view["links"]}
    return [by_near[near.pk]["series"] for near, _far in hca]


def test_auto_puts_a_read_with_more_steps_than_the_bound_in_bins(aligned):
    """No rollup stored and more raw sweeps than the bound: the raw sweeps in at most
    ``max_steps`` bins, each the mean of its rates, the highest congestion and utilisation, the
    sum of its errors; the totals are still the links' sums per step."""
    c, job, begin, hca = aligned
    now = job.started_at + timedelta(seconds=120)
    view = job_fabric_view(job, now=now, max_steps=4)
    assert view["resolution"] == {
        "asked": "auto", "read": "raw", "step_s": 30, "downsampled": True, "max_steps": 4,
    }  # fmt: skip
    tick = settings.WEFT_XMIT_WAIT_TICK_NS
    cap = link_bytes_per_s(hca[0][1].rate_gbps)
    for j, s in enumerate(_hca_series(view, hca)):
        assert s["t"] == [begin, begin + 30, begin + 60, begin + 90] and s["step_s"] == 30
        # bin b holds sweeps 3b, 3b+1, 3b+2: host → leaf (3b+2) GB/s + j/2 GB/s on the mean
        want = [(3 * b + 2) * 1.0e9 + j * 5.0e8 for b in range(4)]
        assert s["xmit_bytes_per_s"] == pytest.approx(want, rel=1e-4)
        assert s["rcv_bytes_per_s"] == pytest.approx([1.0e9] * 4, rel=1e-4)
        # the highest of the bin, not of its mean: sweep 3b+2's rate and 2e5 ticks/s wait
        peak = [(3 * b + 3) * 1.0e9 + j * 5.0e8 for b in range(4)]
        assert s["utilisation"] == pytest.approx([min(1.0, p / cap) for p in peak], rel=1e-4)
        assert s["congestion"] == pytest.approx([congestion_index(2.0e5, tick)] * 4, rel=1e-4)
        assert s["congestion"][0] > congestion_index(1.0e5, tick)  # the mean's would be lower
        assert s["errors"] == [3, 3, 3, 3]
    total = view["totals"]["hca"]["series"]
    series = _hca_series(view, hca)
    assert total["t"] == series[0]["t"]
    assert total["xmit_bytes_per_s"] == pytest.approx(
        [a + b for a, b in zip(series[0]["xmit_bytes_per_s"], series[1]["xmit_bytes_per_s"], strict=True)]
    )
    assert total["errors"] == [6, 6, 6, 6]
    assert total["utilisation"] == [
        max(a, b) for a, b in zip(series[0]["utilisation"], series[1]["utilisation"], strict=True)
    ]
    assert view["links"][0]["summary"]["samples"] == 4

    # an explicit resolution is read whole: every stored sweep
    whole = job_fabric_view(job, now=now, resolution="raw", max_steps=4)
    assert whole["resolution"] == {
        "asked": "raw", "read": "raw", "step_s": None, "downsampled": False, "max_steps": None,
    }  # fmt: skip
    s = _hca_series(whole, hca)[0]
    assert s["t"] == [begin + 10 * i for i in range(12)]
    assert s["xmit_bytes_per_s"] == pytest.approx([(i + 1) * 1.0e9 for i in range(12)], rel=1e-4)
    assert whole["totals"]["hca"]["summary"]["errors"] == 24
    with pytest.raises(ValueError, match="resolution 'weekly'"):
        job_fabric_view(job, now=now, resolution="weekly")


def test_auto_reads_the_finest_stored_resolution_within_the_bound(aligned):
    """Per-minute rollups stored beside the raw sweeps: ``auto`` reads raw while its steps fit
    the bound, the rollups when they do not; ``minute`` reads them whatever the bound."""
    c, job, begin, hca = aligned
    rows = []
    for m in range(2):  # rollups with their own values (7 + m GB/s): which one was read shows
        entries = []
        for _near, far in hca:
            entries.append((far.pk, (2.0e9, (7 + m) * 1.0e9, 3.0e5, 5, 0)))
        rows += build_chunks(c.fabric.pk, begin + 60 * m, sorted(entries), Resolution.MINUTE)
    CounterChunk.objects.bulk_create(rows)
    now = job.started_at + timedelta(seconds=120)

    view = job_fabric_view(job, now=now)  # 12 raw steps: within MAX_STEPS
    assert view["resolution"]["read"] == "raw" and not view["resolution"]["downsampled"]
    assert len(view["totals"]["hca"]["series"]["t"]) == 12

    view = job_fabric_view(job, now=now, max_steps=5)  # 12 raw steps > 5 ≥ 2 per-minute ones
    assert view["resolution"] == {
        "asked": "auto", "read": "minute", "step_s": 60, "downsampled": False, "max_steps": 5,
    }  # fmt: skip
    for s in _hca_series(view, hca):
        assert s["t"] == [begin, begin + 60] and s["resolution"] == "minute"
        assert s["xmit_bytes_per_s"] == pytest.approx([7.0e9, 8.0e9], rel=1e-4)
        assert s["errors"] == [5, 5]
    total = view["totals"]["hca"]["series"]
    assert total["xmit_bytes_per_s"] == pytest.approx([14.0e9, 16.0e9], rel=1e-4)
    assert total["rcv_bytes_per_s"] == pytest.approx([4.0e9, 4.0e9], rel=1e-4)
    assert total["errors"] == [10, 10]

    assert job_fabric_view(job, now=now, resolution="minute", max_steps=1)["resolution"]["read"] == "minute"


def test_fabric_api_takes_a_resolution_and_refuses_an_unknown_one(aligned, client_for):
    c, job, begin, hca = aligned
    admin = client_for("admin")
    url = f"/api/scheduler/jobs/{job.pk}/fabric/"
    bad = admin.get(url, {"series": "totals", "resolution": "weekly"})
    assert bad.status_code == 400
    assert bad.json() == {"resolution": ["unknown 'weekly': use auto, raw, minute, hour"]}
    got = admin.get(url, {"series": "totals", "resolution": "raw"}).json()
    assert got["resolution"]["read"] == "raw" and got["resolution"]["max_steps"] is None
    assert len(got["totals"]["hca"]["series"]["t"]) == 12 and "series" not in got["links"][0]
    auto = admin.get(url, {"series": "totals"}).json()
    assert auto["resolution"]["asked"] == "auto" and auto["resolution"]["max_steps"] == MAX_STEPS
    schema = admin.get("/api/schema/", {"format": "json"}).json()
    params = {p["name"]: p for p in schema["paths"]["/api/scheduler/jobs/{id}/fabric/"]["get"]["parameters"]}
    assert sorted(params["resolution"]["schema"]["enum"]) == ["auto", "hour", "minute", "raw"]
    assert "at most 720 time steps" in params["resolution"]["description"]
