"""A ``partitions.conf`` import never changes nor deletes a pool's or a job's partition
(``fabric.services.partitions.import_partitions``): ``replace`` keeps the owned partitions the
file lacks, an exported file imports back leaving them untouched (both in the summary's
``kept``), and an entry that would change one (or takes a ``pool_<n>``/``job_<n>`` name) is
refused at its line, naming the owner, with nothing written: service, command and API."""

from __future__ import annotations

import json
import logging

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.models import AuditEntry
from fabric.choices import NodeType
from fabric.models import Partition, PartitionMember, Port
from fabric.parsers.partitions import PartitionsParseError
from fabric.services.ingest import import_topology_text
from fabric.services.partitions import (
    MERGE,
    REPLACE,
    generate_conf,
    import_partitions,
    partition_owner,
    partition_owners,
    save_partition,
    set_members,
)
from lab import netgen
from pools.lab import seed_lab_gpus
from pools.models import Gpu, Pool, Tenant
from pools.services.allocation import AllocationRequest, allocate
from pools.services.partitions import job_partition_name, set_pool_pkey
from scheduler.models import Job

pytestmark = pytest.mark.backend  # query counts of the partition import

STORAGE = "0x0002c90300aa0001"  # a storage node's port, not on the fabric
OTHER = "0x0002c90300aa0002"


@pytest.fixture
def owned(db, django_capture_on_commit_callbacks):
    """Fabric ``pod`` (2 hosts × 2 HCAs) with: pool ``vision``'s partition 0x0a01 (the CA ports of
    host001, which it holds GPUs on, and a limited storage member), job ``train``'s partition
    0x6000 and an imported partition ``storage`` 0x0b00."""
    fabric = import_topology_text("pod", netgen.rail_pod(hosts=2, rails=2), filename="pod.net").fabric
    seed_lab_gpus(fabric)
    tenant = Tenant.objects.create(name="t")
    pool = Pool.objects.create(name="vision", tenant=tenant, fabric=fabric)
    pool_part = set_pool_pkey(pool, 0x0A01)
    set_members(pool_part, [(STORAGE, "limited")], reason="extra")
    gpus = list(Gpu.objects.filter(host__name="host001").order_by("index").values_list("pk", flat=True))[:2]
    with django_capture_on_commit_callbacks(execute=True):
        allocate(pool.pk, AllocationRequest(count=2, gpu_ids=gpus))
    job = Job.objects.create(name="train", tenant=tenant, pool=pool, count=1, priority=50)
    job_part = save_partition(
        Partition(fabric=fabric, name=job_partition_name(job.pk), pkey=0x6000, ipoib=True), as_owner=True
    )
    set_members(job_part, [_host_guids(fabric, "host002")[0]], reason="pool", as_owner=True)
    Job.objects.filter(pk=job.pk).update(partition=job_part)
    import_partitions(fabric, "Default=0x7fff, ipoib : ALL=full ;\nstorage=0x0b00 : ALL=limited ;\n")
    return fabric, pool, pool_part, job, job_part


def _host_guids(fabric, *hosts: str) -> list[str]:
    return sorted(
        Port.objects.filter(
            node__fabric=fabric, node__node_type=NodeType.CA, node__host__name__in=hosts
        ).values_list("port_guid", flat=True)
    )


def _rows(fabric) -> list[tuple]:
    """Every stored fact of the fabric's partitions an import could change."""
    out = []
    for p in Partition.objects.filter(fabric=fabric).order_by("pkey"):
        members = sorted(
            PartitionMember.objects.filter(partition=p).values_list("pk", "port_guid", "membership", "reason")
        )
        out.append((p.pk, p.pkey, p.name, p.source, p.ipoib, p.mtu, p.updated, members))
    return out


def test_owners_are_named_one_query_per_relation(owned, django_assert_num_queries):
    fabric, pool, pool_part, job, job_part = owned
    storage = Partition.objects.get(fabric=fabric, pkey=0x0B00)
    with django_assert_num_queries(2):  # pools.Pool.partition, scheduler.Job.partition
        owners = partition_owners([pool_part.pk, job_part.pk, storage.pk])
    assert owners == {pool_part.pk: ("pool vision", "pool"), job_part.pk: (f"job {job.pk} train", "job")}
    assert partition_owner(job_part) == (f"job {job.pk} train", "job")
    assert partition_owner(storage) is None


def test_replace_keeps_owned_partitions_the_file_lacks(owned):
    fabric, pool, pool_part, job, job_part = owned
    before = {r[1]: r for r in _rows(fabric)}
    summary = import_partitions(
        fabric, "Default=0x7fff, ipoib : ALL=full ;\nscratch=0x0c00 : ALL=full ;\n", mode=REPLACE
    )
    assert (summary.created, summary.updated, summary.deleted, summary.kept) == (
        ["0x0c00"],
        ["0x7fff"],
        ["0x0b00"],
        ["0x0a01", "0x6000"],
    )
    after = {r[1]: r for r in _rows(fabric)}
    assert sorted(after) == [0x0A01, 0x0C00, 0x6000, 0x7FFF]
    assert (after[0x0A01], after[0x6000]) == (before[0x0A01], before[0x6000])
    pool.refresh_from_db()
    assert (pool.partition_id, Job.objects.get(pk=job.pk).partition_id) == (pool_part.pk, job_part.pk)
    entry = AuditEntry.objects.filter(action="partition.import").latest("pk")
    assert entry.changes["kept"] == ["0x0a01", "0x6000"] and entry.changes["deleted"] == ["0x0b00"]


def test_an_exported_file_imports_back_leaving_owned_partitions_untouched(owned):
    fabric, pool, pool_part, job, job_part = owned
    text = generate_conf(fabric)
    assert f"pool_{pool.pk}=0x0a01, ipoib :" in text and f"{STORAGE}=limited" in text
    before = _rows(fabric)
    for mode in (MERGE, REPLACE):
        summary = import_partitions(fabric, text, source="exported.conf", mode=mode)
        assert (summary.partitions, summary.kept, summary.deleted) == (4, ["0x0a01", "0x6000"], [])
        assert sorted(summary.updated) == ["0x0b00", "0x7fff"] and summary.created == []
        assert summary.members == 2  # Default's ALL, storage's ALL: the owned ones' rows are not rewritten
        after = _rows(fabric)
        owned_rows = [r for r in before if r[1] in (0x0A01, 0x6000)]
        assert [r for r in after if r[1] in (0x0A01, 0x6000)] == owned_rows
        assert sorted(m[3] for m in owned_rows[0][7]) == ["extra", "pool", "pool"]  # not "imported"
    assert generate_conf(fabric) == text


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("{name}=0x0a01, ipoib : {members}, {other}=full ;", "a member added"),
        ("{name}=0x0a01, ipoib : {first}=full, {storage}=limited ;", "a member taken away"),
        ("{name}=0x0a01, ipoib : {members_full} ;", "a membership changed"),
        ("{name}=0x0a01, ipoib, mtu=4 : {members} ;", "a flag added"),
        ("{name}=0x0a01 : {members} ;", "ipoib taken away"),
        ("renamed=0x0a01, ipoib : {members} ;", "renamed"),
    ],
)
def test_an_entry_changing_a_pool_partition_is_refused_at_its_line(owned, entry, why):
    fabric, pool, pool_part, job, job_part = owned
    guids = _host_guids(fabric, "host001")
    members = ", ".join([f"{g}=full" for g in guids] + [f"{STORAGE}=limited"])
    line = entry.format(
        name=f"pool_{pool.pk}", members=members, other=OTHER, first=guids[0], storage=STORAGE,
        members_full=members.replace("=limited", "=full"),
    )  # fmt: skip
    text = f"Default=0x7fff : ALL=full ;\nnew=0x0c00 : ALL=full ;\n{line}\n"
    before = _rows(fabric)
    for mode in (MERGE, REPLACE):
        with pytest.raises(PartitionsParseError) as err:
            import_partitions(fabric, text, source="site.conf", mode=mode)
        assert (err.value.source, err.value.line) == ("site.conf", 3), why
        assert err.value.message.startswith("PKey 0x0a01 belongs to pool vision: change it through the pool")
        assert _rows(fabric) == before, why  # 0x0c00 (line 2) not created, Default not replaced
    assert not AuditEntry.objects.filter(action="partition.import", changes__source="site.conf").exists()


def test_an_entry_for_a_job_partition_or_with_an_owner_name_is_refused(owned):
    fabric, pool, pool_part, job, job_part = owned
    before = _rows(fabric)
    for text, line, message in [
        (f"Default=0x7fff : ALL=full ;\n\njob_{job.pk}=0x6000 : ALL=full ;\n", 3,
         f"PKey 0x6000 belongs to job {job.pk} train: change it through the job"),
        (f"pool_{pool.pk}=0x0d00 : ALL=full ;\n", 1,
         f"partition name 'pool_{pool.pk}' belongs to pool vision (PKey 0x0a01): change it through the pool"),
        ("ok=0x0d01 : ;\njob_999=0x0d00 : ALL=full ;\n", 2,
         "partition name 'job_999': pool_<n> and job_<n> are the names of the partitions Weft makes for "
         "pools and jobs; choose another"),
        # an imported partition may not take an owner name either
        ("pool_7=0x0b00 : ALL=limited ;\n", 1, "partition name 'pool_7': pool_<n> and job_<n> are the names"),
    ]:  # fmt: skip
        for mode in (MERGE, REPLACE):
            with pytest.raises(PartitionsParseError) as err:
                import_partitions(fabric, text, source="p.conf", mode=mode)
            assert err.value.line == line and err.value.message.startswith(message), err.value
            assert _rows(fabric) == before


def test_command_prints_kept_and_refuses_with_file_line(owned, tmp_path, capsys):
    fabric, pool, pool_part, job, job_part = owned
    good = tmp_path / "good.conf"
    good.write_text("Default=0x7fff, ipoib : ALL=full ;\n")
    call_command("import_partitions", str(good), "--fabric", "pod", "--replace")
    out, err = capsys.readouterr()
    summary = json.loads(out.strip().splitlines()[-1])
    assert (summary["kept"], summary["deleted"]) == (["0x0a01", "0x6000"], ["0x0b00"])
    assert "kept 2 partition(s) owned by a pool or a job, unchanged: 0x0a01, 0x6000" in err
    bad = tmp_path / "bad.conf"
    bad.write_text(f"Default=0x7fff : ALL=full ;\npool_{pool.pk}=0x0a01 : ALL=full ;\n")
    with pytest.raises(CommandError, match=rf"{bad}:2: PKey 0x0a01 belongs to pool vision: change it"):
        call_command("import_partitions", str(bad), "--fabric", "pod")
    assert Partition.objects.get(pk=pool_part.pk).name == f"pool_{pool.pk}"


def test_api_answers_kept_and_a_located_400_without_traceback(owned, admin, caplog):
    fabric, pool, pool_part, job, job_part = owned
    before = _rows(fabric)
    caplog.set_level(logging.INFO)
    bad = admin.post(
        "/api/fabric/partitions/import/",
        {"fabric": fabric.pk, "filename": "site.conf", "mode": "replace",
         "text": f"Default=0x7fff : ALL=full ;\npool_{pool.pk}=0x0a01, ipoib, sl=3 : ALL=full ;\n"},
        format="json",
    )  # fmt: skip
    assert bad.status_code == 400, bad.content
    assert bad.json() == {
        "error": "site.conf:2: PKey 0x0a01 belongs to pool vision: change it through the pool (an import "
        f"may give it back only as stored: pool_{pool.pk}, its flags and members)",
        "source": "site.conf",
        "line": 2,
    }
    assert _rows(fabric) == before
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    ok = admin.post(
        "/api/fabric/partitions/import/",
        {"fabric": fabric.pk, "mode": "replace", "text": "Default=0x7fff, ipoib : ALL=full ;\n"},
        format="json",
    )
    assert ok.status_code == 201, ok.content
    assert (ok.json()["kept"], ok.json()["deleted"]) == (["0x0a01", "0x6000"], ["0x0b00"])
