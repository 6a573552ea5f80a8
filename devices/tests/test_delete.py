"""Deleting a device, from its page (Admin, after a confirmation) and from the API: the role of the
device form, one audit entry ``device.delete`` with its settings (never a credential), its
interfaces, sensors and LLDP rows gone, its history kept until the history retention drops it.
The device is a real recording polled from snmpsim, so every row it owns exists."""

from __future__ import annotations

import pytest

from accounts.models import AuditEntry
from devices.models import Device, DeviceSample, Interface, Neighbour, Sensor
from devices.services import history
from devices.services.poll import poll_devices
from telemetry.models import Resolution
from telemetry.services.history import retention_s

pytestmark = [pytest.mark.snmpsim, pytest.mark.django_db(transaction=False)]


@pytest.fixture
def polled(agent, make_device):
    """The SONiC recording polled once: interfaces, sensors, 23 LLDP neighbours, one sample."""
    agent.set_values("sonic-edit", {})  # as recorded
    dev = make_device("sonic-edit")
    [summary] = poll_devices([dev])
    assert summary["status"] == "ok", summary
    owned = {
        "interfaces": Interface.objects.filter(device=dev).count(),
        "sensors": Sensor.objects.filter(device=dev).count(),
        "neighbours": Neighbour.objects.filter(device=dev).count(),
        "samples": DeviceSample.objects.filter(device_id=dev.pk).count(),
    }
    assert owned["interfaces"] > 0 and owned["neighbours"] == 23 and owned["samples"] == 1, owned
    return dev, owned


def _gone_but_history(pk: int, samples: int) -> None:
    assert not Device.objects.filter(pk=pk).exists()
    assert not Interface.objects.filter(device_id=pk).exists()
    assert not Sensor.objects.filter(device_id=pk).exists()
    assert not Neighbour.objects.filter(device_id=pk).exists()
    assert DeviceSample.objects.filter(device_id=pk).count() == samples


def test_page_delete_needs_admin_and_confirmation(polled, users, viewer, operator, anonymous, admin):
    dev, owned = polled
    url = f"/devices/{dev.pk}/delete/"
    for client in (viewer, operator):  # as the device form: Admin only
        assert client.get(url).status_code == 403
        assert client.post(url, {"confirm": "1"}).status_code == 403
        assert b'id="device-delete-link"' not in client.get(f"/devices/{dev.pk}/").content
    r = anonymous.post(url, {"confirm": "1"})
    assert r.status_code == 302 and "/login" in r["Location"]
    assert Device.objects.filter(pk=dev.pk).exists()

    assert b'id="device-delete-link"' in admin.get(f"/devices/{dev.pk}/").content
    assert b'id="device-delete-link"' in admin.get(f"/devices/{dev.pk}/edit/").content
    page = admin.get(url).content.decode()
    assert 'id="device-delete-confirm"' in page
    assert f"{owned['interfaces']} interfaces" in page and "23 LLDP neighbours" in page
    # without the box ticked: the page again with the reason, nothing deleted or audited
    r = admin.post(url, {})
    assert r.status_code == 400 and b'id="device-delete-error"' in r.content
    assert Neighbour.objects.filter(device=dev).count() == 23
    assert not AuditEntry.objects.filter(action="device.delete").exists()

    r = admin.post(url, {"confirm": "1"})
    assert r.status_code == 302 and r["Location"] == "/devices/"
    _gone_but_history(dev.pk, owned["samples"])
    entry = AuditEntry.objects.get(action="device.delete")
    assert entry.object_id == str(dev.pk) and entry.object_repr == "sonic-edit"
    assert entry.user == users["admin"]
    assert entry.changes["name"] == "sonic-edit" and entry.changes["community"] == "(set)"
    assert entry.changes["address"] == dev.address and entry.changes["fabric"] == dev.fabric_id
    assert entry.changes["history_samples"] == owned["samples"]
    assert admin.get(url).status_code == 404 and admin.post(url, {"confirm": "1"}).status_code == 404
    assert b'data-device="sonic-edit"' not in admin.get("/devices/").content


def test_api_delete_is_the_same_path(polled, users, operator, admin):
    dev, owned = polled
    url = f"/api/devices/devices/{dev.pk}/"
    assert operator.delete(url).status_code == 403
    assert Device.objects.filter(pk=dev.pk).exists()
    r = admin.delete(url)
    assert r.status_code == 204, r.content
    _gone_but_history(dev.pk, owned["samples"])
    entry = AuditEntry.objects.get(action="device.delete")
    assert entry.object_id == str(dev.pk) and entry.changes["history_samples"] == owned["samples"]
    assert entry.user == users["admin"]
    assert entry.changes["community"] == "(set)" and entry.changes["version"] == "2c"
    assert admin.delete(url).status_code == 404
    assert AuditEntry.objects.filter(action="device.delete").count() == 1


def test_a_deleted_devices_history_follows_retention(polled, admin):
    dev, owned = polled
    raw_keep = retention_s()[Resolution.RAW]
    [sample] = DeviceSample.objects.filter(device_id=dev.pk)
    assert admin.delete(f"/api/devices/devices/{dev.pk}/").status_code == 204
    # rollups still read it (the minute window it falls in), then retention drops the raw row
    done = history.rollup(now=sample.t + raw_keep + 120)
    assert done["minute"] >= 1 and done["deleted"] >= 1
    assert not DeviceSample.objects.filter(device_id=dev.pk, resolution=Resolution.RAW).exists()
    minute = DeviceSample.objects.get(device_id=dev.pk, resolution=Resolution.MINUTE)
    assert minute.t == sample.t // 60 * 60
    assert history.decode(minute.data) == history.decode(sample.data)


def test_deleting_clears_the_devices_open_alarms(agent, make_device, users, admin):
    """A device the agent does not answer (unknown community) is unreachable: its alarm is open;
    deleting the device clears it, by the Admin, with the reason (nothing else would)."""
    from events.models import Alarm, AlarmState

    dead = make_device("dead-sw", community="no-such-community", timeout_s=0.3, retries=0)
    [summary] = poll_devices([dead])
    assert summary["status"] == "unreachable", summary
    alarm = Alarm.objects.get(code="device.unreachable", object_key="dead-sw")
    assert alarm.state == AlarmState.ACTIVE
    assert admin.post(f"/devices/{dead.pk}/delete/", {"confirm": "1"}).status_code == 302
    alarm.refresh_from_db()
    assert alarm.state == AlarmState.CLEARED and alarm.cleared_by == users["admin"]
    assert alarm.clear_reason == "device dead-sw deleted"
    entry = AuditEntry.objects.get(action="device.delete")
    assert entry.changes["alarms_cleared"] == 1
    assert AuditEntry.objects.filter(action="alarm.clear", object_id=str(alarm.pk)).count() == 1
