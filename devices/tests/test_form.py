"""The Admin's device form: roles, SNMPv2c and SNMPv3 credentials write-only (never in the HTML,
not even after a failed submit; never in the audit log), blank keeps the stored secret, and the
API's cross-field checks as located form errors with nothing stored."""

from __future__ import annotations

import json

import pytest

from accounts.models import AuditEntry
from devices.models import Device
from fabric.models import Fabric

pytestmark = pytest.mark.django_db

ADD = "/devices/new/"
SECRETS = ("community-s3cr3t-1", "authkey-s3cr3t-2", "privkey-s3cr3t-3", "community-s3cr3t-4")


@pytest.fixture
def fabric(db):
    return Fabric.objects.create(name="roce")


def _body(fabric, **over):
    body = {"fabric": fabric.pk, "name": "leaf1", "address": "10.0.0.1", "port": 161, "version": "2c",
            "community": "", "user": "", "auth_protocol": "none", "auth_key": "", "priv_protocol": "none",
            "priv_key": "", "context": "", "timeout_s": 2.0, "retries": 1, "poll_interval_s": 60, "enabled": "on"}  # fmt: skip
    body.update(over)
    return body


def _no_secret_in(text: str) -> None:
    for s in SECRETS:
        assert s not in text


def test_roles(viewer, operator, anonymous, fabric):
    for client in (viewer, operator):
        assert client.get(ADD).status_code == 403
        assert client.post(ADD, _body(fabric, community=SECRETS[0])).status_code == 403
    r = anonymous.get(ADD)
    assert r.status_code == 302 and "/login" in r["Location"]
    assert (
        not Device.objects.exists() and not AuditEntry.objects.filter(action__startswith="device.").exists()
    )
    assert b'id="device-add"' not in viewer.get("/devices/").content


def test_admin_adds_v2c_then_edits_blank_keeps_secret(admin, fabric):
    assert b'id="device-add"' in admin.get("/devices/").content
    page = admin.get(ADD)
    assert page.status_code == 200 and b'name="community"' in page.content
    r = admin.post(ADD, _body(fabric, community=SECRETS[0]))
    assert r.status_code == 302, r.content.decode()[:2000]
    dev = Device.objects.get(name="leaf1")
    assert r["Location"] == f"/devices/{dev.pk}/"
    assert dev.target().community == SECRETS[0] and SECRETS[0] not in dev.community_enc
    entry = AuditEntry.objects.get(action="device.create")
    assert entry.changes["community"] == "(set)" and entry.changes["address"] == "10.0.0.1"
    _no_secret_in(json.dumps(entry.changes))

    edit = f"/devices/{dev.pk}/edit/"
    page = admin.get(edit).content.decode()
    _no_secret_in(page)
    assert 'data-secret-set="1"' in page and "leave blank to keep it" in page
    assert 'id="device-edit"' in admin.get(f"/devices/{dev.pk}/").content.decode()
    # blank community: the stored one is kept; the timeout changes
    r = admin.post(edit, _body(fabric, timeout_s=1.5))
    assert r.status_code == 302
    dev.refresh_from_db()
    assert dev.target().community == SECRETS[0] and dev.timeout_s == 1.5
    entry = AuditEntry.objects.get(action="device.update")
    assert entry.changes == {"timeout_s": [2.0, 1.5]}
    # a new community replaces it; the audit says "(changed)" only
    admin.post(edit, _body(fabric, timeout_s=1.5, community=SECRETS[3]))
    dev.refresh_from_db()
    assert dev.target().community == SECRETS[3]
    last = AuditEntry.objects.filter(action="device.update").order_by("-id").first()
    assert last.changes == {"community": "(changed)"}
    for e in AuditEntry.objects.all():
        _no_secret_in(json.dumps(e.changes))


def test_admin_switches_to_v3_and_errors_never_echo_secrets(admin, fabric):
    r = admin.post(ADD, _body(fabric, community=SECRETS[0]))
    dev = Device.objects.get(name="leaf1")
    edit = f"/devices/{dev.pk}/edit/"
    # v3 with SHA + AES but a short priv key and no user: the form again, with the errors located,
    # and none of the keys typed rendered back
    r = admin.post(edit, _body(fabric, version="3", auth_protocol="sha", auth_key=SECRETS[1],
                               priv_protocol="aes128", priv_key="short"))  # fmt: skip
    text = r.content.decode()
    assert r.status_code == 400
    assert "an SNMPv3 device needs a user" in text and "at least 8 characters with a privacy protocol" in text
    _no_secret_in(text)
    assert 'value="short"' not in text
    dev.refresh_from_db()
    assert dev.version == "2c" and not dev.has_secret("auth_key")
    r = admin.post(edit, _body(fabric, version="3", user="weft-v3", auth_protocol="sha", auth_key=SECRETS[1],
                               priv_protocol="aes128", priv_key=SECRETS[2], context="arista7150"))  # fmt: skip
    assert r.status_code == 302
    dev.refresh_from_db()
    t = dev.target()
    assert (dev.version, t.user, t.auth_key, t.priv_key, t.context) == (
        "3",
        "weft-v3",
        SECRETS[1],
        SECRETS[2],
        "arista7150",
    )
    entry = AuditEntry.objects.filter(action="device.update").get()
    assert entry.changes["auth_key"] == "(changed)" and entry.changes["priv_key"] == "(changed)"
    assert entry.changes["version"] == ["2c", "3"]
    _no_secret_in(json.dumps(entry.changes))
    page = admin.get(edit).content.decode()
    _no_secret_in(page)
    # v3 with stored keys: saving with blank key fields keeps them (the checks count them as set)
    r = admin.post(edit, _body(fabric, version="3", user="weft-v3", auth_protocol="sha", priv_protocol="aes128",
                               context="arista7150", retries=2))  # fmt: skip
    assert r.status_code == 302
    dev.refresh_from_db()
    assert dev.target().priv_key == SECRETS[2] and dev.retries == 2
    assert admin.get("/devices/999999/edit/").status_code == 404


def _stored(dev) -> dict:
    """The device's stored row: which encrypted credential columns hold something."""
    row = (
        Device.objects.filter(pk=dev.pk)
        .values("version", "community_enc", "auth_key_enc", "priv_key_enc")
        .get()
    )
    return {k: (bool(v) if k.endswith("_enc") else v) for k, v in row.items()}


def test_switching_version_clears_the_other_versions_credentials(admin, fabric):
    admin.post(ADD, _body(fabric, community=SECRETS[0]))
    dev = Device.objects.get(name="leaf1")
    edit = f"/devices/{dev.pk}/edit/"
    assert _stored(dev) == {
        "version": "2c",
        "community_enc": True,
        "auth_key_enc": False,
        "priv_key_enc": False,
    }
    # the page: v2c → v3 clears the stored community in the same save, audited as cleared
    v3 = _body(fabric, version="3", user="weft-v3", auth_protocol="sha", auth_key=SECRETS[1],
               priv_protocol="aes128", priv_key=SECRETS[2])  # fmt: skip
    assert admin.post(edit, v3).status_code == 302
    assert _stored(dev) == {
        "version": "3",
        "community_enc": False,
        "auth_key_enc": True,
        "priv_key_enc": True,
    }
    dev.refresh_from_db()
    assert dev.target().community == "" and dev.target().auth_key == SECRETS[1]
    entry = AuditEntry.objects.filter(action="device.update").order_by("-id").first()
    assert entry.changes["community"] == "(cleared)" and entry.changes["version"] == ["2c", "3"]
    assert entry.changes["auth_key"] == entry.changes["priv_key"] == "(changed)"
    _no_secret_in(json.dumps(entry.changes))
    assert (
        'data-secret-set="0"' in admin.get(edit).content.decode().split('name="community"')[1].split(">")[0]
    )
    # a community typed for a v3 device is refused where it was typed, nothing stored
    r = admin.post(edit, {**v3, "auth_key": "", "priv_key": "", "community": SECRETS[3]})
    assert r.status_code == 400 and "community" in r.context["form"].errors
    _no_secret_in(r.content.decode())
    assert _stored(dev)["community_enc"] is False

    # the API: v3 → v2c clears both USM keys
    r = admin.patch(
        f"/api/devices/devices/{dev.pk}/", {"version": "2c", "community": SECRETS[3]}, format="json"
    )
    assert r.status_code == 200, r.content
    body = r.json()
    assert (body["community_set"], body["auth_key_set"], body["priv_key_set"]) == (True, False, False)
    assert _stored(dev) == {
        "version": "2c",
        "community_enc": True,
        "auth_key_enc": False,
        "priv_key_enc": False,
    }
    entry = AuditEntry.objects.filter(action="device.update").order_by("-id").first()
    assert entry.changes == {"version": ["3", "2c"], "community": "(changed)", "auth_key": "(cleared)",
                             "priv_key": "(cleared)"}  # fmt: skip
    r = admin.patch(f"/api/devices/devices/{dev.pk}/", {"auth_key": SECRETS[1]}, format="json")
    assert r.status_code == 400 and "auth_key" in r.json()
    assert _stored(dev)["auth_key_enc"] is False
    for e in AuditEntry.objects.all():
        _no_secret_in(json.dumps(e.changes))


def test_bad_port_is_a_located_error_nothing_stored(admin, fabric):
    r = admin.post(ADD, _body(fabric, community=SECRETS[0], port=70000))
    assert r.status_code == 400 and "Ensure this value is less than or equal to 65535" in r.content.decode()
    _no_secret_in(r.content.decode())
    assert (
        not Device.objects.exists() and not AuditEntry.objects.filter(action__startswith="device.").exists()
    )


def test_device_page_edit_link_and_history_card_by_role(admin, operator, fabric):
    admin.post(ADD, _body(fabric, community=SECRETS[0]))
    dev = Device.objects.get(name="leaf1")
    page = operator.get(f"/devices/{dev.pk}/").content.decode()
    assert 'id="device-edit"' not in page and 'id="device-charts"' in page
    assert f'data-history-url="/api/devices/devices/{dev.pk}/history/"' in page
    _no_secret_in(page)
    assert 'id="device-edit"' in admin.get(f"/devices/{dev.pk}/").content.decode()


@pytest.mark.parametrize(
    "field, value",
    [
        ("address", "a" * 70 + ".example.org"),  # a DNS label over 63: idna UnicodeError in the trap receiver
        ("address", "☃.example"),  # not IDNA-encodable
        ("address", "10.0.0.1 evil"),
        ("address", "10.0.0.999"),
        ("address", "-leaf1"),
        ("poll_interval_s", 1e12),  # last poll + 31,700 years: OverflowError in every due_devices call
    ],
)
def test_bad_address_or_interval_is_a_located_error_and_nothing_stored(admin, fabric, field, value):
    r = admin.post(ADD, _body(fabric, community=SECRETS[0], **{field: value}))
    assert r.status_code == 400
    assert field in r.context["form"].errors, r.context["form"].errors
    assert not Device.objects.exists()
    r = admin.post(
        "/api/devices/devices/", _body(fabric, community=SECRETS[0], **{field: value}), format="json"
    )
    assert r.status_code == 400 and field in r.json()
    assert not Device.objects.exists()


def test_good_addresses_are_taken(admin, fabric):
    for i, address in enumerate(["10.0.0.1", "fe80::1", "leaf-01.pod2.example.org", "leaf01"]):
        r = admin.post(ADD, _body(fabric, name=f"d{i}", community=SECRETS[0], address=address))
        assert r.status_code == 302, (address, r.content.decode()[:500])
    assert Device.objects.count() == 4


def test_due_devices_survives_a_stored_huge_interval(fabric):
    """A device stored before the form checked the interval must not stop the others' polls."""
    from datetime import timedelta

    from django.utils import timezone

    from devices.services.schedule import due_devices

    now = timezone.now()
    Device.objects.create(fabric=fabric, name="far", address="10.0.0.2", poll_interval_s=1e300,
                          last_poll_at=now - timedelta(hours=1))  # fmt: skip
    ok = Device.objects.create(
        fabric=fabric, name="ok", address="10.0.0.3", last_poll_at=now - timedelta(hours=1)
    )
    assert [d.name for d in due_devices(now=now)] == [ok.name]
