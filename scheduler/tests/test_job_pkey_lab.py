"""Job PKeys applied by the lab's real OpenSM (issue 12, "Lab end to end: … job PKey applied to
the chosen hosts by the lab's OpenSM, job finishes"): jobs of a pool with per-job isolation are
placed by the passes their submits trigger; each job's PKey shows up (``smpquery pkeys``, read by
the test itself) on the HCA ports of its hosts only, and leaves them when the job finishes. The
applies are the ones the placements and ends queue (``fabric.tasks.apply_partitions_task``, run
on commit here)."""

from __future__ import annotations

import pytest

from fabric.choices import ApplyState, NodeType
from fabric.models import Fabric, Host, Partition, Port
from fabric.parsers.partitions import parse_smpquery_pkeys
from fabric.services.discovery import discover
from lab import netgen
from pools.lab import seed_lab_gpus
from pools.models import Pool, Tenant
from scheduler.choices import JobState
from scheduler.models import Job
from scheduler.services.queue import JobSpec, finish, run_pass, submit
from tests.support.waits import wait_for

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]


def _guid(fabric: Fabric, host: str) -> str:
    (guid,) = (
        Port.objects.filter(node__host__name=host, node__fabric=fabric, node__node_type=NodeType.CA)
        .exclude(port_guid="")
        .values_list("port_guid", flat=True)
    )
    return guid


def test_job_pkeys_on_the_chosen_hosts_only_and_gone_when_the_jobs_finish(lab_factory):
    lab = lab_factory(netgen.fat_tree_2level(2, 1, 4))  # 8 single-HCA hosts
    fabric = Fabric.objects.create(
        name="jobpk",
        tool_env=dict(lab.tool_env),
        partitions_path=str(lab.partitions_path),
        sm_pid_file=str(lab.sm_pid_file),
    )
    discover(fabric)
    seed_lab_gpus(fabric, 8)
    pool = Pool.objects.create(
        name="iso", tenant=Tenant.objects.create(name="t-iso"), fabric=fabric, job_isolation=True,
        job_pkey_min=0x0B00, job_pkey_max=0x0B0F,
    )  # fmt: skip
    guids = {h: _guid(fabric, h) for h in Host.objects.filter(fabric=fabric).values_list("name", flat=True)}
    assert len(guids) == 8

    def pkeys(host: str) -> dict[int, str]:
        table = parse_smpquery_pkeys(lab.run(["smpquery", "pkeys", "-G", guids[host]]).stdout)
        return {k: m for k in range(0x0B00, 0x0B10) if (m := table.membership(k))}

    offset = lab.sm_log_size()
    a = submit(JobSpec(name="a", pool_id=pool.pk, count=16, gpus_per_host=8))
    b = submit(JobSpec(name="b", pool_id=pool.pk, count=8, gpus_per_host=8))
    run_pass()  # the submits' own passes placed them already: nothing left to do
    a, b = Job.objects.get(pk=a.pk), Job.objects.get(pk=b.pk)
    assert a.state == b.state == JobState.PLACED, (a.decision, b.decision)
    assert (a.pkey, b.pkey) == (0x0B00, 0x0B01) and len(a.placement) == 2 and len(b.placement) == 1
    expected = {h: {} for h in guids}
    for job in (a, b):
        for h in job.placement:
            expected[h] = {job.pkey: "full"}
    wait_for(lambda: {h: pkeys(h) for h in guids} == expected, 60, "each job's PKey on its hosts' ports only")
    assert lab.partition_errors(offset) == []
    assert f"{guids[next(iter(a.placement))]}=full" in lab.partitions_path.read_text()
    wait_for(
        lambda: set(Partition.objects.filter(name__startswith="job_").values_list("applied_state", flat=True))
        == {ApplyState.APPLIED},
        60,
        "the job partitions recorded applied",
    )

    finish(a.pk, reason="exit 0")
    for h in a.placement:
        expected[h] = {}
    wait_for(lambda: {h: pkeys(h) for h in guids} == expected, 60, "job a's PKey gone, job b's still there")
    finish(b.pk, reason="exit 0")
    wait_for(lambda: all(pkeys(h) == {} for h in guids), 60, "no job PKey left on any port")
    assert "job_" not in lab.partitions_path.read_text()
    assert not Partition.objects.filter(name__startswith="job_").exists()
