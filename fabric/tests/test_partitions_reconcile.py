"""The partitions reconcile (``fabric.services.partitions.reconcile``, issue 22): a change pending
too long is alarmed and re-applied; a partitions file that no longer holds what is stored (OpenSM
recreated with another file) is drift, alarmed and re-applied; the window of member ports read
per run covers every member within ceil(M / sample) runs; the apply signals the master SM that
sminfo (or the SM watch) names, from ``Fabric.sm_pid_files``. The real OpenSM: the lab tests in
``test_partitions_lab.py``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core.locks import single_instance
from events.models import Event
from fabric.choices import ApplyState
from fabric.models import Fabric, Partition, PartitionApply
from fabric.services.partitions import (
    ApplyError,
    conf_digest,
    forget_applied,
    generate_conf,
    master_pid_file,
    reconcile,
    save_partition,
    set_members,
    write_atomically,
)
from fabric.services.partitions.reconcile import _window
from fabric.tasks import reconcile_partitions_task


@pytest.fixture
def fabric(db, tmp_path) -> Fabric:
    return Fabric.objects.create(name="site", partitions_path=str(tmp_path / "partitions.conf"))


def _codes(fabric) -> list[str]:
    return sorted(Event.objects.filter(fabric=fabric).values_list("code", flat=True))


def test_a_change_pending_too_long_is_alarmed_and_re_applied(fabric, settings):
    settings.WEFT_PARTITIONS_PENDING_ALARM_S = 600
    # a worker killed in the middle of an apply left its record running
    old = timezone.now() - timedelta(hours=1)
    lost = PartitionApply.objects.create(fabric=fabric, state="running", created=old)
    recent = PartitionApply.objects.create(fabric=fabric, state="queued")
    part = save_partition(Partition(fabric=fabric, name="tenant_a", pkey=0x0A01))
    set_members(part, ["0x0002c90300001001"])
    fresh = reconcile(fabric)
    assert (fresh.stuck, fresh.events, fresh.reapplied) == ([], [], None)  # pending, not for long
    assert fresh.stale_applies == 1
    lost.refresh_from_db()
    recent.refresh_from_db()
    assert (lost.state, lost.ok, recent.state) == ("failed", False, "queued")
    assert "no worker finished this apply" in lost.result["error"]
    Partition.objects.filter(pk=part.pk).update(updated=timezone.now() - timedelta(minutes=21))
    out = reconcile(fabric)
    assert out.stuck == ["0x0a01"] and out.events == ["partition.apply_stuck"]
    # the re-apply ran (the coalesced path): the file is written, no OpenSM to signal here
    assert out.reapplied["applies"] == 1 and "no way to make OpenSM re-read" in out.reapplied["error"]
    assert open(fabric.partitions_path).read() == generate_conf(fabric)
    assert _codes(fabric) == ["partition.apply_failed", "partition.apply_stuck"]
    stuck = Event.objects.get(fabric=fabric, code="partition.apply_stuck")
    assert "not applied for 21 min (0x0a01)" in stuck.message


def test_a_partitions_file_replaced_behind_weft_is_drift_and_re_applied(fabric, settings):
    part = save_partition(Partition(fabric=fabric, name="tenant_a", pkey=0x0A01))
    set_members(part, ["0x0002c90300001001"])
    write_atomically(fabric.partitions_path, generate_conf(fabric))
    Partition.objects.filter(fabric=fabric).update(
        applied_state=ApplyState.APPLIED, applied_hash=conf_digest(fabric)
    )
    quiet = reconcile(fabric)
    assert (quiet.file, quiet.events, quiet.reapplied) == ("", [], None)
    # OpenSM recreated with only the default partition
    write_atomically(fabric.partitions_path, "Default=0x7fff, ipoib : ALL=full ;\n")
    out = reconcile(fabric)
    assert "does not hold the partitions Weft stores" in out.file
    assert out.events == ["partition.reconcile_drift"] and out.reapplied["applies"] == 1
    assert open(fabric.partitions_path).read() == generate_conf(fabric)  # written back
    assert "partition.reconcile_drift" in _codes(fabric)


def test_a_fabric_weft_does_not_apply_is_skipped_and_the_task_goes_on(db, fabric):
    other = Fabric.objects.create(name="imported")
    save_partition(Partition(fabric=other, name="x", pkey=0x10))
    assert "no partitions file" in reconcile(other).skipped
    summary = {s["fabric"]: s for s in reconcile_partitions_task()}
    assert set(summary) == {"site", "imported"} and summary["imported"]["skipped"]


def test_the_window_reads_every_member_within_ceil_m_over_sample_runs():
    members = [f"g{i:02d}" for i in range(10)]
    seen = set()
    for turn in range(4):  # ceil(10 / 3) = 4 runs
        window = _window(members, 3, turn)
        assert len(window) == 3
        seen.update(window)
    assert seen == set(members)
    assert _window(members[:2], 3, 7) == members[:2]


def test_the_apply_signals_the_master_named_by_the_sm_not_a_remembered_pid(fabric, tmp_path):
    a, b = "0x0002c90300000001", "0x0002c90300000002"
    fabric.sm_pid_file = str(tmp_path / "old-master.pid")
    fabric.sm_pid_files = {a: "/run/opensm-a.pid", b.upper().replace("0X", "0x"): "/run/opensm-b.pid"}
    fabric.master_sm_guid = b  # what the SM watch saw last (no sminfo reaches a subnet here)
    fabric.save()
    assert master_pid_file(fabric, timeout=5) == "/run/opensm-b.pid"
    Fabric.objects.filter(pk=fabric.pk).update(master_sm_guid="0x0002c903000000ff")
    fabric.refresh_from_db()
    with pytest.raises(
        ApplyError, match=r"(?s)master SM is 0x0002c903000000ff \(the SM watch.* no pid file in sm_pid"
    ):
        master_pid_file(fabric, timeout=5)
    Fabric.objects.filter(pk=fabric.pk).update(sm_pid_files={})
    fabric.refresh_from_db()
    assert master_pid_file(fabric) == fabric.sm_pid_file  # one OpenSM: its pid file


def test_the_command_applies_through_the_recorded_coalesced_path_and_stores_pid_files(fabric, capsys):
    import json

    from django.core.management import call_command
    from django.core.management.base import CommandError

    call_command("partitions", "--fabric", "site", "--set-sm-pid-files", "0x2=/run/b.pid, 0x0001=/run/a.pid")
    fabric.refresh_from_db()
    assert fabric.sm_pid_files == {"0x0000000000000002": "/run/b.pid", "0x0000000000000001": "/run/a.pid"}
    with pytest.raises(CommandError, match="is not GUID=PATH"):
        call_command("partitions", "--fabric", "site", "--set-sm-pid-files", "0x3")
    call_command("partitions", "--fabric", "site", "--set-sm-pid-files", "")
    fabric.refresh_from_db()
    assert fabric.sm_pid_files == {}
    save_partition(Partition(fabric=fabric, name="t", pkey=0x0A40))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        call_command("partitions", "--fabric", "site", "--apply", "--timeout", "2")
    assert exit_.value.code == 1  # written, but no OpenSM to signal here
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    record = PartitionApply.objects.get(pk=out["apply"])
    assert (record.source, record.state, record.ok, record.timeout_s) == ("command", "failed", False, 2.0)
    assert out["error"] == record.result["error"]
    assert record.result["applies"] == 1 and "no way to make OpenSM re-read" in record.result["error"]
    assert open(fabric.partitions_path).read() == generate_conf(fabric)


def _applied_then_replaced(fabric) -> None:
    """A partition stored applied, then the file a new OpenSM reads holds only the default."""
    part = save_partition(Partition(fabric=fabric, name="tenant_a", pkey=0x0A01))
    set_members(part, ["0x0002c90300001001"])
    write_atomically(fabric.partitions_path, generate_conf(fabric))
    Partition.objects.filter(fabric=fabric).update(
        applied_state=ApplyState.APPLIED, applied_hash=conf_digest(fabric)
    )
    write_atomically(fabric.partitions_path, "Default=0x7fff, ipoib : ALL=full ;\n")


def test_a_new_sm_runs_nothing_yet_and_the_reconcile_does_not_call_it_drift(fabric):
    """Issue 26 §4: a restarted demo's first reconcile (the beat runs it at start) compared the
    previous run's "applied" partitions with the new lab's OpenSM and raised drift. The demo marks
    them pending for the new SM (``forget_applied``): no drift alarm, and they are applied again."""
    _applied_then_replaced(fabric)
    assert forget_applied(fabric, "a new lab") == 1
    assert Partition.objects.get(fabric=fabric, pkey=0x0A01).applied_state == ApplyState.PENDING
    out = reconcile(fabric)
    assert (out.file, out.events, out.reapplied) == ("", [], None)
    assert "partition.reconcile_drift" not in _codes(fabric)


def test_no_drift_is_called_while_an_apply_is_changing_the_sm(fabric):
    """An apply in flight (its lock held) is changing what OpenSM runs and verifies it: the
    reconcile compares nothing then (it raised drift at the demo's start while the demo's PKeys
    were being applied)."""
    _applied_then_replaced(fabric)
    with single_instance(f"fabric.partitions_apply.{fabric.pk}", 60) as held:
        assert held
        out = reconcile(fabric)
    assert "an apply of this fabric is running" in out.skipped and out.events == []
    assert "partition.reconcile_drift" not in _codes(fabric)
    assert reconcile(fabric).events == ["partition.reconcile_drift"]  # after it: compared again
