"""A device's open alarms are keyed by its name (``devices.event_types``): renaming it or disabling
its polling clears them with the reason (nothing would clear the old keys any more; the next poll
raises what still holds under the new name), and deleting a device clears the other devices'
LLDP link-down alarms towards it. Real recordings polled from snmpsim; changes through the API."""

from __future__ import annotations

import pytest

from accounts.models import AuditEntry
from devices import mibs
from devices.models import Neighbour
from devices.services.poll import poll_devices
from events.models import Alarm, AlarmState

from .conftest import RECORDINGS

pytestmark = [pytest.mark.snmpsim, pytest.mark.django_db(transaction=False)]

SWP2_OPER = f"{mibs.IF_OPER}.5"


@pytest.fixture
def swp2_down(agent, make_device):
    """msn-moving polled with swp2 operationally down (admin up): its interface-down alarm is open."""
    agent.set_values("msn-moving", {SWP2_OPER: ("2", "1")})
    dev = make_device("msn-moving")
    poll_devices([dev])
    agent.set_values("msn-moving", {SWP2_OPER: ("2", "2")})
    try:
        poll_devices([dev], inventory=False)
        alarm = Alarm.objects.open().get(code="device.interface_down", object_key="msn-moving/swp2")
        yield dev, alarm
    finally:
        agent.set_values("msn-moving", {SWP2_OPER: ("2", "1")})


def test_rename_moves_the_open_alarms_to_the_new_name(swp2_down, users, admin, agent):
    """The alarm follows the rename (same alarm, new key and name), and the next poll's events,
    keyed by the new name, clear it: swp2 up again."""
    dev, alarm = swp2_down
    r = admin.patch(f"/api/devices/devices/{dev.pk}/", {"name": "leaf-a"}, content_type="application/json")
    assert r.status_code == 200, r.content
    alarm.refresh_from_db()
    assert alarm.state == AlarmState.ACTIVE
    assert (alarm.object_key, alarm.object_repr) == ("leaf-a/swp2", "leaf-a swp2")
    assert not Alarm.objects.open().filter(object_key__startswith="msn-moving").exists()
    dev.refresh_from_db()
    poll_devices([dev], inventory=False)  # still down: the same alarm, not a second one
    assert (
        Alarm.objects.open().filter(code="device.interface_down", object_key__endswith="/swp2").count() == 1
    )
    agent.set_values("msn-moving", {SWP2_OPER: ("2", "1")})
    poll_devices([dev], inventory=False)
    alarm.refresh_from_db()
    assert alarm.state == AlarmState.CLEARED and alarm.cleared_by is None


def test_disabling_polling_clears_the_devices_alarms(swp2_down, users, admin):
    dev, alarm = swp2_down
    own = set(Alarm.objects.open().filter(object_key__startswith="msn-moving").values_list("pk", flat=True))
    assert alarm.pk in own
    total = Alarm.objects.open().count()
    r = admin.patch(f"/api/devices/devices/{dev.pk}/", {"enabled": False}, content_type="application/json")
    assert r.status_code == 200, r.content
    alarm.refresh_from_db()
    assert alarm.state == AlarmState.CLEARED and alarm.clear_reason == "polling disabled"
    assert alarm.cleared_by == users["admin"]
    assert not Alarm.objects.open().filter(object_key__startswith="msn-moving").exists()
    assert Alarm.objects.open().count() == total - len(own)
    assert set(Alarm.objects.filter(clear_reason="polling disabled").values_list("pk", flat=True)) == own
    # one audited clear each; enabling again clears nothing more
    r = admin.patch(f"/api/devices/devices/{dev.pk}/", {"enabled": True}, content_type="application/json")
    assert r.status_code == 200 and AuditEntry.objects.filter(action="alarm.clear").count() == len(own)


def test_deleting_a_device_clears_the_link_down_alarms_towards_it(agent, snmp_dir, make_device, users, admin):
    """sonic-edit stops seeing its LLDP neighbour xxxxx-xxx-xxx-sw-acc02 (link-down alarm naming it); that
    neighbour is then a managed device, and deleting it clears the alarm (nothing else would)."""
    from tests.support import snmprec

    rec = snmprec.read(snmp_dir / RECORDINGS["sonic"])
    agent.set_values("sonic-edit", {})
    dev = make_device("sonic-edit")
    poll_devices([dev])
    n = Neighbour.objects.get(device=dev, sys_name="xxxxx-xxx-xxx-sw-acc02")  # row 2145.48.28
    rows = [oid for oid in rec if oid.startswith(mibs.LLDP_REM + ".") and oid.endswith(".2145.48.28")]
    assert rows
    agent.delete_values("sonic-edit", rows)
    try:
        poll_devices([dev], inventory=False)
    finally:
        agent.set_values("sonic-edit", snmprec.recorded(snmp_dir / RECORDINGS["sonic"], rows))
    key = f"sonic-edit/{n.local_port}-{n.sys_name}/{n.port_id}"
    alarm = Alarm.objects.open().get(code="device.link_down", object_key=key)
    other = Alarm.objects.open().exclude(pk=alarm.pk).count()
    neighbour = make_device(n.sys_name.upper(), community="no-such-community")  # never polled
    assert admin.delete(f"/api/devices/devices/{neighbour.pk}/").status_code == 204
    alarm.refresh_from_db()
    assert alarm.state == AlarmState.CLEARED and alarm.cleared_by == users["admin"]
    assert alarm.clear_reason == f"neighbour {n.sys_name.upper()} deleted"
    assert Alarm.objects.open().count() == other  # sonic-edit's other alarms stay
