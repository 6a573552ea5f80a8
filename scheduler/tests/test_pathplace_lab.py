"""Path-aware placement on the fabric lab (issue 24 §2): a 2-level fat tree (3 leaves × 2 hosts,
2 spines) discovered by ibnetdiscover, routes read from OpenSM's LFTs, GPUs seeded. One spine's
ports are made hot with ibsim's ``PerformanceSet`` of PortXmitWait and two sweeps measure it;
each leaf has one free host. The job placed by the pass its submit triggers goes where its routes
avoid the hot spine, where today's leaf-level choice (the engine without paths, on the same state)
would cross it — both checked with ``ibtracert`` for the chosen hosts."""

from __future__ import annotations

import pytest

from fabric.models import Fabric, Node, Port
from fabric.parsers.route import parse_ibtracert
from fabric.services.discovery import discover
from lab import netgen
from pools.lab import seed_lab_gpus
from pools.models import Gpu, Pool, Tenant
from pools.services.allocation import AllocationRequest, allocate
from routing.services.collect import collect_routes
from scheduler.models import Job
from scheduler.placement import Congestion, FreeState, Request, place
from scheduler.services import state
from scheduler.services.queue import JobSpec, submit
from telemetry.models import PortCounters
from telemetry.services.sweep import poll_fabric

pytestmark = [pytest.mark.lab]


@pytest.mark.django_db(transaction=True)
def test_the_pass_places_a_job_off_a_hot_spine_as_ibtracert_confirms(lab_factory):
    lab = lab_factory(netgen.fat_tree_2level(3, 2, 2), timeout=120)
    fabric = Fabric.objects.create(name="labpath", tool_env=dict(lab.tool_env))
    discover(fabric)
    collect_routes(fabric, reason="test")
    seed_lab_gpus(fabric, 8)
    tenant = Tenant.objects.create(name="path-t")
    pool = Pool.objects.create(name="path-p", tenant=tenant, fabric=fabric)
    bg = Pool.objects.create(name="path-bg", tenant=tenant, fabric=fabric)
    hot = Node.objects.get(fabric=fabric, node_type="switch", description__contains="spine-01")
    lid = {
        h: lid
        for h, lid in Port.objects.filter(
            node__fabric=fabric, node__host__isnull=False, lid__gt=0
        ).values_list("node__host__name", "lid")
    }

    def route(a: str, b: str) -> list[tuple[str, int]]:  # the oracle: ibtracert's switch ports
        return parse_ibtracert(lab.run(["ibtracert", str(lid[a]), str(lid[b])]).stdout)

    def crosses_hot(hosts) -> bool:
        return any(g == hot.node_guid for a in hosts for b in hosts if a != b for g, _p in route(a, b))

    loc = state.current_locality()
    leaves = sorted({loc.hosts[h].unit for h in lid})
    by_leaf = {u: sorted(h for h in lid if loc.hosts[h].unit == u) for u in leaves}
    assert [len(v) for v in by_leaf.values()] == [2, 2, 2]
    # which host of each leaf OpenSM routes over spine-01 (from a host on another leaf)
    other = {u: next(h for v in leaves if v != u for h in by_leaf[v]) for u in leaves}
    via_hot = {
        u: next(h for h in by_leaf[u] if any(g == hot.node_guid for g, _ in route(other[u], h)))
        for u in leaves
    }
    # one free host per leaf: the spine-01 one on the leaf today's choice takes, the other one elsewhere
    req = Request(16, gpus_per_host=8)
    for x in leaves:
        free_hosts = [
            via_hot[u] if u == x else next(h for h in by_leaf[u] if h != via_hot[u]) for u in leaves
        ]
        leaf_level = place(loc, FreeState(gpus={h: 8 for h in free_hosts}), req, Congestion())
        if via_hot[x] in leaf_level.placed:
            break
    else:
        pytest.fail("today's leaf-level choice never takes a spine-01 host")
    assert crosses_hot(leaf_level.placed)  # the comparison: the leaf-level placement crosses spine-01
    busy = list(
        Gpu.objects.filter(host__fabric=fabric)
        .exclude(host__name__in=free_hosts)
        .values_list("pk", flat=True)
    )
    allocate(bg.pk, AllocationRequest(count=len(busy), gpu_ids=busy, job="background"))

    # spine-01's ports hot: PortXmitWait grows by 10^9 ticks between two sweeps (congestion 100%)
    poll_fabric(fabric)
    ports = [p for p in range(1, 4)]
    before = dict(PortCounters.objects.filter(port__node=hot).values_list("port__port_num", "xmit_wait"))
    for p in ports:
        lab.perf_set(hot.description, p, "PortXmitWait", (before.get(p) or 0) + 10**9)
    poll_fabric(fabric)
    measured = dict(PortCounters.objects.filter(port__node=hot).values_list("port__port_num", "congestion"))
    assert all(measured[p] == 1.0 for p in ports), measured

    job = submit(JobSpec(name="off-hot", pool_id=pool.pk, count=16, gpus_per_host=8))
    job = Job.objects.get(pk=job.pk)
    assert job.state == "placed", job.decision
    chosen = sorted(job.placement)
    assert chosen == sorted(h for h in free_hosts if h != via_hot[x])
    assert not crosses_hot(chosen)  # ibtracert: no route between the chosen hosts crosses spine-01
    d = job.decision
    assert d["scoring"] == "paths" and d["hot_ports"] == []
    assert [p["key"].split("/")[0] for p in d["avoided_ports"]] == [hot.node_guid]
    assert all(p["congestion"] == 1.0 for p in d["avoided_ports"])
    (port,) = d["avoided_ports"]  # the one toward the spine-01 host of leaf-level's choice
    assert port["name"].startswith(str(hot) + " [")
    assert any(
        r.startswith(f"paths: avoided hot ports {port['name']} (")
        and "congestion 100%)" in r
        and r.endswith("that the routes of an equal placement would cross")
        for r in d["reasons"]
    ), d["reasons"]
