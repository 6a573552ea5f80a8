"""A job knows when its fabric fails (``scheduler.services.faults``): degraded with machine-readable
causes from the alarm engine's alarms and the partitions' drift, recovered when they clear, the
tenant's contacts mailed through the alarm engine's outbox, and ``on_fault`` requeue / replace
(the replacement inside the scheduling pass, before new jobs take hosts)."""

from __future__ import annotations

import pytest
from django.db.models import Count
from django.utils import timezone

from events.engine import process_pending_events
from events.models import Event, Notification
from fabric.models import Partition, Port
from pools.models import AllocationItem, Gpu
from scheduler.choices import JobState
from scheduler.models import Job
from scheduler.services import faults
from scheduler.services.queue import JobConflict, JobSpec, finish, run_pass, start, submit
from tests.support.jobs import gpu_cluster, host_link, link_down, open_alarm


@pytest.fixture
def cluster(db):
    c = gpu_cluster(2, 2, 8, name="faults")  # host001-002 on leaf-01, host003-004 on leaf-02
    c.tenant.contacts = ["ops@tenant.example", "lead@tenant.example"]
    c.tenant.save(update_fields=["contacts"])
    return c


def running_job(cluster, count=8, **kw) -> Job:
    job = submit(
        JobSpec(name=kw.pop("name", "train"), pool_id=cluster.pool.pk, count=count, gpus_per_host=8, **kw)
    )
    run_pass()
    start(job.pk)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    return job


def held(job: Job) -> set[str]:
    return set(
        AllocationItem.objects.filter(allocation_id=job.allocation_id, active=True).values_list(
            "gpu__host__name", flat=True
        )
    )


def test_an_hca_link_down_degrades_the_job_with_its_cause_mails_the_tenant_and_clearing_recovers_it(cluster):
    job = running_job(cluster)
    (host,) = job.placement
    alarm = link_down(cluster, host)
    other = running_job(cluster, name="other")  # on another host: not touched
    assert faults.evaluate() == {
        "jobs": 2, "degraded": 1, "recovered": 0, "updated": 0, "requeued": 0, "replace_wanted": 0,
    }  # fmt: skip
    job.refresh_from_db()
    other.refresh_from_db()
    assert other.state == JobState.RUNNING and other.faults == []
    assert job.state == JobState.DEGRADED and job.degraded_at is not None and job.allocation_id
    (reason,) = job.faults
    hca = host_link(cluster, host)
    ca = hca.port_a if hca.port_a.node.host_id else hca.port_b
    assert reason["code"] == "hca_link_down" and reason["host"] == host
    assert reason["object_type"] == "node" and reason["object_key"] == ca.node.node_guid
    # rails as the fabric names the HCAs: host001 mlx5_0 is rail 0 (faults.rails)
    assert ca.node.name.endswith("mlx5_0")
    assert reason["details"]["rail"] == 0 and reason["details"]["port"] == ca.port_num
    assert reason["details"]["alarm"] == alarm.pk
    assert f"{host}: HCA link of rail 0 down ({ca.node.name} port" in job.reason
    ev = Event.objects.get(code="job.degraded", object_key=str(job.pk))
    assert ev.details["faults"][0]["code"] == "hca_link_down"
    assert ev.details["notify"] == ["ops@tenant.example", "lead@tenant.example"]
    # the alarm engine queued the tenant's mail (evaluate applied the job events at once)
    assert sorted(Notification.objects.filter(event=ev).values_list("recipient", flat=True)) == [
        "lead@tenant.example", "ops@tenant.example",
    ]  # fmt: skip
    with pytest.raises(JobConflict):  # a degraded job does not "start" again
        start(job.pk)
    # nothing changed: nothing written again
    assert faults.evaluate()["degraded"] == 0
    assert Event.objects.filter(code="job.degraded").count() == 1
    # the cable is back: the alarm cleared, the job runs again, holding the same GPUs
    alarm.state, alarm.cleared_at = "cleared", timezone.now()
    alarm.save()
    assert faults.evaluate()["recovered"] == 1
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.faults == [] and job.degraded_at is None
    assert held(job) == {host}
    assert Event.objects.filter(code="job.recovered", object_key=str(job.pk)).count() == 1
    assert list(job.decisions.order_by("id").values_list("code", flat=True))[-2:] == ["degraded", "recovered"]
    finish(job.pk)  # and ends as any running job
    job.refresh_from_db()
    assert job.state == JobState.COMPLETED


def test_a_host_with_every_hca_gone_is_host_removed_and_a_job_failing_mails_the_tenant(cluster, client_for):
    job = running_job(cluster)
    (host,) = job.placement
    link = host_link(cluster, host)
    ca = link.port_a.node if link.port_a.node.host_id else link.port_b.node
    guid, name = ca.node_guid, ca.name
    ca.delete()  # the discovery no longer sees it: the row goes, its node.removed alarm names it
    open_alarm(cluster, "node.removed", guid, name, type="node")
    faults.evaluate()
    job.refresh_from_db()
    assert job.state == JobState.DEGRADED
    assert [(f["code"], f["object_key"], f["host"]) for f in job.faults] == [("host_removed", host, host)]
    finish(job.pk, ok=False, reason="NCCL timeout")
    ev = Event.objects.get(code="job.failed", object_key=str(job.pk))
    assert ev.details["notify"] == ["ops@tenant.example", "lead@tenant.example"]
    # the ended job's page: its faults as a record (not "keeps running"), the timeline's degraded
    # step names them, not the end's reason (it said "degraded — NCCL timeout")
    page = client_for("admin").get(f"/scheduler/jobs/{job.pk}/").content.decode()
    assert "Its fabric failed under it while it ran" in page and "The job keeps running" not in page
    step = page.split('data-step="degraded"')[1].split("</li>")[0]
    assert f"{host}: every HCA is gone from the fabric" in step and "NCCL timeout" not in step
    assert "NCCL timeout" in page.split('data-step="failed"')[1].split("</li>")[0]


def test_on_fault_requeue_frees_the_gpus_and_keeps_submit_time_and_priority(cluster):
    cluster.pool.on_fault = "requeue"
    cluster.pool.save(update_fields=["on_fault"])
    job = running_job(cluster, priority_class="high")
    submitted, (host,) = job.submitted_at, job.placement
    link_down(cluster, host)
    assert faults.evaluate()["requeued"] == 1
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.submitted_at == submitted and job.priority_class == "high"
    assert job.faults == [] and job.placement == {} and "fabric fault" in job.reason
    assert not AllocationItem.objects.filter(allocation_id=job.allocation_id, active=True).exists()
    assert Gpu.objects.filter(host__name=host, state="free").count() == 8
    codes = list(Event.objects.filter(object_key=str(job.pk)).order_by("id").values_list("code", flat=True))
    assert codes[-3:] == ["job.degraded", "job.preempted", "job.requeued"]
    process_pending_events(cluster.fabric.pk)
    requeued = Event.objects.get(code="job.requeued", object_key=str(job.pk))
    assert Notification.objects.filter(event=requeued, recipient="ops@tenant.example").exists()
    # the tenant's mail says what happened (the fault) and what happens next (issue 26 §4)
    assert "requeued: fabric fault (" in requeued.message and host in requeued.message, requeued.message
    assert "pending again in pool" in requeued.message and "high priority kept" in requeued.message
    assert "places it again as soon as 8 GPUs fit" in requeued.message
    # the next pass places it again, not on the host whose link is down
    run_pass()
    job.refresh_from_db()
    assert job.state == JobState.PLACED and host not in job.placement


def test_on_fault_replace_swaps_the_failed_host_inside_the_pass_before_new_jobs(cluster):
    job = running_job(cluster, count=8, on_fault="replace")
    (host,) = job.placement
    unit_mate = {"host001": "host002", "host002": "host001", "host003": "host004", "host004": "host003"}[host]
    link_down(cluster, host)
    # a new job that would fit on the unit mate waits in the queue meanwhile
    newcomer = submit(JobSpec(name="new", pool_id=cluster.pool.pk, count=8, gpus_per_host=8, tier="leaf",
                              tier_mode="required"))  # fmt: skip
    # the evaluation asks for a pass (run at once here: eager tasks) that replaces, then places
    assert faults.evaluate()["replace_wanted"] == 1
    job.refresh_from_db()
    newcomer.refresh_from_db()
    assert job.state == JobState.PLACED and job.placement == {unit_mate: 8} and held(job) == {unit_mate}
    assert job.faults == [] and job.preemptions == 0
    assert newcomer.state == JobState.PLACED and unit_mate not in newcomer.placement
    assert run_pass()["replaced"] == 0  # done once
    assert Event.objects.filter(code="job.replaced", object_key=str(job.pk)).count() == 1
    replaced = Event.objects.get(code="job.replaced", object_key=str(job.pk))
    assert replaced.message.startswith(f"{job}: {host} lost its fabric (") and f"taken on {unit_mate}" in (
        replaced.message
    ), replaced.message
    assert "starts again there" in replaced.message
    # the tenant's mail queued at once (the pass applied its job events)
    assert (
        Notification.objects.filter(event__code="job.replaced", recipient="ops@tenant.example").count() == 1
    )
    twice = (
        AllocationItem.objects.filter(active=True)
        .values("gpu_id")
        .annotate(n=Count("pk"))
        .filter(n__gt=1)
        .count()
    )
    assert twice == 0


def test_replace_finds_the_unit_of_a_host_whose_only_cable_is_gone(cluster):
    """A single-HCA host whose cable was pulled has no link left once the SM's notice removed it:
    it is no longer in the locality tree. Its unit is the leaf its pulled cable's alarm names, so
    it is still replaced there (it was requeued: "no healthy host of its unit")."""
    from scheduler.services import state

    job = running_job(cluster, count=8, on_fault="replace")
    (host,) = job.placement
    unit_mate = {"host001": "host002", "host002": "host001", "host003": "host004", "host004": "host003"}[host]
    link_down(cluster, host)
    host_link(cluster, host).delete()  # what the notice listener stores for a pulled cable
    state.forget_locality()
    assert host not in state.current_locality().hosts
    faults.evaluate()
    job.refresh_from_db()
    assert job.state == JobState.PLACED and job.placement == {unit_mate: 8} and job.preemptions == 0, (
        job.state, job.placement, job.reason,
    )  # fmt: skip


def test_replace_without_a_healthy_host_in_the_unit_requeues(cluster):
    job = running_job(cluster, count=8, on_fault="replace")
    (host,) = job.placement
    unit_mate = {"host001": "host002", "host002": "host001", "host003": "host004", "host004": "host003"}[host]
    link_down(cluster, host)
    link_down(cluster, unit_mate)  # the only other host of the unit is down too
    faults.evaluate()  # its pass finds no host for it in the unit: requeued
    job.refresh_from_db()
    assert job.state in (JobState.PENDING, JobState.PLACED) and job.preemptions == 1
    assert host not in (job.placement or {}) and unit_mate not in (job.placement or {})


def test_pkey_drift_and_congestion_degrade_without_requeueing(cluster):
    cluster.pool.on_fault = "requeue"
    cluster.pool.save(update_fields=["on_fault"])
    job = running_job(cluster)
    (host,) = job.placement
    link = host_link(cluster, host)
    ca_port = link.port_a if link.port_a.node.host_id else link.port_b
    leaf_port = link.port_b if ca_port is link.port_a else link.port_a
    Port.objects.filter(pk=ca_port.pk).update(port_guid="0x0002c90300000a01")
    part = Partition.objects.create(fabric=cluster.fabric, name="p-faults", pkey=0x0101,
                                    drift=[{"guid": "0x0002c90300000a01", "expected": "full", "seen": "absent"},
                                           {"guid": "0x0002c9030000ffff", "expected": "full", "seen": "absent"}])  # fmt: skip
    cluster.pool.partition = part
    cluster.pool.save(update_fields=["partition"])
    open_alarm(cluster, "port.congestion", f"{leaf_port.node.node_guid}/{leaf_port.port_num}", "leaf port",
               type="port", port=leaf_port)  # fmt: skip
    faults.evaluate()
    job.refresh_from_db()
    assert job.state == JobState.DEGRADED  # degraded and told, not requeued: the host still works
    got = {(f["code"], f["object_key"]) for f in job.faults}
    assert got == {("pkey_drift", "0x0002c90300000a01"),
                   ("path_congested", f"{leaf_port.node.node_guid}/{leaf_port.port_num}")}  # fmt: skip
    drift = next(f for f in job.faults if f["code"] == "pkey_drift")
    assert drift["details"]["pkey"] == "0x0101" and drift["details"]["seen"] == "absent"
    congested = next(f for f in job.faults if f["code"] == "path_congested")
    assert congested["details"]["approximation"] == "hca+leaf-uplinks"


def test_a_path_source_plugs_in_and_a_failing_source_hides_no_other(cluster, monkeypatch):
    job = running_job(cluster)

    class Paths:
        name, codes, triggers = "paths", ("path_link_down",), ("link.down",)

        def reasons(self, scopes):
            return {s.job_id: [faults.Reason("path_link_down", "link", "spine-1/3-leaf-2/9", "spine link down")]
                    for s in scopes}  # fmt: skip

    class Broken:
        name, codes, triggers = "broken", ("path_congested",), ()

        def reasons(self, scopes):
            raise RuntimeError("boom")

    monkeypatch.setattr(faults, "SOURCES", dict(faults.SOURCES))
    faults.register_source(Paths())
    faults.register_source(Broken())
    with pytest.raises(ValueError, match="unknown codes"):
        faults.register_source(type("Bad", (), {"name": "bad", "codes": ("nope",), "triggers": ()})())
    faults.evaluate()
    job.refresh_from_db()
    assert job.state == JobState.DEGRADED and [f["code"] for f in job.faults] == ["path_link_down"]
    assert "link.down" in faults.trigger_codes() and "partition.drift" in faults.trigger_codes()


def test_pages_show_the_degraded_job_its_alarm_and_the_host_not_free(cluster, client_for):
    job = running_job(cluster)
    (host,) = job.placement
    hca = host_link(cluster, host)
    alarm = link_down(cluster, host)
    hca.delete()  # the pulled cable's link row goes (the ingest); its alarm names it by key
    faults.evaluate()
    admin = client_for("admin")
    page = admin.get(f"/scheduler/jobs/{job.pk}/").content.decode()
    assert (
        'data-state="degraded"' in page
        and 'id="job-faults"' in page
        and "hidden" not in page.split('id="job-faults"')[0][-40:]
    )
    assert 'data-code="hca_link_down"' in page and f"{host}: HCA link of rail 0 down" in page
    # the job's alarms list (fetched by the page's script) has the gone link's alarm
    view = admin.get(f"/api/scheduler/jobs/{job.pk}/fabric/?series=totals").json()
    assert alarm.pk in [a["id"] for a in view["alarms"]]
    api = admin.get(f"/api/scheduler/jobs/{job.pk}/").json()
    assert api["state"] == "degraded" and api["faults"][0]["code"] == "hca_link_down"
    assert api["effective_on_fault"] == "notify" and "webhook_secret" not in api
    queue_page = admin.get("/scheduler/?state=degraded").content.decode()
    assert f'data-job="{job.pk}" data-state="degraded"' in queue_page
    # none running now: the filtered list says so (it said "No job holds GPUs." while one did)
    running_page = admin.get("/scheduler/?state=running").content.decode()
    assert "No running job." in running_page and "No job holds GPUs." not in running_page
    host_id = Gpu.objects.filter(host__name=host).values_list("host_id", flat=True).first()
    mate = next(h for h in cluster.hosts if h != host)
    mate_id = Gpu.objects.filter(host__name=mate).values_list("host_id", flat=True).first()
    hp = admin.get(f"/pools/hosts/{host_id}/").content.decode()
    assert 'id="host-faults"' in hp and "HCA link down" in hp
    listing = admin.get(f"/pools/hosts/?fabric={cluster.fabric.pk}").content.decode()
    assert f'data-host="{host}" data-gpus="8" data-free="0" data-unusable="1"' in listing
    assert f'data-host="{mate}" data-gpus="8" data-free="8">' in listing
    assert 'id="host-faults"' not in admin.get(f"/pools/hosts/{mate_id}/").content.decode()
    idle = next(h for h in cluster.hosts if h not in (host, mate))  # no job, a rail down: not "free"
    link_down(cluster, idle)
    listing = admin.get(f"/pools/hosts/?fabric={cluster.fabric.pk}").content.decode()
    row = listing.split(f'data-host="{idle}"')[1].split("</tr>")[0]
    assert 'data-free="8" data-unusable="1"' in row and "0 usable" in row and "8 idle, not schedulable" in row
    idle_id = Gpu.objects.filter(host__name=idle).values_list("host_id", flat=True).first()
    hp = admin.get(f"/pools/hosts/{idle_id}/").content.decode()
    assert "8 idle, not schedulable" in hp and " 8 free" not in hp
