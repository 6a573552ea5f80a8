"""A degraded job where the admin acts on it (issue 24 §3-4): the rebalancer's dry run proposes
what the job's ``on_fault`` does (replace in the same unit, or requeue; for ``notify`` the
replacement as the admin's option, applied through the scheduler's own replacement), its
reports name the alarms' real cause; rails are numbered as the fabric names the HCAs
(``mlx5_2`` is rail 2) in every message, field and page; the job page lists a pulled or vanished
HCA, marked down, with its alarm."""

from __future__ import annotations

import pytest
from django.db.models import Q
from django.utils import timezone

from events.choices import AlarmState
from events.models import Alarm, Event
from fabric.keys import link_key
from fabric.models import Link, Node
from fabric.services.ingest import import_topology_text
from lab import netgen
from pools.choices import GpuState
from pools.lab import seed_lab_gpus
from pools.models import Gpu, Pool, Tenant
from scheduler.choices import JobState
from scheduler.models import Job, JobLink
from scheduler.services import faults, joblinks
from scheduler.services.queue import JobSpec, run_pass, start, submit
from scheduler.services.rebalance import run_rebalance
from scheduler.services.state import alarm_causes, current_locality
from tests.support.jobs import gpu_cluster
from tests.support.routes import min_hop_routes


@pytest.fixture
def cluster(db):
    return gpu_cluster(2, 3, 8, name="rfault")  # host001-003 on leaf-01, host004-006 on leaf-02


@pytest.fixture
def operator(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "pw"))
    return client


def running(pool, name: str, hosts: int = 1, **kw) -> Job:
    job = submit(JobSpec(name=name, pool_id=pool.pk, count=8 * hosts, gpus_per_host=8, **kw))
    run_pass()
    start(job.pk)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    return job


def pull(fabric, hca_name: str) -> tuple[Alarm, Link]:
    """The open ``link.down`` alarm the alarm engine raises for the cable of HCA ``hca_name``."""
    link = Link.objects.select_related("port_a__node", "port_b__node").get(
        Q(port_a__node__name=hca_name) | Q(port_b__node__name=hca_name), fabric=fabric
    )
    a, b = link.port_a, link.port_b
    now = timezone.now()
    alarm = Alarm.objects.create(
        fabric=fabric, code="link.down", severity="critical", category="topology", object_type="link",
        object_key=link_key((a.node.node_guid, a.port_num), (b.node.node_guid, b.port_num)),
        object_repr=str(link), message="link down", first_seen=now, last_seen=now,
    )  # fmt: skip
    return alarm, link


def degrade(cluster, job: Job, on_fault: str) -> str:
    """Pull the job's host's HCA cable; the job is degraded (notify), then given ``on_fault``."""
    (host,) = job.placement
    pull(cluster.fabric, f"{host} mlx5_0")
    faults.evaluate([job.pk])
    Job.objects.filter(pk=job.pk).update(on_fault=on_fault)
    job.refresh_from_db()
    assert job.state == JobState.DEGRADED
    return host


def unit_free_hosts(cluster, host: str, busy: set[str]) -> list[str]:
    loc = current_locality()
    unit = loc.hosts[host].unit
    return sorted(h for h, s in loc.hosts.items() if s.unit == unit and h not in busy)


def test_dry_run_proposes_a_replacement_for_a_notify_job_and_the_admin_applies_it(cluster, operator):
    job = running(cluster.pool, "llm", on_fault="notify")
    host = degrade(cluster, job, "notify")
    busy = set(Job.objects.exclude(placement={}).values_list("placement", flat=True).first())
    pick = unit_free_hosts(cluster, host, busy)[0]  # every free host has 8 GPUs: the first by name
    leaf = current_locality().domains[current_locality().hosts[host].unit].name

    r = operator.post("/api/scheduler/rebalance/", {"dry_run": True}, content_type="application/json")
    (a,) = [a for a in r.json()["actions"] if a["job"] == job.pk]
    assert (a["kind"], a["label"], a["execute"], a["outcome"]) == (
        "replace",
        "replace (admin option)",
        False,
        "proposed",
    )
    assert a["before"] == {host: 8} and a["placed"] == {pick: 8}
    assert (
        f"its on_fault is notify (it keeps running degraded); admin option: replace {host} by {pick} in {leaf}"
        in a["reason"]
    )
    assert f"{host}: HCA link of rail 0 down" in a["reason"]  # the cause, as the fault says it
    assert a["details"]["apply"] == f"/api/scheduler/jobs/{job.pk}/replace/"
    # the real run does not take an admin's option
    run_rebalance(dry_run=False)
    job.refresh_from_db()
    assert job.state == JobState.DEGRADED and job.placement == {host: 8}

    got = operator.post(a["details"]["apply"], content_type="application/json")
    assert got.status_code == 200, got.content
    job.refresh_from_db()
    assert job.placement == {pick: 8} and job.faults == [] and job.state == JobState.PLACED
    ev = Event.objects.get(code="job.replaced", object_key=str(job.pk))
    assert (
        ev.details["failed"] == [host]
        and ev.details["replacements"] == [pick]
        and ev.details["by"] == "admin"
    )
    # nothing more to replace: a 409 naming why, and the dry run proposes nothing for it
    again = operator.post(a["details"]["apply"], content_type="application/json")
    assert again.status_code == 409 and "nothing to replace" in again.json()["detail"]
    assert [x for x in run_rebalance(dry_run=True)["actions"] if x["job"] == job.pk] == []


def test_replace_and_requeue_policies_are_proposed_and_taken_by_a_real_run(cluster):
    rep = running(cluster.pool, "rep")
    req = running(cluster.pool, "req")
    h_rep = degrade(cluster, rep, "replace")
    h_req = degrade(cluster, req, "requeue")
    busy = {h_rep, h_req}
    dry = {a["job"]: a for a in run_rebalance(dry_run=True)["actions"]}
    a = dry[rep.pk]
    pick = a["placed"]
    (new,) = pick
    assert (a["kind"], a["execute"], a["outcome"]) == ("replace", True, "would execute")
    assert new in unit_free_hosts(cluster, h_rep, busy) and pick[new] == 8
    assert f"its on_fault is replace: replace {h_rep} by {new}" in a["reason"]
    b = dry[req.pk]
    assert (b["kind"], b["label"], b["execute"], b["outcome"]) == (
        "requeue",
        "requeue",
        True,
        "would execute",
    )
    assert "its on_fault is requeue: release its GPUs and queue it again" in b["reason"]

    real = {a["job"]: a for a in run_rebalance(dry_run=False)["actions"]}
    assert real[rep.pk]["outcome"] == "done" and real[req.pk]["outcome"] == "done"
    rep.refresh_from_db()
    req.refresh_from_db()
    assert rep.placement == pick and rep.faults == []
    assert Event.objects.get(code="job.replaced", object_key=str(rep.pk)).details["by"] == "rebalance"
    assert req.state == JobState.PENDING and req.allocation_id is None or req.state == JobState.PENDING


def test_no_healthy_host_in_the_unit_proposes_a_requeue(cluster):
    job = running(cluster.pool, "a")
    host = degrade(cluster, job, "notify")
    # the rest of its leaf drained by the admin: no GPU there to take
    loc = current_locality()
    others = unit_free_hosts(cluster, host, {host})
    assert len(others) == 2
    Gpu.objects.filter(host__name__in=others).update(state=GpuState.DRAINED)
    (a,) = [a for a in run_rebalance(dry_run=True)["actions"] if a["job"] == job.pk]
    assert (a["kind"], a["label"], a["execute"]) == ("requeue", "requeue (admin option)", False)
    assert (
        f"no healthy host of {loc.domains[loc.hosts[host].unit].name} has 8 free GPUs to replace {host}"
        in a["reason"]
    )


def test_a_report_on_symbol_errors_is_not_called_congested(cluster):
    job = running(cluster.pool, "train")
    (host,) = job.placement
    # a symbol-error alarm on the job's HCA link (not congestion): the report names it so
    ca = Node.objects.get(fabric=cluster.fabric, name=f"{host} mlx5_0")
    link = Link.objects.select_related("port_a__node", "port_b__node").get(
        Q(port_a__node=ca) | Q(port_b__node=ca)
    )
    port = link.port_a if link.port_a.node_id != ca.pk else link.port_b  # the leaf's port
    now = timezone.now()
    Alarm.objects.create(
        fabric=cluster.fabric, code="port.symbol_errors", severity="warning", category="errors",
        object_type="port", object_key=f"{port.node.node_guid}/{port.port_num}", object_repr=str(port),
        message=f"SymbolErrorCounter rising on {port}", port=port, first_seen=now, last_seen=now,
        details={"value": 30, "threshold": 10},
    )  # fmt: skip
    (a,) = [a for a in run_rebalance(dry_run=True)["actions"] if a["job"] == job.pk]
    assert a["kind"] == "congested" and a["label"] == "on links with symbol errors"
    assert "runs over HCA links with symbol errors alarms" in a["reason"] and "congest" not in a["reason"]
    assert a["details"]["alarms"] == ["port.symbol_errors"]
    assert alarm_causes(["port.link_downed", "port.congestion", "port.rcv_errors"]) == (
        "congestion, receive errors and link flaps"
    )


@pytest.fixture
def rails(db):
    """Four hosts of 4 HCAs each (``host001 mlx5_0``…``mlx5_3``, one rail leaf per HCA index)."""
    fabric = import_topology_text(
        "rails", netgen.rail_pod(4, rails=4, spines=2, speed="HDR"), filename="r.topo"
    ).fabric
    seed_lab_gpus(fabric, 8)
    tenant = Tenant.objects.create(name="t-rails", contacts=["ops@rails.example"])
    pool = Pool.objects.create(name="p-rails", tenant=tenant, fabric=fabric)
    min_hop_routes(fabric)
    return fabric, pool


def test_rails_are_numbered_as_the_fabric_names_the_hcas_everywhere(rails, operator):
    fabric, pool = rails
    job = running(pool, "ring", hosts=2, on_fault="notify")
    joblinks.refresh([job.pk])
    assert set(JobLink.objects.filter(job=job).values_list("rail", flat=True)) == {0, 1, 2, 3}
    host = sorted(job.placement)[0]
    alarm, link = pull(fabric, f"{host} mlx5_2")
    faults.evaluate([job.pk])
    job.refresh_from_db()
    (f,) = job.faults
    assert (f["code"], f["host"], f["details"]["rail"], f["details"]["hca"]) == (
        "hca_link_down",
        host,
        2,
        f"{host} mlx5_2",
    )
    assert f"{host}: HCA link of rail 2 down ({host} mlx5_2 port 1" in f["message"]
    api = operator.get(f"/api/scheduler/jobs/{job.pk}/").json()
    assert api["faults"][0]["details"]["rail"] == 2
    links = operator.get(f"/api/scheduler/jobs/{job.pk}/links/").json()["links"]
    ca = Node.objects.get(fabric=fabric, name=f"{host} mlx5_2")
    (own,) = [r for r in links if r["port_key"] == f"{ca.node_guid}/1"]  # its uplink: rail 2's traffic only
    assert own["rails"] == [2]
    page = operator.get(f"/scheduler/jobs/{job.pk}/").content.decode()
    assert f"{host}: HCA link of rail 2 down" in page
    # the link table is drawn by the page's script from the fabric view (tests/browser/test_job_page.py)
    view = operator.get(f"/api/scheduler/jobs/{job.pk}/fabric/?series=totals").json()
    assert [e["rail"] for e in view["links"] if e["kind"] == "hca" and e["host"] == host] == [0, 1, 2, 3]

    # the cable pulled for good: discovery drops its link row. The job page still lists that HCA,
    # marked down, with the alarm; the rest of its HCAs as before
    link.delete()
    view = operator.get(f"/api/scheduler/jobs/{job.pk}/fabric/").json()
    (down,) = view["hcas_down"]
    assert (down["host"], down["hca"], down["rail"], down["gone"]) == (host, f"{host} mlx5_2", 2, False)
    assert down["alarm"]["id"] == alarm.pk and down["alarm"]["code"] == "link.down"
    assert down["guid"] == ca.node_guid
    assert (
        sum(1 for e in view["links"] if e["kind"] == "hca") == 7
    )  # 2 hosts × 4 HCAs: 7 links and the pulled one

    # the HCA vanished from the fabric (its only cable gone: the node row deleted, node.removed open)
    guid, name = ca.node_guid, ca.name
    ca.delete()
    now = timezone.now()
    removed = Alarm.objects.create(
        fabric=fabric, code="node.removed", severity="critical", category="topology", object_type="node",
        object_key=guid, object_repr=name, message=f"{name} is gone from the fabric", first_seen=now, last_seen=now,
    )  # fmt: skip
    alarm.state = AlarmState.CLEARED
    alarm.cleared_at = now
    alarm.save(update_fields=["state", "cleared_at"])
    view = operator.get(f"/api/scheduler/jobs/{job.pk}/fabric/").json()
    (down,) = view["hcas_down"]
    assert (down["hca"], down["rail"], down["gone"], down["alarm"]["id"]) == (name, 2, True, removed.pk)
    (why,) = faults.job_reasons(faults.job_scopes([job]))[job.pk]
    assert (why.code, why.details["rail"], why.details["hca"]) == ("hca_link_down", 2, name)
    assert why.message == f"{host}: HCA of rail 2 gone from the fabric ({name}: its cable pulled?)"
