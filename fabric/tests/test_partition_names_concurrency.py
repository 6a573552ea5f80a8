"""Two partitions created at once with one name on PostgreSQL, over real parallel connections:
both pass the Python name check (``_check_name``; they wait for each other after it), the
database's unique (fabric, name) refuses the second insert, and ``save_partition`` answers it
as the check would (``PartitionError`` on ``name``, the API's 400), not an IntegrityError.
Runs in bin/test's PostgreSQL phase (``integration``)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from fabric.models import Fabric, Partition
from fabric.services.partitions import PartitionError, save_partition
from fabric.services.partitions import edits as service


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_one_name_created_twice_at_once_is_one_partition_and_a_name_error(monkeypatch):
    assert connection.vendor == "postgresql"
    fabric = Fabric.objects.create(name="race")
    both_checked = threading.Barrier(2)
    check = service._check_name

    def check_then_wait(partition, as_owner):
        check(partition, as_owner)
        both_checked.wait(timeout=30)  # both passed the check before either writes

    monkeypatch.setattr(service, "_check_name", check_then_wait)
    results: dict[int, object] = {}

    def create(pkey: int) -> None:
        try:
            save_partition(Partition(fabric_id=fabric.pk, name="storage", pkey=pkey))
            results[pkey] = "ok"
        except BaseException as exc:  # reported below
            results[pkey] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=create, args=(pkey,)) for pkey in (0x30, 0x31)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    (winner,) = [k for k, v in results.items() if v == "ok"]
    (loser,) = [v for v in results.values() if v != "ok"]
    assert isinstance(loser, PartitionError) and loser.field == "name", results
    assert str(loser) == f"name 'storage' is already used on fabric race by PKey 0x{winner:04x}"
    assert list(Partition.objects.filter(fabric=fabric).values_list("name", "pkey")) == [("storage", winner)]
