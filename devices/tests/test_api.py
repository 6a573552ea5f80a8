"""The devices API, pages and /metrics: credentials write-only (never returned, never audited in
clear), validation of SNMPv3 settings, roles, and what the pages and /metrics show."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from accounts.models import AuditEntry
from devices.models import Device, Interface, Sensor
from fabric.models import Fabric

pytestmark = pytest.mark.django_db

URL = "/api/devices/devices/"


@pytest.fixture
def fabric(db):
    return Fabric.objects.create(name="roce")


def test_admin_creates_device_secrets_write_only_and_not_audited(admin, fabric):
    r = admin.post(URL, {"fabric": fabric.pk, "name": "leaf1", "address": "10.0.0.1", "version": "2c",
                         "community": "very-secret-community"}, format="json")  # fmt: skip
    assert r.status_code == 201, r.content
    body = r.json()
    assert "community" not in body and body["community_set"] is True and body["auth_key_set"] is False
    assert "very-secret" not in r.content.decode()
    dev = Device.objects.get(pk=body["id"])
    assert "very-secret" not in dev.community_enc and dev.target().community == "very-secret-community"
    entry = AuditEntry.objects.get(action="device.create")
    assert entry.changes["community"] == "(set)" and "very-secret" not in json.dumps(entry.changes)
    r = admin.patch(f"{URL}{dev.pk}/", {"community": "another-secret", "timeout_s": 1.5}, format="json")
    assert r.status_code == 200 and "another-secret" not in r.content.decode()
    entry = AuditEntry.objects.get(action="device.update")
    assert entry.changes["community"] == "(changed)" and entry.changes["timeout_s"] == [2.0, 1.5]
    assert "another-secret" not in json.dumps(entry.changes)
    dev.refresh_from_db()
    assert dev.target().community == "another-secret"
    got = admin.get(f"{URL}{dev.pk}/").json()
    assert "community" not in got and got["community_set"] is True
    # a blank credential keeps the stored one (write-only: a client echoing the form's empty field)
    r = admin.patch(f"{URL}{dev.pk}/", {"community": "", "timeout_s": 2.5}, format="json")
    assert r.status_code == 200 and r.json()["community_set"] is True, r.content
    dev.refresh_from_db()
    assert dev.target().community == "another-secret" and dev.timeout_s == 2.5


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"version": "2c"}, "community"),
        ({"version": "3", "auth_protocol": "sha", "auth_key": "longenough"}, "user"),
        ({"version": "3", "user": "u", "auth_protocol": "sha", "auth_key": "short"}, "auth_key"),
        ({"version": "3", "user": "u", "priv_protocol": "aes128", "priv_key": "longenough"}, "priv_protocol"),
        ({"version": "2c", "community": "c", "port": 70000}, "port"),
    ],
)
def test_bad_settings_are_400_with_the_field_and_nothing_stored(admin, fabric, body, field):
    r = admin.post(URL, {"fabric": fabric.pk, "name": "x", "address": "10.0.0.9", **body}, format="json")
    assert r.status_code == 400 and field in r.json()
    assert not Device.objects.exists()


def test_roles(viewer, operator, anonymous, fabric):
    body = {"fabric": fabric.pk, "name": "x", "address": "10.0.0.9", "community": "c"}
    assert anonymous.get(URL).status_code == 401
    assert viewer.get(URL).status_code == 200
    assert viewer.post(URL, body, format="json").status_code == 403
    assert operator.post(URL, body, format="json").status_code == 403
    assert not Device.objects.exists()


@pytest.fixture
def polled(fabric):
    d = Device(fabric=fabric, name="leaf1", address="10.0.0.1", status="ok", model="MSN4600",
               last_poll_at=timezone.now(), last_poll_s=0.4)  # fmt: skip
    d.set_secret("community", "c")
    d.save()
    Interface.objects.create(device=d, if_index=5, name="swp2", speed_mbps=200000, admin_status="up",
                             oper_status="up", hc=True, counters={"in_octets": 2**64 - 5, "out_octets": 7},
                             in_bytes_per_s=1.5e9, out_bytes_per_s=2.5e9, utilisation=0.1, congestion=0.0)  # fmt: skip
    Sensor.objects.create(device=d, index=100000001, name="PSU1Temp1", kind="temperature", unit="°C",
                          sensor_type=8, raw=390, precision=1, value=39.0, status="ok")  # fmt: skip
    return d


def test_pages_show_devices_interfaces_and_sensors(viewer, polled):
    r = viewer.get("/devices/")
    assert r.status_code == 200 and b'data-device="leaf1"' in r.content and b"MSN4600" in r.content
    r = viewer.get(f"/devices/{polled.pk}/")
    text = r.content.decode()
    assert r.status_code == 200 and 'data-name="swp2"' in text and "PSU1Temp1" in text and "39.0 °C" in text
    assert "1500000000 B/s" in text
    assert viewer.get("/devices/999999/").status_code == 404


def test_metrics_carry_devices_interfaces_and_sensors(client, polled):
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    assert 'weft_device_up{device="leaf1",fabric="roce"} 1.0' in text
    assert (
        'weft_interface_in_bytes_per_second{device="leaf1",fabric="roce",ifindex="5",ifname="swp2"} 1.5e+09'
        in text
    )
    assert (
        'weft_interface_in_bytes_total{device="leaf1",fabric="roce",ifindex="5",ifname="swp2"} 1.8446744073709552e+19'
        in text
    )
    assert (
        'weft_sensor_value{device="leaf1",fabric="roce",kind="temperature",sensor="PSU1Temp1",unit="°C"} 39.0'
        in text
    )


def test_dashboard_health_tiles(viewer, polled):
    Sensor.objects.create(device=polled, index=7, name="Fan1", kind="fan", unit="RPM", sensor_type=10, value=0,
                          status="nonoperational", component="fan")  # fmt: skip
    Sensor.objects.create(device=polled, index=8, name="ASIC", kind="temperature", unit="°C", sensor_type=8,
                          value=85.5, status="ok")  # fmt: skip
    text = viewer.get("/").content.decode()
    assert 'data-tile="devices">1 / 1<' in text
    assert 'data-tile="fans">1 of 1<' in text
    assert 'data-tile="temps">1 of 2 (85.5 °C)<' in text
