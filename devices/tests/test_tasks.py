"""The beat task polls the devices that are due, each group on its own."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from devices.models import Device
from devices.services.schedule import due_devices
from devices.tasks import poll_devices_task

pytestmark = [pytest.mark.snmpsim, pytest.mark.django_db]


def test_due_devices_by_interval_group_and_enabled(eth_fabric):
    now = timezone.now()
    rows = [
        Device.objects.create(fabric=eth_fabric, name=f"d{i}", address="127.0.0.1", poll_interval_s=60,
                              enabled=i != 3, last_poll_at=None if i == 0 else now - timedelta(seconds=s))
        for i, s in enumerate((0, 30, 58, 120, 600))
    ]  # fmt: skip
    # d0 never polled, d1 30 s ago (not due), d2 58 s ago (due within half a 10 s tick), d3 disabled
    assert [d.name for d in due_devices(now=now)] == ["d0", "d2", "d4"]
    assert [d.name for d in due_devices(rows[0].pk % 2, 2, now=now)] == [
        d.name for d in (rows[0], rows[2], rows[4]) if d.pk % 2 == rows[0].pk % 2
    ]


def test_beat_task_polls_due_devices_once(make_device, settings):
    settings.WEFT_SNMP_GROUPS = 1
    make_device("nxos")
    make_device("nohc")
    out = poll_devices_task()  # the beat's fan-out: one call per site (run at once here)
    assert out["queued"] == 1 and out["sites"] == ["default"]
    assert sorted((r["device"], r["status"], r["interfaces"]) for r in out["polled"]) == [
        ("nohc", "ok", 69),
        ("nxos", "ok", 59),
    ]
    # polled a moment ago: not due
    assert poll_devices_task(0, 1, site="default") == {
        "site": "default",
        "group": 0,
        "polled": [],
        "busy": [],
    }


def test_the_beat_call_spreads_each_sites_devices_over_its_groups_and_never_polls_one_twice_at_once(
    make_device, eth_fabric, settings
):
    """Issue 25 §2: the beat's call queues ``WEFT_SNMP_GROUPS`` calls per site (each on that
    site's queue; run at once here), group i of a site polling that site's devices with
    ``id % n == i``; a device whose poll is running elsewhere (its lock held) is left out, the
    others of its group polled."""
    from core.locks import single_instance
    from fabric.models import Fabric

    settings.WEFT_SNMP_GROUPS = 2
    far = Fabric.objects.create(name="roce-b", site="hall-b")
    busy = make_device("nxos")
    make_device("nohc")
    there = make_device("sonic")
    Device.objects.filter(pk=there.pk).update(fabric=far)
    out = poll_devices_task()
    assert (out["queued"], out["sites"], out["skipped_sites"]) == (4, ["default", "hall-b"], [])
    assert sorted(r["device"] for r in out["polled"]) == ["nohc", "nxos", "sonic"]
    Device.objects.update(last_poll_at=None)  # all due again
    group = there.pk % 2
    assert [r["device"] for r in poll_devices_task(group, 2, site="hall-b")["polled"]] == ["sonic"]
    assert poll_devices_task(1 - group, 2, site="hall-b")["polled"] == []  # not in that group
    # nxos is being polled by another call (its lock is held there): this one leaves it out
    with single_instance(f"devices.poll.device.{busy.pk}"):
        out = poll_devices_task(0, 1, site="default")
    assert out["busy"] == ["nxos"]
    assert [r["device"] for r in out["polled"]] == ["nohc"]
    busy.refresh_from_db()
    assert busy.last_poll_at is None  # not polled by this call
