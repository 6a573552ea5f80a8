"""Fixtures of the pools tests: a small imported fabric (``tests.support.topologies.BASE``:
host001 with mlx5_0 and mlx5_1, host002 with mlx5_0)."""

import pytest


@pytest.fixture
def base_fabric(db):
    from fabric.models import Fabric
    from fabric.services.ingest import import_topology_text
    from tests.support.topologies import BASE

    import_topology_text("base", BASE, filename="base.net")
    return Fabric.objects.get(name="base")
