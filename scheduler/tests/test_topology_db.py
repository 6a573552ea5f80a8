"""``scheduler.topology.build_locality`` on stored fabrics: netgen fabrics imported through the
real ingest, GPUs through the inventory service, roles, and the real Selene fabrics."""

from __future__ import annotations

import gzip

import pytest

from fabric.choices import FabricRole, NodeType
from fabric.models import Fabric, Host, Node
from fabric.services.ingest import import_topology_text
from lab import netgen
from pools.lab import seed_lab_gpus
from scheduler.topology import build_locality, load_rows


@pytest.fixture
def imported(db, committed_signals):
    def make(name, text):
        return import_topology_text(name, text, filename=f"{name}.topo").fabric

    return make


def test_fat_tree_from_the_database(imported):
    fabric = imported("ft", netgen.fat_tree_2level(4, 2, 3))
    loc = build_locality([fabric])
    assert sorted(u.name for u in loc.units()) == [f"MF0;leaf-0{i}:MQM8700/U1" for i in range(1, 5)]
    assert len(loc.hosts) == 12 and all(s.gpus == 0 for s in loc.hosts.values())
    (block,) = loc.at_tier(2)
    assert block.name == "MF0;spine-{01..02}:MQM8700/U1"
    # uplinks are the stored links from the leaf to the spines
    unit = loc.domains[loc.hosts["host001"].unit]
    from fabric.models import Link

    ups = Link.objects.filter(pk__in=unit.uplinks).select_related("port_a__node", "port_b__node")
    assert len(ups) == 2
    for link in ups:
        assert {link.port_a.node.tier, link.port_b.node.tier} == {1, 2}
    # the same by name and by pk; an unknown name is refused
    assert build_locality(["ft"]).hosts.keys() == build_locality([fabric.pk]).hosts.keys()
    with pytest.raises(Fabric.DoesNotExist, match="nope"):
        build_locality(["nope"])


def test_rail_pod_with_gpus_and_rail_order(imported):
    fabric = imported("rail", netgen.rail_pod(6, rails=4, speed="HDR"))
    seed_lab_gpus(fabric, 8)
    loc = build_locality()
    (unit,) = loc.units()
    assert unit.name == "MF0;rail{0..3}-leaf-01:MQM8700/U1" and len(unit.switches) == 4
    site = loc.hosts["host001"]
    assert site.gpus == 8 and site.host_id == Host.objects.get(fabric=fabric, name="host001").pk
    names = dict(
        Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH).values_list("node_guid", "name")
    )
    assert [names[g] for g in site.rails] == [f"MF0;rail{r}-leaf-01:MQM8700/U1" for r in range(4)]
    assert loc.capacity(unit.key) == 48


def test_roles_from_the_database(imported):
    fabric = imported("ft", netgen.fat_tree_2level(3, 2, 2))
    leaf = Node.objects.get(fabric=fabric, name="MF0;leaf-03:MQM8700/U1")
    leaf.role = FabricRole.STORAGE
    leaf.save(update_fields=["role"])
    loc = build_locality()
    assert len(loc.units()) == 2 and len(loc.hosts) == 4
    assert any("non-compute role" in w for w in loc.warnings)
    # a rediscovery keeps the role (the ingest does not write it)
    import_topology_text("ft", netgen.fat_tree_2level(3, 2, 2), filename="again.topo")
    assert Node.objects.get(pk=leaf.pk).role == FabricRole.STORAGE
    fabric.role = FabricRole.MANAGEMENT
    fabric.save(update_fields=["role"])
    assert build_locality().hosts == {}
    assert [r.role for r in load_rows()] == ["management"]


@pytest.mark.slow
def test_selene_compute_and_storage(imported, realdata):
    text = gzip.decompress(
        (realdata / "ibnetdiscover/selene_compute.ibnetdiscover.txt.gz").read_bytes()
    ).decode()
    imported("selene", text)
    imported("selene-storage", (realdata / "ibnetdiscover/selene_storage.ibnetdiscover.txt").read_text())
    loc = build_locality(["selene", "selene-storage"])
    selene = [u for u in loc.units() if u.fabric_id == Fabric.objects.get(name="selene").pk]
    pods = [u for u in selene if len(u.switches) == 8]
    assert len(pods) == 25 and len(selene) == 28
    assert sum(len(u.hosts) for u in pods) == 458
    assert all(len(loc.hosts[h].rails) == 8 for u in pods for h in u.hosts)
    # every luna host is on both fabrics (8 compute HCAs, 2 storage): placed on compute only
    assert all(loc.hosts[h].fabric_id == pods[0].fabric_id for h in loc.hosts if h.startswith("luna-"))
    assert any("hosts of fabric selene-storage are also on fabric selene" in w for w in loc.warnings)
    # SuperPOD: scalable units joined through the compute spines in 4 groups of SUs (+ a management
    # leaf on its own spine), all under the core switches
    assert len([b for b in loc.at_tier(2) if b.fabric_id == pods[0].fabric_id]) == 5
