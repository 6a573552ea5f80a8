"""The per-job fabric view (``scheduler.services.fabric_view``): a job placed by a real pass on a
fabric imported through the ingest, with counter history stored as the sweep stores it
(``telemetry.services.history.build_chunks`` rows in ``CounterChunk``) for its HCA links and its
unit's uplinks; the view reads back the values written, inside the job's window only, the
congestion of the far end, the errors of both ends, and the alarms of the window."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from events.models import Alarm
from fabric.models import Link, Node
from scheduler.services.fabric_view import job_fabric_view
from scheduler.services.queue import JobSpec, finish, run_pass, start, submit
from scheduler.services.state import current_locality
from telemetry.models import CounterChunk
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
