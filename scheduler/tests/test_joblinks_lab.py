"""The jobs on every link, in the running system (issue 24 §2): ``manage.py serve`` against a small
fat tree in the lab, routes read from the SM's tables. A 3-host job's links from the API are the
ports ``ibtracert`` prints for every ordered pair of its HCAs (all-to-all), the port filter finds
it; pulling a leaf-spine cable on its paths degrades it with ``path_link_down``."""

from __future__ import annotations

import json

import pytest

from fabric.keys import port_key
from fabric.parsers.route import parse_ibtracert
from lab import netgen
from tests.support.server_api import call as _call
from tests.support.waits import wait_for

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def test_a_jobs_links_are_its_traced_paths_and_a_pulled_spine_cable_degrades_it(
    lab_factory, weft_server_factory
):
    lab = lab_factory(netgen.fat_tree_2level(3, 2, 2), timeout=120)
    lab.wait_subnet_up()
    server = weft_server_factory(WEFT_NOTICE_RESCAN_S="1")
    code = (
        "import json; from fabric.models import Fabric, Node, Port; from accounts.tokens import create_token; "
        "from django.contrib.auth import get_user_model; from pools.models import Pool, Tenant; "
        "from fabric.services.discovery import discover; from pools.lab import seed_lab_gpus; "
        "from routing.services.collect import collect_routes; "
        f"f = Fabric.objects.create(name='lab', tool_env=json.loads({json.dumps(json.dumps(lab.tool_env))})); "
        "discover(f); collect_routes(f, reason='test'); seed_lab_gpus(f, 8); "
        "t = Tenant.objects.create(name='t-lab'); p = Pool.objects.create(name='p-lab', tenant=t, fabric=f); "
        "ports = [(pp.lid, pp.node.node_guid, pp.port_num, pp.node.host.name if pp.node.host_id else '') "
        "for pp in Port.objects.filter(node__fabric=f, lid__gt=0, node__node_type='ca').select_related('node__host')]; "
        "sw = {n.node_guid: n.description for n in Node.objects.filter(fabric=f, node_type='switch')}; "
        "print(json.dumps({'pool': p.pk, 'fabric': f.pk, 'ports': ports, 'switches': sw, "
        "'token': create_token(get_user_model().objects.get(username='admin'), 'links').key}))"
    )
    ids = json.loads(server.manage("shell", "-c", code).stdout.strip().splitlines()[-1])
    token = ids["token"]
    wait_for(
        lambda: (_call(server, token, f"/api/fabric/fabrics/{ids['fabric']}/")["notices"] or {}).get("state")
        == "subscribed",
        60, "the server's listener to subscribe to the SM's notices", interval=0.5,
    )  # fmt: skip
    job = _call(server, token, "/api/scheduler/jobs/",
                {"name": "links", "pool": ids["pool"], "count": 24, "gpus_per_host": 8})  # fmt: skip
    wait_for(lambda: _call(server, token, f"/api/scheduler/jobs/{job['id']}/")["state"] == "placed", 30,
             "the job placed", interval=0.2)  # fmt: skip
    _call(server, token, f"/api/scheduler/jobs/{job['id']}/start/", {})
    hosts = set(_call(server, token, f"/api/scheduler/jobs/{job['id']}/")["placement"])
    assert len(hosts) == 3
    mine = [(lid, g, p) for lid, g, p, h in ids["ports"] if h in hosts]
    want: dict[str, int] = {}
    for a, ga, pa in mine:
        for b, _gb, _pb in mine:
            if a != b:
                hops = parse_ibtracert(lab.run(["ibtracert", str(a), str(b)]).stdout)
                for k in [port_key(ga, pa), *(port_key(g, p) for g, p in hops[1::2])]:
                    want[k] = want.get(k, 0) + 1
    got = wait_for(lambda: (r := _call(server, token, f"/api/scheduler/jobs/{job['id']}/links/")["links"]) and r,
                   30, "the job's links indexed", interval=0.2)  # fmt: skip
    assert {r["port_key"]: r["paths"] for r in got} == want
    assert all(r["rails"] == [0] and not r["dead_end"] for r in got)  # rails are HCA indexes (mlx5_0: rail 0)
    spine = next(r for r in got if r["port_key"].split("/")[0] in ids["switches"] and r["link"]
                 and all(e.split("/")[0] in ids["switches"] for e in r["link"].split("-")))  # fmt: skip
    found = _call(server, token, f"/api/scheduler/jobs/?port={spine['port_key']}")["results"]
    assert [j["id"] for j in found] == [job["id"]]
    assert [
        j["id"] for j in _call(server, token, f"/api/scheduler/jobs/?link={spine['link']}")["results"]
    ] == [job["id"]]
    guid, port = spine["port_key"].rsplit("/", 1)
    lab.unlink(ids["switches"][guid], int(port))
    degraded = wait_for(
        lambda: (j := _call(server, token, f"/api/scheduler/jobs/{job['id']}/"))["state"] == "degraded" and j,
        30, "the job degraded by the pulled spine cable", interval=0.2,
    )  # fmt: skip
    assert ("path_link_down", spine["link"]) in {(f["code"], f["object_key"]) for f in degraded["faults"]}, (
        degraded["faults"]
    )
