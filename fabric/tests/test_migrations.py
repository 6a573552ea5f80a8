"""Data migrations of the fabric app run on a database holding the data they fix: 0013 renames
partitions that share a name on a fabric (names were only checked in Python before) so that
0014's unique (fabric, name) can be added."""

from __future__ import annotations

import importlib

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.backend  # data migrations on the database they fix

dedupe = importlib.import_module("fabric.migrations.0013_partition_names_deduplicated")

BEFORE = [("fabric", "0012_topology_reference")]


def test_later_duplicates_are_renamed_deterministically():
    rows = [
        (7, 1, "storage", 0x0031),
        (3, 1, "storage", 0x0030),
        (9, 1, "storage", 0x0032),
        (4, 2, "storage", 0x0030),  # another fabric: its own
        (5, 1, "storage-0x0032", 0x0040),  # holds the first name 9 would get
        (6, 1, "", 0x0050),
        (8, 1, "", 0x0051),
        (10, 1, "x" * 64, 0x0060),
        (11, 1, "x" * 64, 0x0061),
    ]
    assert dedupe.deduplicate(rows) == {
        7: "storage-0x0031",
        9: "storage-0x0032-2",
        8: "pkey_0x0051",
        11: "x" * 57 + "-0x0061",
    }
    assert dedupe.deduplicate(list(reversed(rows))) == dedupe.deduplicate(rows)
    assert dedupe.deduplicate([(1, 1, "a", 1), (2, 1, "b", 2)]) == {}


@pytest.mark.django_db(transaction=True)
def test_0013_renames_duplicates_stored_before_then_0014_adds_the_constraint():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    try:
        old = executor.loader.project_state(BEFORE).apps
        Fabric, Partition = old.get_model("fabric", "Fabric"), old.get_model("fabric", "Partition")
        site, other = Fabric.objects.create(name="site"), Fabric.objects.create(name="other")
        made = [
            Partition.objects.create(fabric=site, name=name, pkey=pkey)
            for name, pkey in [("storage", 0x30), ("scratch", 0x31), ("storage", 0x32), ("storage", 0x33)]
        ]
        Partition.objects.create(fabric=other, name="storage", pkey=0x30)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    from fabric.models import Partition as Current

    assert sorted(Current.objects.filter(fabric__name="site").values_list("pk", "name")) == [
        (made[0].pk, "storage"),
        (made[1].pk, "scratch"),
        (made[2].pk, "storage-0x0032"),
        (made[3].pk, "storage-0x0033"),
    ]
    assert Current.objects.get(fabric__name="other").name == "storage"
    with pytest.raises(IntegrityError), transaction.atomic():
        Current.objects.create(fabric_id=site.pk, name="scratch", pkey=0x40)
