"""The inventory ingest: idempotent, nothing dropped, events, audit, signal on commit."""

from __future__ import annotations

import copy

import pytest

from accounts.models import AuditEntry
from events.models import Event
from fabric.models import Host, Node
from pools.models import Gpu, HostInventory, MigSlice
from pools.parsers import parse_gpu_report
from pools.parsers.records import GpuRecord, GpuReport, MigDeviceRecord
from pools.services.inventory import GpuConflict, HostNotFound, find_host, ingest_gpu_report
from pools.signals import inventory_committed


def _report(n: int = 2, *, mig: bool = False) -> GpuReport:
    r = GpuReport(driver_version="550.54", cuda_version="12.4", attached_gpus=n)
    for i in range(n):
        g = GpuRecord(index=i, uuid=f"GPU-{i:08d}", pci_bus_id=f"00000000:{i + 1:02x}:00.0", product_name="H100",
                      memory_total_mib=81559, health="healthy", rail_device=f"mlx5_{i % 2}", rail_affinity="PIX")  # fmt: skip
        if mig and i == 0:
            g.mig_current = g.mig_pending = "enabled"
            g.mig_devices = [
                MigDeviceRecord(1, 0, 0, "3g.40gb", 9, 4, 4),
                MigDeviceRecord(2, 0, 1, "3g.40gb", 9, 0, 4),
            ]
        r.gpus.append(g)
    return r


@pytest.fixture
def host(base_fabric):
    return Host.objects.get(fabric=base_fabric, name="host001")


def test_first_ingest_stores_gpus_slices_rails_and_audits(host, django_capture_on_commit_callbacks):
    sent = []

    def receiver(sender, **kw):
        sent.append(kw)

    inventory_committed.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            s = ingest_gpu_report(host, _report(2, mig=True), source="import")
    finally:
        inventory_committed.disconnect(receiver)
    assert (s["gpus"], s["mig_slices"], s["added"], s["missing"]) == (2, 2, 2, 0)
    assert s["rows_written"] == 4  # 2 GPUs + 2 slices, no per-GPU events on a host's first report
    g0, g1 = Gpu.objects.filter(host=host).order_by("index")
    assert g0.rail_node == Node.objects.get(description="host001 mlx5_0")
    assert g1.rail_node == Node.objects.get(description="host001 mlx5_1")
    assert (g0.state, g0.mig_mode_current, g0.memory_total_mib) == ("free", "enabled", 81559)
    assert [(s.profile, s.placement_start) for s in g0.mig_slices.all()] == [("3g.40gb", 4), ("3g.40gb", 0)]
    assert AuditEntry.objects.filter(action="gpu.inventory", object_repr="host001").count() == 1
    assert len(sent) == 1 and sent[0]["host_id"] == host.pk and sent[0]["summary"]["gpus"] == 2
    assert HostInventory.objects.get(host=host).driver_version == "550.54"


def test_unchanged_reingest_writes_no_rows(host):
    ingest_gpu_report(host, _report(2, mig=True), source="import")
    events = Event.objects.count()
    s = ingest_gpu_report(host, _report(2, mig=True), source="import")
    assert s["rows_written"] == 0 and Event.objects.count() == events
    assert Gpu.objects.count() == 2 and MigSlice.objects.count() == 2


def test_disappeared_gpu_is_kept_allocated_and_comes_back(host):
    ingest_gpu_report(host, _report(2), source="import")
    Gpu.objects.filter(uuid="GPU-00000001").update(state="allocated")
    s = ingest_gpu_report(host, _report(1), source="import")
    assert (s["gpus"], s["missing"]) == (1, 1)
    gone = Gpu.objects.get(uuid="GPU-00000001")
    assert gone.missing_since is not None and gone.state == "allocated"
    ev = Event.objects.get(code="gpu.disappeared")
    assert (ev.object_key, ev.severity, ev.details["state"]) == ("GPU-00000001", "minor", "allocated")
    s = ingest_gpu_report(host, _report(2), source="import")
    assert (s["gpus"], s["returned"]) == (2, 1)
    back = Gpu.objects.get(uuid="GPU-00000001")
    assert back.missing_since is None and back.state == "allocated"
    assert Event.objects.filter(code="gpu.appeared", object_key="GPU-00000001").count() == 1


def test_index_swap_and_replacement_gpu_at_a_missing_index(host):
    ingest_gpu_report(host, _report(2), source="import")
    r = _report(2)
    r.gpus[0].index, r.gpus[1].index = 1, 0
    ingest_gpu_report(host, r, source="import")
    assert dict(Gpu.objects.values_list("uuid", "index")) == {"GPU-00000000": 1, "GPU-00000001": 0}
    r = _report(2)
    r.gpus[1].uuid = "GPU-new"
    s = ingest_gpu_report(host, r, source="import")
    assert (s["added"], s["missing"], s["gpus"]) == (1, 1, 2)
    # GPU-00000001 (missing) keeps index 0, which GPU-00000000 holds again
    assert sorted(Gpu.objects.filter(host=host, index=0).values_list("uuid", flat=True)) == [
        "GPU-00000000",
        "GPU-00000001",
    ]
    assert Event.objects.filter(code="gpu.appeared", object_key="GPU-new").exists()


def test_health_and_mig_change_events(host):
    ingest_gpu_report(host, _report(2, mig=True), source="import")
    r = _report(2, mig=True)
    r.gpus[1].health, r.gpus[1].health_reasons = "unhealthy", ["recovery action: Reset"]
    r.gpus[0].mig_devices = r.gpus[0].mig_devices[:1]
    ingest_gpu_report(host, r, source="import")
    ev = Event.objects.get(code="gpu.unhealthy")
    assert ev.object_key == "GPU-00000001" and "Reset" in ev.message
    mig = Event.objects.get(code="gpu.mig_changed")
    assert mig.details == {"added": [], "missing": ["gi2/ci0"]}
    assert MigSlice.objects.get(gpu_instance_id=2).missing_since is not None
    ingest_gpu_report(host, _report(2, mig=True), source="import")
    assert Event.objects.filter(code="gpu.healthy", object_key="GPU-00000001").count() == 1


def test_gpu_moved_to_another_host_is_a_conflict_unless_moves_are_allowed(base_fabric, host):
    ingest_gpu_report(host, _report(1), source="import")
    other = Host.objects.get(fabric=base_fabric, name="host002")
    r = _report(1)
    r.gpus[0].rail_device = "mlx5_0"
    with pytest.raises(GpuConflict) as exc:
        ingest_gpu_report(other, r, source="import")
    assert exc.value.conflicts == [
        {"uuid": "GPU-00000000", "host": "host001", "fabric": "base", "state": "free"}
    ]
    assert Gpu.objects.get(uuid="GPU-00000000").host == host and not HostInventory.objects.filter(host=other)
    ingest_gpu_report(other, r, source="import", allow_moves=True)
    g = Gpu.objects.get(uuid="GPU-00000000")
    assert g.host == other and g.rail_node == Node.objects.get(description="host002 mlx5_0")


def test_failure_inside_rolls_back_everything(host, monkeypatch):
    from pools.services import inventory

    def boom(*a, **k):
        raise RuntimeError("audit down")

    monkeypatch.setattr(inventory.audit, "record", boom)
    with pytest.raises(RuntimeError):
        ingest_gpu_report(host, _report(2, mig=True), source="import")
    assert Gpu.objects.count() == 0 and MigSlice.objects.count() == 0 and HostInventory.objects.count() == 0


def test_impossible_reading_event(host):
    r = _report(1)
    r.warn(
        "gpu[0]/fb_memory_usage/used",
        "GPU GPU-00000000: memory used 99999999 MiB is impossible (total 81559 MiB)",
    )
    ingest_gpu_report(host, r, source="import")
    ev = Event.objects.get(code="gpu.reading_impossible")
    assert ev.object_key == "GPU-00000000" and ev.details == {"where": "gpu[0]/fb_memory_usage/used"}


def test_every_real_report_ingests_twice_idempotently(host, realdata):
    folder = realdata / "nvidia-smi"
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent")
    for f in sorted(folder.glob("*.xml")) + sorted(folder.glob("*capture*")):
        report = parse_gpu_report(f.read_text(), source=f.name)
        first = ingest_gpu_report(host, copy.deepcopy(report), source="import")
        again = ingest_gpu_report(host, report, source="import")
        assert first["gpus"] == len(report.gpus), f.name
        assert again["rows_written"] == 0, f.name


def test_find_host(base_fabric):
    assert find_host("host002").name == "host002"
    with pytest.raises(HostNotFound, match="no host 'nope'"):
        find_host("nope")


def test_a_rail_lost_with_its_ca_is_resolved_again_when_a_discovery_brings_the_ca_back(
    base_fabric, django_capture_on_commit_callbacks
):
    """host001 mlx5_1's CA leaves the fabric (its node row is deleted: GPU1's rail goes NULL, its
    rail_device stays); the import that brings it back gives GPU1 the new CA row as its rail
    (pools.receivers.after_discovery → resolve_lost_rails), audited, one event, one signal."""
    from fabric.services.ingest import import_topology_text
    from tests.support.topologies import BASE

    host = Host.objects.get(fabric=base_fabric, name="host001")
    ingest_gpu_report(host, _report(2), source="import")
    without = "\n".join(
        line for line in BASE.splitlines() if '"h2"' not in line and "host001 mlx5_1" not in line
    )
    with django_capture_on_commit_callbacks(execute=True):
        import_topology_text("base", without, filename="base-without.net", replace=True)
    g0, g1 = Gpu.objects.filter(host=host).order_by("index")
    assert not Node.objects.filter(description="host001 mlx5_1").exists()
    assert (g1.rail_node_id, g1.rail_device) == (None, "mlx5_1")
    assert g0.rail_node == Node.objects.get(description="host001 mlx5_0")
    assert not AuditEntry.objects.filter(action="gpu.rail_resolved").exists()

    sent = []

    def receiver(sender, **kw):
        sent.append(kw)

    inventory_committed.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            import_topology_text("base", BASE, filename="base.net")
    finally:
        inventory_committed.disconnect(receiver)
    back = Node.objects.get(description="host001 mlx5_1")
    g1.refresh_from_db()
    assert g1.rail_node_id == back.pk
    (entry,) = AuditEntry.objects.filter(action="gpu.rail_resolved")
    assert (entry.object_repr, entry.changes) == ("host001", {"gpus": [1], "devices": ["mlx5_1"]})
    (ev,) = Event.objects.filter(code="gpu.rail_resolved")
    assert (ev.object_key, ev.severity, ev.details["rail_device"]) == ("GPU-00000001", "info", "mlx5_1")
    assert [(kw["host_id"], kw["summary"]["rails_resolved"]) for kw in sent] == [(host.pk, [1])]
    # nothing left to resolve: a rediscovery writes nothing more
    with django_capture_on_commit_callbacks(execute=True):
        import_topology_text("base", BASE.replace("spine-1", "spine-1 "), filename="base2.net")
    assert AuditEntry.objects.filter(action="gpu.rail_resolved").count() == 1
