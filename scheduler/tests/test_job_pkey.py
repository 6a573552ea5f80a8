"""Per-job isolation (issue 12, "Placement … puts the job's hosts into a job PKey when the pool
asks for per-job isolation"): a pass places a job of a pool with ``job_isolation`` in its own
partition of its hosts' CA ports (full membership), with the lowest PKey of the pool's job range
that no partition of the fabric uses; every end of the job deletes it. The OpenSM side is
``test_job_pkey_lab.py``."""

from __future__ import annotations

import pytest

from accounts.models import AuditEntry
from fabric.choices import MemberReason, NodeType
from fabric.models import Partition, Port
from fabric.services.partitions import save_partition
from pools.models import Allocation
from scheduler.choices import JobState
from scheduler.models import Job
from scheduler.services.queue import JobSpec, cancel, finish, run_pass, submit
from tests.support.jobs import gpu_cluster


@pytest.fixture
def cluster(db):
    c = gpu_cluster(2, 2, 8, name="iso")
    c.pool.job_isolation, c.pool.job_pkey_min, c.pool.job_pkey_max = True, 0x6100, 0x6102
    c.pool.save()
    return c


def ca_guids(cluster, hosts) -> list[str]:
    return sorted(
        Port.objects.filter(
            node__fabric=cluster.fabric, node__node_type=NodeType.CA, node__host__name__in=hosts
        )
        .exclude(port_guid="")
        .values_list("port_guid", flat=True)
    )


def placed(cluster, name: str, count: int = 8) -> Job:
    job = submit(JobSpec(name=name, pool_id=cluster.pool.pk, count=count, gpus_per_host=8))
    run_pass()
    job.refresh_from_db()
    assert job.state == JobState.PLACED, job.decision
    return job


def test_each_job_gets_its_own_pkey_of_its_hosts_and_loses_it_when_it_ends(cluster, client_for):
    # a partition already on 0x6100 (another pool's, an imported one): never taken
    save_partition(Partition(fabric=cluster.fabric, name="storage", pkey=0x6100))
    a = placed(cluster, "a")
    b = placed(cluster, "b", 16)
    assert (a.pkey, b.pkey) == (0x6101, 0x6102)
    for job in (a, b):
        part = job.partition
        assert part.name == f"job_{job.pk}" and part.pkey == job.pkey and part.fabric_id == cluster.fabric.pk
        members = list(part.members.order_by("port_guid").values_list("port_guid", "membership", "reason"))
        assert members == [(g, "full", MemberReason.POOL) for g in ca_guids(cluster, job.placement)]
        assert len(members) == len(job.placement) and job.decision["pkey"] == part.pkey_hex
        assert f"own partition job_{job.pk} (PKey {part.pkey_hex})" in job.decision["reasons"][-1]
    assert set(a.placement).isdisjoint(b.placement)
    body = client_for("admin").get(f"/api/scheduler/jobs/{a.pk}/").json()
    assert (body["pkey"], body["pkey_hex"], body["partition"]["pkey_hex"]) == (0x6101, "0x6101", "0x6101")

    # the range is used up: the next job stays pending, holding nothing
    c = submit(JobSpec(name="c", pool_id=cluster.pool.pk, count=8, gpus_per_host=8))
    run_pass()
    c.refresh_from_db()
    assert c.state == JobState.PENDING and c.allocation_id is None and c.partition_id is None
    assert (
        f"every job PKey of 0x6100-0x6102 is used on fabric {cluster.fabric.name}" in c.decision["reasons"][0]
    )
    assert not Allocation.objects.filter(job=c.reference, state="active").exists()

    finish(a.pk, reason="exit 0")
    a.refresh_from_db()
    assert a.state == JobState.COMPLETED and a.partition_id is None and a.pkey == 0x6101
    assert not Partition.objects.filter(name=f"job_{a.pk}").exists()
    assert a.decisions.first().details["removed_pkey"] == "0x6101"
    assert AuditEntry.objects.filter(action="partition.delete", object_repr=f"job_{a.pk} (0x6101)").exists()
    body = client_for("admin").get(f"/api/scheduler/jobs/{a.pk}/").json()
    assert (body["pkey_hex"], body["partition"]) == ("0x6101", None)

    # its PKey is free again: the waiting job gets it at the next pass; a cancel removes it too
    run_pass()
    c.refresh_from_db()
    assert c.state == JobState.PLACED and c.pkey == 0x6101
    cancel(b.pk)
    cancel(c.pk)
    assert not Partition.objects.filter(name__startswith="job_").exists()
    assert list(Partition.objects.values_list("name", flat=True)) == ["storage"]


def test_a_pool_without_isolation_gives_no_partition(cluster):
    cluster.pool.job_isolation = False
    cluster.pool.save()
    job = placed(cluster, "plain")
    assert job.partition_id is None and job.pkey is None and "pkey" not in job.decision
    assert not Partition.objects.exists()


def test_pool_api_takes_the_isolation_option_and_refuses_an_empty_range(cluster, client_for):
    api = client_for("admin")
    url = f"/api/pools/pools/{cluster.pool.pk}/"
    r = api.patch(url, {"job_pkey_min": "0x6200", "job_pkey_max": "0x61ff"}, format="json")
    assert r.status_code == 400 and "0x6200-0x61ff is empty" in r.json()["job_pkey_min"][0]
    r = api.patch(
        url, {"job_isolation": True, "job_pkey_min": "0x6200", "job_pkey_max": "0x62ff"}, format="json"
    )
    assert r.status_code == 200, r.json()
    assert (r.json()["job_isolation"], r.json()["job_pkey_min"], r.json()["job_pkey_max"]) == (
        True,
        0x6200,
        0x62FF,
    )


def test_pool_api_refuses_a_fractional_or_text_number_pkey_naming_the_field(cluster, client_for):
    """A PKey is an integer: 24576.5 was taken as 0x6000 (``int()`` truncates a float) and saved."""
    api = client_for("admin")
    url = f"/api/pools/pools/{cluster.pool.pk}/"
    before = (cluster.pool.job_pkey_min, cluster.pool.job_pkey_max)
    for bad in (24576.5, 1.5, "1.5", "0x6000.0"):
        r = api.patch(url, {"job_pkey_min": bad}, format="json")
        assert r.status_code == 400 and "job_pkey_min" in r.json(), bad
    cluster.pool.refresh_from_db()
    assert (cluster.pool.job_pkey_min, cluster.pool.job_pkey_max) == before
    r = api.patch(url, {"job_pkey_min": 24576.0, "job_pkey_max": 24580}, format="json")
    assert r.status_code == 200 and (r.json()["job_pkey_min"], r.json()["job_pkey_max"]) == (0x6000, 0x6004)


def test_a_requeued_job_loses_its_partition_and_a_moved_one_gets_one_of_its_new_hosts(cluster):
    from pools.services.allocation import release
    from scheduler.services import queue, state

    job = placed(cluster, "mover")
    (before,) = job.placement
    after = next(h for h in cluster.hosts if h != before)
    loc = state.current_locality()
    moved = queue.move(
        job.pk, {after: 8}, loc, expected_allocation=job.allocation_id, expected_placement=job.placement,
        reason="defragment",
    )  # fmt: skip
    moved.refresh_from_db()
    assert moved.placement == {after: 8} and moved.pkey == job.pkey  # the PKey freed first, taken again
    members = list(moved.partition.members.values_list("port_guid", flat=True))
    assert sorted(members) == ca_guids(cluster, [after]) and moved.partition_id != job.partition_id
    assert Partition.objects.filter(name__startswith="job_").count() == 1

    spot = placed(cluster, "spot")  # preemptible jobs are requeued when they lose their GPUs
    Job.objects.filter(pk=spot.pk).update(requeue=True)
    release(spot.allocation_id, reason="taken back by an Operator")  # the pools end it …
    queue.allocation_lost(spot.allocation_id, "released")  # … (their signal's receiver): requeued
    spot.refresh_from_db()
    assert spot.state == JobState.PENDING and spot.partition_id is None and spot.pkey is not None
    assert not Partition.objects.filter(name=f"job_{spot.pk}").exists()
    assert spot.decisions.first().details["removed_pkey"] == f"0x{spot.pkey:04x}"
    run_pass()
    spot.refresh_from_db()
    assert spot.state == JobState.PLACED and spot.partition.name == f"job_{spot.pk}"


def test_job_page_shows_the_job_pkey_and_its_partitions_applied_state(cluster, client_for, users):
    from fabric.choices import ApplyState
    from pools.models import TenantMembership

    job = placed(cluster, "paged")
    part = job.partition
    TenantMembership.objects.create(tenant=cluster.tenant, user=users["viewer"], role="viewer")
    client = client_for("viewer")  # a viewer of the job's tenant
    html = client.get(f"/scheduler/jobs/{job.pk}/").content.decode()
    pkey = html.split('id="job-pkey">', 1)[1].split("</dd>", 1)[0]
    assert (
        '<span class="mono">0x6100</span>' in pkey
        and f'partition <a href="/fabric/partitions/{part.pk}/">job_{job.pk}</a>' in pkey
    )
    assert 'data-applied="pending">Not applied yet<' in pkey
    assert f'href="/fabric/partitions/?fabric={cluster.fabric.pk}">partitions</a>' in pkey

    Partition.objects.filter(pk=part.pk).update(
        applied_state=ApplyState.FAILED, apply_error="opensm: no SIGHUP"
    )
    pkey = client.get(f"/scheduler/jobs/{job.pk}/").content.decode().split('id="job-pkey">', 1)[1]
    assert 'data-applied="failed">Apply failed<' in pkey and "opensm: no SIGHUP" in pkey.split("</dd>")[0]

    # ended: the PKey stays on record, the partition is gone
    finish(job.pk)
    pkey = (
        client.get(f"/scheduler/jobs/{job.pk}/")
        .content.decode()
        .split('id="job-pkey">', 1)[1]
        .split("</dd>")[0]
    )
    assert '<span class="mono">0x6100</span>' in pkey and "its partition was removed" in pkey
    assert "/fabric/partitions/" + str(part.pk) not in pkey

    # a job of a pool without isolation: no PKey line
    cluster.pool.job_isolation = False
    cluster.pool.save()
    other = placed(cluster, "plain")
    assert 'id="job-pkey"' not in client.get(f"/scheduler/jobs/{other.pk}/").content.decode()


def test_a_rediscovery_that_changes_port_guids_resyncs_job_partitions(
    cluster, django_capture_on_commit_callbacks
):
    """A host's HCA is replaced (new node and port GUID) and the fabric is discovered again: the
    job's partition gets the new port GUID and drops the old one, through the same signal and
    member writer as the pools' partitions (``discovery_committed``; ``_write_wanted``), while a
    job on the untouched hosts is not written to."""
    from fabric.services.ingest import import_topology_text
    from lab import netgen
    from scheduler.services.queue import sync_job_partitions

    a = placed(cluster, "a")
    b = placed(cluster, "b")
    (host,) = a.placement
    old = ca_guids(cluster, [host])
    assert len(old) == 1 and sorted(a.partition.members.values_list("port_guid", flat=True)) == old
    b_members = sorted(b.partition.members.values_list("port_guid", flat=True))
    assert sync_job_partitions(cluster.fabric.pk) == 0  # already current: nothing written

    # the same fabric with a new HCA in that host: node GUID …x0 → …xe, port GUID …x1 → …xf
    text = netgen.fat_tree_2level(2, 2, 2)
    node, port = old[0][2:-1] + "0", old[0][2:]
    assert f"({port})" in text and f'"H-{node}"' in text
    new_node, new_port = node[:-1] + "e", port[:-1] + "f"
    text = text.replace(node, new_node).replace(port, new_port)
    before = AuditEntry.objects.filter(action__startswith="partition.").count()
    with django_capture_on_commit_callbacks(execute=True):
        import_topology_text("iso", text, filename="iso.topo", replace=True)
    new = ca_guids(cluster, [host])
    assert new == [f"0x{new_port}"] and new != old
    a.refresh_from_db()
    assert a.state in (JobState.PLACED, JobState.RUNNING) and a.partition_id is not None
    members = list(a.partition.members.values_list("port_guid", "membership", "reason"))
    assert members == [(f"0x{new_port}", "full", MemberReason.POOL)]
    assert sorted(b.partition.members.values_list("port_guid", flat=True)) == b_members
    # one member change audited (job a's partition), none for b's
    changes = AuditEntry.objects.filter(action__startswith="partition.").order_by("id")[before:]
    assert [e.object_id for e in changes] == [str(a.partition_id)]
    assert sync_job_partitions(cluster.fabric.pk) == 0


def test_a_job_partition_is_changed_only_through_its_job(cluster, client_for):
    """The partitions API (and every other caller of the partitions service) refuses with 409 to
    change a running job's PKey, name or members, or to delete its partition: the job would
    still claim the old PKey, lose its isolation, or stay placed without a partition."""
    job = placed(cluster, "iso")
    part = job.partition
    members = sorted(part.members.values_list("port_guid", flat=True))
    admin = client_for("admin")
    url = f"/api/fabric/partitions/{part.pk}/"
    for method, path, body in [
        ("patch", url, {"pkey": "0x6102"}),
        ("patch", url, {"name": "mine"}),
        ("put", url + "members/", {"members": []}),
        ("put", url + "members/", {"members": [], "reason": "pool"}),
        ("delete", url, None),
    ]:
        r = getattr(admin, method)(path, body, format="json")
        assert r.status_code == 409, (method, path, r.content)
        assert (
            f"belongs to job {job.pk} iso" in r.json()["detail"] and "through the job" in r.json()["detail"]
        )
    part.refresh_from_db()
    job.refresh_from_db()
    assert (part.pkey, part.name, job.partition_id, job.pkey) == (0x6100, f"job_{job.pk}", part.pk, part.pkey)
    assert sorted(part.members.values_list("port_guid", flat=True)) == members
    # flags are the partition's own; the job's end still takes it away
    r = admin.patch(url, {"mtu": 4}, format="json")
    assert r.status_code == 200, r.content
    cancel(job.pk)
    assert not Partition.objects.filter(pk=part.pk).exists()
