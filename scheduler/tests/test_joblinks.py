"""The job→links index in the database (``scheduler.services.joblinks``): min-hop routes written
as a routing snapshot over a small stored fat tree; the index equals the traced paths of the
job's pairs, the API filters by port and link (a bad key is a 400), the ``paths`` source gives
``path_congested`` for an alarm on its paths only, and a port's jobs carry an estimated share."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db.models import Q
from django.utils import timezone

from events.models import Alarm
from fabric.keys import port_key
from fabric.models import Node, Port
from routing.paths import trace
from routing.services.current import current_routes
from scheduler.models import Job, JobLink
from scheduler.services import faults, joblinks
from scheduler.services.queue import JobSpec, run_pass, start, submit
from tests.support.jobs import gpu_cluster
from tests.support.routes import min_hop_routes


@pytest.fixture
def cluster(db):
    c = gpu_cluster(2, 2, 8, name="links")  # host001-002 on leaf-01, host003-004 on leaf-02
    min_hop_routes(c.fabric)
    return c


def running(cluster, name: str, hosts: int) -> Job:
    job = submit(JobSpec(name=name, pool_id=cluster.pool.pk, count=8 * hosts, gpus_per_host=8))
    run_pass()
    start(job.pk)
    job.refresh_from_db()
    return job


def test_the_index_is_the_traced_paths_and_answers_both_ways(cluster, client, django_user_model):
    job = running(cluster, "wide", 3)  # spans both leaves
    assert joblinks.refresh([job.pk])["changed"] == 1
    t = current_routes(cluster.fabric).tables
    lids = list(
        Port.objects.filter(node__host__name__in=list(job.placement), lid__gt=0).values_list("lid", flat=True)
    )
    want: Counter = Counter()
    for a in lids:
        for b in lids:
            if a != b:
                tr = trace(t, a, b)
                want[port_key(*t.port_key(-1 - tr.src[1]))] += 1
                for h in tr.hops:
                    want[port_key(*t.port_key(h.switch * 256 + h.out_port))] += 1
    got = dict(JobLink.objects.filter(job=job).values_list("port_key", "paths"))
    assert got == dict(want) and len(got) > len(lids)  # switch ports too, not only the HCAs'
    assert joblinks.refresh([job.pk])["changed"] == 0  # unchanged: nothing rewritten

    # the API both ways; a bad key is a 400 naming the parameter
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(user)
    spine = next(
        k
        for k in got
        if Node.objects.filter(
            node_guid=k.split("/")[0], node_type="switch", name__icontains="spine"
        ).exists()
    )
    assert [j["id"] for j in client.get(f"/api/scheduler/jobs/?port={spine}").json()["results"]] == [job.pk]
    r = client.get("/api/scheduler/jobs/?port=nonsense")
    assert r.status_code == 400 and "port" in r.json()
    host = next(iter(job.placement))
    assert [j["id"] for j in client.get(f"/api/scheduler/jobs/?host={host}").json()["results"]] == [job.pk]
    links = client.get(f"/api/scheduler/jobs/{job.pk}/links/").json()
    assert {r["port_key"]: r["paths"] for r in links["links"]} == dict(want) and links[
        "traffic"
    ] == "all-to-all"

    # a second job on the same port: both listed, shares estimated (no rates measured: by paths)
    other = running(cluster, "narrow", 1)
    assert joblinks.refresh(fabric_id=cluster.fabric.pk) == {"jobs": 2, "changed": 0, "rows": 0}
    on = joblinks.jobs_on_ports([spine])[spine]
    assert [e["job"] for e in on] == [job.pk] and on[0]["share"] == 1.0 and on[0]["paths"] == got[spine]
    page = client.get(f"/ports/?fabric={cluster.fabric.pk}&per_page=200").content.decode()
    assert 'data-col="jobs"' in page and "wide" in page and "% est." in page
    guid, num = spine.rsplit("/", 1)
    port = Port.objects.get(node__node_guid=guid, port_num=int(num))
    card = client.get(f"/fabric/ports/{port.pk}/").content.decode()
    assert 'id="port-jobs"' in card and f'data-job="{job.pk}"' in card and "100 % (estimated)" in card
    job_page = client.get(f"/scheduler/jobs/{job.pk}/").content.decode()  # its script reads the links
    assert f'id="job-paths" data-api="/api/scheduler/jobs/{job.pk}/links/"' in job_page
    listed = client.get(f"/api/scheduler/jobs/{job.pk}/links/").json()["links"]
    assert spine in {r["port_key"] for r in listed} and len(listed) == len(want)

    # path_congested from an alarm on a port of its paths; not for a port it does not cross
    now = timezone.now()
    Alarm.objects.create(fabric=cluster.fabric, code="port.congestion", severity="warning", category="performance",
                         object_type="port", object_key=spine, object_repr=str(port), message="xmit wait 0.9",
                         port=port, first_seen=now, last_seen=now)  # fmt: skip
    faults.evaluate()
    job.refresh_from_db()
    assert job.state == "degraded"
    (f,) = [f for f in job.faults if f["code"] == "path_congested"]
    assert f["object_key"] == spine and f["details"]["approximation"] == "routes"
    assert f["details"]["paths"] == got[spine]
    crossing = set(JobLink.objects.filter(port_key=spine).values_list("job_id", flat=True))
    other.refresh_from_db()
    assert (other.state == "degraded") == (other.pk in crossing)
    assert (
        not Job.objects.filter(Q(pk=other.pk) & ~Q(links__port_key=spine)).exists()
        or other.state == "running"
    )
