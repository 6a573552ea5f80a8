"""A running job whose HCA's switch port is isolated on purpose (issue 26 §4 with issue 24's job
faults): the isolation writes no ``link.down`` (``fabric.services.isolation``), so the job went
on "running" over a link that was down. It is degraded with the isolation as its cause (who, from
where), and running again when the port is enabled."""

from __future__ import annotations

import pytest

from events.engine import process_pending_events
from fabric.choices import PortState
from fabric.services.ingest import PortObservation, apply_port_states
from fabric.services.isolation import IsolationTarget, set_isolated
from scheduler.choices import JobState
from scheduler.services import faults
from scheduler.services.queue import JobSpec, run_pass, start, submit
from tests.support.jobs import gpu_cluster, host_link


@pytest.fixture
def cluster(db):
    return gpu_cluster(2, 2, 8, name="isol")


def test_isolating_the_switch_port_of_a_jobs_hca_degrades_the_job_until_enabled(cluster, django_user_model):
    ops = django_user_model.objects.create_user("ops")
    job = submit(JobSpec(name="train", pool_id=cluster.pool.pk, count=8, gpus_per_host=8))
    run_pass()
    start(job.pk)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    (host,) = job.placement
    link = host_link(cluster, host)
    switch, hca = (link.port_a, link.port_b) if link.port_b.node.host_id else (link.port_b, link.port_a)
    target = IsolationTarget(
        node=switch.node,
        port_num=switch.port_num,
        peer=f"{hca.node.name} {hca.port_num}",
        peer_guid=hca.node.node_guid,
        peer_port_num=hca.port_num,
    )
    set_isolated(cluster.fabric, [target], isolated=True, via="page", user=ops)
    key = (switch.node.node_guid, switch.port_num)
    apply_port_states(cluster.fabric, {key: PortObservation(PortState.DOWN, 3)}, note="disable")
    process_pending_events(cluster.fabric.pk)
    assert "port.isolated" in faults.trigger_codes()

    assert faults.evaluate()["degraded"] == 1
    job.refresh_from_db()
    assert job.state == JobState.DEGRADED
    (reason,) = job.faults
    assert reason["code"] == "hca_link_down" and reason["host"] == host
    assert reason["object_key"] == hca.node.node_guid
    shown = f"{switch.node.name} [{switch.port_num}]"
    assert reason["details"]["isolated"] == shown and reason["details"]["by"] == "ops"
    assert f"{host}: HCA link of rail 0 down: {shown} isolated by ops from the port page at " in job.reason

    set_isolated(cluster.fabric, [target], isolated=False, via="page", user=ops)
    assert faults.evaluate()["recovered"] == 1
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.faults == []
