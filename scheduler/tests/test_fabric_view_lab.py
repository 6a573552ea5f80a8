"""The job's fabric view on the fabric lab (ibsim + OpenSM): counters are written only on the
switch port facing one of the job's HCAs (as the lab's traffic player writes them), read by real
sweeps (``telemetry.services.sweep.poll_fabric``); the view's HCA link carries the leaf port's
traffic in the host's directions (out of the host = the leaf's rcv) and the leaf's PortXmitWait
as the HCA-bound congestion, while the HCA port's own counters stayed flat."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from django.db.models import Q

from fabric.models import Fabric, Link, Port
from fabric.services.discovery import discover
from lab import netgen
from pools.lab import seed_lab_gpus
from pools.models import Pool, Tenant
from scheduler.models import Job
from scheduler.services.fabric_view import job_fabric_view
from scheduler.services.queue import JobSpec, submit
from telemetry.services.history import port_series
from telemetry.services.sweep import poll_fabric
from tests.support.waits import wait_for

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]

RCV_WORDS = 2_500_000_000  # 10 GB from the host into the leaf between two sweeps
XMIT_WORDS = 250_000_000  # 1 GB from the leaf to the host
WAIT_TICKS = 200_000


def _next_second(after: float) -> None:
    """Wait until the wall clock is in a later whole second than ``after`` (history rows are per
    whole second: two sweeps in one second would share a row)."""
    wait_for(lambda: int(time.time()) > int(after), 5, "the next whole second")


def test_hca_link_traffic_is_read_at_the_leaf_port(lab_factory):
    lab = lab_factory(netgen.rail_pod(hosts=2, rails=2), timeout=120)
    fabric = Fabric.objects.create(name="fvlab", tool_env=dict(lab.tool_env))
    discover(fabric)
    seed_lab_gpus(fabric, 4)
    pool = Pool.objects.create(name="fv-p", tenant=Tenant.objects.create(name="fv-t"), fabric=fabric)
    job = Job.objects.get(pk=submit(JobSpec(name="fv", pool_id=pool.pk, count=4, gpus_per_host=4)).pk)
    assert job.state == "placed"
    (host,) = job.placement
    hca = Port.objects.select_related("node").get(
        node__fabric=fabric, node__description=f"{host} mlx5_0", port_num=1
    )
    link = Link.objects.select_related("port_a__node", "port_b__node").get(Q(port_a=hca) | Q(port_b=hca))
    leaf = link.port_b if link.port_a_id == hca.pk else link.port_a
    assert leaf.node.node_type == "switch"

    _next_second(job.placed_at.timestamp())
    began = time.time()
    poll_fabric(fabric)  # the baseline
    _next_second(began)
    guid = leaf.node.node_guid
    lab.perf_set(guid, leaf.port_num, "PortCountersExtended.PortRcvData", RCV_WORDS)
    lab.perf_set(guid, leaf.port_num, "PortCountersExtended.PortXmitData", XMIT_WORDS)
    lab.perf_set(guid, leaf.port_num, "PortXmitWait", WAIT_TICKS)
    poll_fabric(fabric)

    job.refresh_from_db()
    view = job_fabric_view(job)
    (e,) = [x for x in view["links"] if x["kind"] == "hca" and x["near"]["id"] == hca.pk]
    assert e["far"]["id"] == leaf.pk and e["traffic_end"] == "far"
    window = (job.placed_at, datetime.fromtimestamp(time.time() + 1, UTC))
    at_leaf, at_hca = port_series(leaf.pk, *window), port_series(hca.pk, *window)
    s = e["series"]
    assert s["t"] == at_leaf["t"] and len(s["t"]) == 2
    # the leaf port's rates, swapped into the host's directions, GB/s while the HCA's are flat
    assert s["xmit_bytes_per_s"][-1] == at_leaf["rcv_bytes_per_s"][-1] > 1e9
    assert s["rcv_bytes_per_s"][-1] == at_leaf["xmit_bytes_per_s"][-1] > 1e8
    assert at_hca["xmit_bytes_per_s"][-1] < 1e6 and at_hca["rcv_bytes_per_s"][-1] < 1e6
    # the HCA-bound congestion is the leaf's PortXmitWait; the HCA never waited
    assert s["congestion_far"][-1] == at_leaf["congestion"][-1] > 0
    assert s["congestion_near"][-1] == at_hca["congestion"][-1] == 0
    assert s["congestion"][-1] == at_leaf["congestion"][-1]
    total = view["totals"]["hca"]["series"]
    assert total["xmit_bytes_per_s"][-1] >= s["xmit_bytes_per_s"][-1]
