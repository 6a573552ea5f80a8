"""A discovery that commits while a counter sweep is collecting and removes a node: the sweep
still commits (rows of the remaining ports), instead of failing on the removed ports' foreign key."""

from __future__ import annotations

import pytest

from fabric.models import Node, Port
from fabric.services.ingest import import_topology_text
from telemetry.collectors.counters import Collected
from telemetry.models import PortCounters, Sweep
from telemetry.services.sweep import run as sweep_mod
from tests.support.topologies import BASE

pytestmark = pytest.mark.backend  # a sweep's commit against a concurrent removal (foreign keys)

WITHOUT_H2 = BASE.replace('[2] "h2"[1] # "host001 mlx5_1" lid 11 4xHDR\n', "").replace(
    'Hca 1 "h2" # "host001 mlx5_1"\n[1] "leaf1"[2] # lid 11 lmc 0 "leaf-1" lid 2 4xHDR\n', ""
)


@pytest.mark.django_db(transaction=True)
def test_sweep_survives_a_discovery_removing_a_node_during_collection(monkeypatch):
    fabric = import_topology_text("f", BASE, filename="base.topo").fabric
    victim = Node.objects.get(fabric=fabric, description="host001 mlx5_1")
    assert WITHOUT_H2 != BASE

    def collect_while_a_discovery_commits(reqs, **kw):
        import_topology_text("f", WITHOUT_H2, filename="base.topo", replace=True)  # h2 removed on purpose
        return Collected(reads={}, capmasks={}, mechanism="mad", duration_s=0.01)

    monkeypatch.setattr(sweep_mod, "run_madpoll", collect_while_a_discovery_commits)
    sweep = sweep_mod.poll_fabric(fabric)
    assert not Node.objects.filter(pk=victim.pk).exists()
    assert Sweep.objects.filter(pk=sweep.pk).exists()
    ports = Port.objects.filter(node__fabric=fabric, port_num__gte=1).count()
    assert PortCounters.objects.filter(port__node__fabric=fabric, sweep=sweep).count() == ports
