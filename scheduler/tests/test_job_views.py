"""Which jobs cross a hot port or a link, where the admin looks for them (issue 24 §2): the
heatmap's cell tooltip and hot-spot list (``telemetry.api.heatmap``, through telemetry's port
annotations) and the map's link panel (``fabric.api.maplayout.map_edge_detail``, through the
scheduler's ``edge_jobs`` overlay), both read from the job→links index, on min-hop routes over a
small stored fat tree. The shares are the index's estimate (``joblinks.jobs_on_ports``)."""

from __future__ import annotations

import pytest

from fabric.keys import port_key
from fabric.models import Link, Node, Port
from scheduler.models import Job, JobLink
from scheduler.services import joblinks
from scheduler.services.queue import JobSpec, run_pass, start, submit
from tests.support.jobs import gpu_cluster
from tests.support.routes import min_hop_routes


@pytest.fixture
def cluster(db):
    c = gpu_cluster(2, 2, 8, name="views")  # host001-002 on leaf-01, host003-004 on leaf-02
    min_hop_routes(c.fabric)
    return c


@pytest.fixture
def admin(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "pw"))
    return client


def running(cluster, name: str, hosts: int) -> Job:
    job = submit(JobSpec(name=name, pool_id=cluster.pool.pk, count=8 * hosts, gpus_per_host=8))
    run_pass()
    start(job.pk)
    job.refresh_from_db()
    return job


def spine_port(job: Job) -> tuple[str, Port]:
    """A spine out-port the job's paths cross (the key, the port)."""
    for k in JobLink.objects.filter(job=job).order_by("port_key").values_list("port_key", flat=True):
        guid, num = k.rsplit("/", 1)
        if Node.objects.filter(node_guid=guid, node_type="switch", name__icontains="spine").exists():
            return k, Port.objects.get(node__node_guid=guid, port_num=int(num))
    raise AssertionError("the job crosses no spine port")


def test_heatmap_tooltip_and_hot_list_name_the_jobs(cluster, admin):
    wide = running(cluster, "wide", 3)  # both leaves: through the spines
    narrow = running(cluster, "narrow", 1)  # host004 alone: no path leaves its HCA
    joblinks.refresh()
    key, port = spine_port(wide)
    paths = JobLink.objects.get(job=wide, port_key=key).paths
    f = cluster.fabric.pk

    cell = admin.get(f"/api/fabric/heatmap/{f}/cells/{port.pk}/").json()
    (j,) = cell["annotations"]["jobs"]
    assert (j["job"], j["name"], j["paths"], j["share"]) == (wide.pk, "wide", paths, 1.0)
    assert j["url"] == f"/scheduler/jobs/{wide.pk}/" and j["state"] == "running"

    # the hot list's batch: the asked ports of this fabric only, each with its jobs or []
    idle = (
        Port.objects.filter(node__fabric=cluster.fabric, node__node_type="switch")
        .exclude(pk=port.pk)
        .exclude(
            node__node_guid__in=[
                k.rsplit("/", 1)[0] for k in JobLink.objects.values_list("port_key", flat=True)
            ]
        )
        .first()
    )
    got = admin.get(f"/api/fabric/heatmap/{f}/annotations/?ports={port.pk},{idle.pk},999999").json()
    assert set(got["ports"]) == {str(port.pk), str(idle.pk)}
    assert [e["job"] for e in got["ports"][str(port.pk)]["jobs"]] == [wide.pk]
    assert got["ports"][str(idle.pk)]["jobs"] == []
    assert narrow.pk not in {e["job"] for e in got["ports"][str(port.pk)]["jobs"]}
    for bad in ("", "?ports=", "?ports=1,x", "?ports=" + ",".join(str(i) for i in range(51))):
        r = admin.get(f"/api/fabric/heatmap/{f}/annotations/{bad}")
        assert r.status_code == 400 and "ports" in r.json(), bad
    page = admin.get(f"/heatmap/{f}/").content.decode()
    assert f'data-annotations-url="/api/fabric/heatmap/{f}/annotations/"' in page


def test_map_link_panel_lists_the_jobs_per_direction(cluster, admin):
    wide = running(cluster, "wide", 3)
    joblinks.refresh()
    key, port = spine_port(wide)
    # the edge of that spine port: spine ↔ the leaf at its other end
    link = Link.objects.select_related("port_a__node", "port_b__node").get(
        **({"port_a": port} if Link.objects.filter(port_a=port).exists() else {"port_b": port})
    )
    spine, leaf = (link.port_a, link.port_b) if link.port_a == port else (link.port_b, link.port_a)
    d = admin.get(
        f"/api/fabric/fabrics/{cluster.fabric.pk}/map-edge/?a={leaf.node_id}&b={spine.node_id}"
    ).json()
    keys = []
    for c in d["cables"]:
        for end in ("a", "b"):
            p = Port.objects.select_related("node").get(pk=c[end]["port_id"])
            keys.append(port_key(p.node.node_guid, p.port_num))
    crossing = {
        (k, j): n
        for k, j, n in JobLink.objects.filter(port_key__in=keys).values_list("port_key", "job_id", "paths")
    }
    assert crossing and {(e["port_key"], e["job"]) for e in d["jobs"]} == set(crossing)
    down = next(e for e in d["jobs"] if e["port_key"] == key)  # spine → leaf
    assert (
        down["from"] == f"{spine.node} [{spine.port_num}]" and down["to"] == f"{leaf.node} [{leaf.port_num}]"
    )
    assert (down["job"], down["name"], down["paths"], down["share"]) == (
        wide.pk,
        "wide",
        crossing[key, wide.pk],
        1.0,
    )
    assert down["url"] == f"/scheduler/jobs/{wide.pk}/"
    # an edge no job crosses: an empty list, not a missing key
    idle = (
        Link.objects.filter(fabric=cluster.fabric)
        .exclude(
            port_a__node__node_guid__in=[
                k.rsplit("/", 1)[0] for k in JobLink.objects.values_list("port_key", flat=True)
            ]
        )
        .exclude(
            port_b__node__node_guid__in=[
                k.rsplit("/", 1)[0] for k in JobLink.objects.values_list("port_key", flat=True)
            ]
        )
        .select_related("port_a", "port_b")
        .first()
    )
    if idle is not None:
        e = admin.get(
            f"/api/fabric/fabrics/{cluster.fabric.pk}/map-edge/?a={idle.port_a.node_id}&b={idle.port_b.node_id}"
        ).json()
        assert e["jobs"] == []


def test_the_demo_keeps_the_jobs_busiest_switch_ports_hot(cluster):
    """``scheduler.demo.BusyJobPorts``: the demo traffic player's busy ports are the running jobs'
    switch egress ports with the most paths (never an HCA's own port)."""
    from scheduler.demo import BusyJobPorts

    wide = running(cluster, "wide", 3)
    joblinks.refresh()
    switches = set(Node.objects.filter(node_type="switch").values_list("node_guid", flat=True))
    per = {}
    for k, n in JobLink.objects.filter(job=wide).values_list("port_key", "paths"):
        if k.rsplit("/", 1)[0] in switches:
            per[k] = per.get(k, 0) + n
    want = sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    got = BusyJobPorts(cluster.fabric.pk, count=3).read()
    assert got == [(k.rsplit("/", 1)[0], int(k.rsplit("/", 1)[1])) for k, _ in want] and len(got) == 3
    busy = BusyJobPorts(cluster.fabric.pk, count=3, every_s=3600, close=False)  # the test's transaction
    assert busy() == got
    Job.objects.filter(pk=wide.pk).update(state="completed")
    assert busy() == got  # read again only every every_s
    assert BusyJobPorts(cluster.fabric.pk).read() == []  # no running job: nothing kept hot


def test_the_jobs_on_a_port_are_those_the_reader_may_open(cluster, admin, django_user_model):
    """The walkthrough: a Viewer of no tenant saw the demo's job names in the ports view's Jobs
    column, and each link answered 404 (job pages are their tenants' members' and Admins'). The
    ports view and its API, the port page, the heatmap's tooltip and hot list and the map's link
    panel list only the jobs the reader may open; the shares stay those of every job there."""
    from django.test import Client

    from accounts.roles import set_role
    from pools.models import TenantMembership

    wide = running(cluster, "wide", 3)
    joblinks.refresh()
    key, port = spine_port(wide)
    link = Link.objects.get(
        **({"port_a": port} if Link.objects.filter(port_a=port).exists() else {"port_b": port})
    )
    far = link.port_b if link.port_a_id == port.pk else link.port_a
    f, guid = cluster.fabric.pk, port.node.node_guid
    viewer = django_user_model.objects.create_user("vera", password="pw")
    member = django_user_model.objects.create_user("mia", password="pw")
    set_role(viewer, "viewer")
    set_role(member, "viewer")
    TenantMembership.objects.create(tenant=cluster.tenant, user=member, role="viewer")

    def seen(c) -> dict[str, bool]:
        table = c.get(f"/api/fabric/port-table/?fabric={f}&node={guid}&per_page=500").json()
        row = next(r for r in table["results"] if r["port"] == port.port_num)
        cell = c.get(f"/api/fabric/heatmap/{f}/cells/{port.pk}/").json()
        hot = c.get(f"/api/fabric/heatmap/{f}/annotations/?ports={port.pk}").json()
        edge = c.get(f"/api/fabric/fabrics/{f}/map-edge/?a={port.node_id}&b={far.node_id}").json()
        url = f"/scheduler/jobs/{wide.pk}/"
        return {
            "table": [j["job"] for j in row["jobs"]] == [wide.pk],
            "cell": [j["job"] for j in cell["annotations"]["jobs"]] == [wide.pk],
            "hot": [j["job"] for j in hot["ports"][str(port.pk)]["jobs"]] == [wide.pk],
            "map edge": wide.pk in {e["job"] for e in edge["jobs"]},
            "port page": url in c.get(f"/fabric/ports/{port.pk}/").content.decode(),
            "ports page": url in c.get(f"/ports/?fabric={f}&node={guid}&per_page=500").content.decode(),
            "job page": c.get(url).status_code == 200,
        }

    def client_of(user) -> Client:
        c = Client()
        c.force_login(user)
        return c

    everywhere = dict.fromkeys(
        ("table", "cell", "hot", "map edge", "port page", "ports page", "job page"), True
    )
    assert seen(admin) == everywhere
    assert seen(client_of(member)) == everywhere  # a member of the job's tenant
    assert seen(client_of(viewer)) == dict.fromkeys(everywhere, False)  # a Viewer of no tenant
    assert joblinks.jobs_on_ports([key], viewer) == {}
    assert joblinks.jobs_on_ports([key], member)[key][0]["share"] == 1.0
