"""The demo's fabric (``lab.netgen.DEMO_SPEC``: 2 scalable units x 8 rail leaves x 16 hosts with 8
HCAs, 8 spines) in the lab: discovered by the real ibnetdiscover, GPUs seeded one per rail
(``pools.lab.seed_lab_gpus``), and the scheduler's locality (``build_locality``) sees each SU's 8
rail leaves as one unit and the two SUs as one block under the spines."""

from __future__ import annotations

import pytest

from fabric.choices import NodeType
from fabric.models import Fabric, Link, Node
from fabric.services.discovery import discover
from lab import netgen
from pools.lab import seed_lab_gpus
from pools.models import Gpu
from scheduler.topology import build_locality

pytestmark = [pytest.mark.lab]

HOSTS, RAILS, SU = 32, 8, 16


@pytest.mark.django_db(transaction=True)
def test_demo_fabric_discovered_has_one_unit_per_scalable_unit(lab_factory):
    lab = lab_factory(netgen.parse_spec(netgen.DEMO_SPEC), timeout=120)
    fabric = Fabric.objects.create(name="demo-rails", tool_env=dict(lab.tool_env))
    discovery = discover(fabric)
    assert discovery.status == "ok"
    assert {k: discovery.counts[k] for k in ("switches", "cas", "links")} == {
        "switches": 2 * RAILS + 8, "cas": HOSTS * RAILS, "links": HOSTS * RAILS + 2 * RAILS * SU}  # fmt: skip
    seeded = seed_lab_gpus(fabric, 8)
    assert (seeded["hosts"], seeded["gpus"]) == (HOSTS, HOSTS * 8)

    # GPU i of every host sits on its HCA mlx5_i, whose cable goes to rail i's leaf of the host's SU
    leaf_of_ca = {}
    for link in Link.objects.filter(fabric=fabric).select_related("port_a__node", "port_b__node"):
        a, b = link.port_a.node, link.port_b.node
        for ca, sw in ((a, b), (b, a)):
            if ca.node_type == NodeType.CA and sw.node_type == NodeType.SWITCH:
                leaf_of_ca[ca.pk] = sw.name
    for gpu in Gpu.objects.filter(host__fabric=fabric).select_related("host", "rail_node"):
        su = 1 if int(gpu.host.name[4:]) <= SU else 2
        assert gpu.rail_node.description == f"{gpu.host.name} mlx5_{gpu.index}"
        assert leaf_of_ca[gpu.rail_node_id] == f"MF0;rail{gpu.index}-leaf-{su:02d}:MQM8700/U1"

    loc = build_locality([fabric])
    assert loc.warnings == []
    units = loc.units()
    assert [u.name for u in units] == [f"MF0;rail{{0..7}}-leaf-{su:02d}:MQM8700/U1" for su in (1, 2)]
    leaf_names = dict(
        Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH).values_list("node_guid", "name")
    )
    for su, unit in enumerate(units, start=1):
        assert len(unit.switches) == RAILS
        first = (su - 1) * SU + 1
        assert list(unit.hosts) == [f"host{h:03d}" for h in range(first, first + SU)]
        assert loc.capacity(unit.key) == SU * 8
        assert len(unit.uplinks) == RAILS * SU  # non-blocking: as many uplinks as host cables
        # every host of the SU: 8 rails in order, rail r on the SU's rail-r leaf
        for host in unit.hosts:
            site = loc.hosts[host]
            assert site.unit == unit.key and site.gpus == 8
            assert [leaf_names[g] for g in site.rails] == [
                f"MF0;rail{r}-leaf-{su:02d}:MQM8700/U1" for r in range(RAILS)
            ]
    (block,) = loc.at_tier(2)
    assert block.name == "MF0;spine-{01..08}:MQM8700/U1" and block.children == tuple(u.key for u in units)
    assert len(loc.hosts) == HOSTS and loc.capacity(block.key) == HOSTS * 8
    # a 16-host job fits one SU (tier 1, one unit); one more host spans both SUs through the spines
    assert loc.span(f"host{h:03d}" for h in range(1, SU + 1)) == (1, 1)
    assert loc.span(f"host{h:03d}" for h in range(1, SU + 2)) == (2, 2)
