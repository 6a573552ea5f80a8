"""A device's first poll is its baseline (real recordings served by snmpsim): no rate, delta or
congestion alarm from counters that were already high, no link events for what LLDP already
showed; the one exception is an interface administratively up and operationally down, which
raises its interface-down alarm once."""

from __future__ import annotations

import re

import pytest

from devices import mibs
from devices.models import Interface
from devices.services.poll import poll_devices
from events.models import Alarm, Event
from tests.support import snmprec

from .conftest import RECORDINGS

pytestmark = [pytest.mark.snmpsim, pytest.mark.django_db(transaction=False)]

#: IF-MIB ifAdminStatus/ifOperStatus values (RFC 2863)
UP, DOWN, LOWER_LAYER_DOWN = 1, 2, 7


def _admin_up_oper_down(rec) -> set[str]:
    """ifNames (else ifDescr) of the recording's interfaces that are admin up and oper down."""
    admin = snmprec.column(rec, mibs.IF_ADMIN)
    oper = snmprec.column(rec, mibs.IF_OPER)
    names = snmprec.column(rec, mibs.IF_NAME)
    descrs = snmprec.column(rec, mibs.IF_DESCR)
    return {
        str(names.get(i) or "").strip() or str(descrs[i]).strip()
        for i in admin
        if admin[i] == UP and oper.get(i) in (DOWN, LOWER_LAYER_DOWN)
    }


def test_first_poll_is_a_baseline_with_high_counters(agent, snmp_dir, make_device):
    """Counters already at 10**9 discards and errors at first contact: no rate, no delta, no
    discard/error/congestion alarm at the first poll nor at a second one where they did not move;
    the recorded admin-up/oper-down interface raises one interface-down alarm, one event in all."""
    rec = snmprec.read(snmp_dir / RECORDINGS["msn4600"])
    expected_down = _admin_up_oper_down(rec)
    assert len(expected_down) == 1  # the MSN4600 recording has exactly one such port
    agent.set_values("msn-base", {
        f"{mibs.IF_IN_DISCARDS}.5": ("65", str(10**9)), f"{mibs.IF_OUT_ERRORS}.5": ("65", str(10**9)),
    })  # fmt: skip
    dev = make_device("msn-base")
    [summary] = poll_devices([dev])
    assert summary["status"] == "ok"
    swp2 = Interface.objects.get(device=dev, if_index=5)
    assert swp2.rate_reason == "first sample" and swp2.error_deltas is None and swp2.congestion is None
    down = Alarm.objects.open().filter(code="device.interface_down", object_key__startswith="msn-base/")
    assert {a.object_key.split("/", 1)[1] for a in down} == expected_down
    for code in (
        "device.interface_discards",
        "device.interface_errors",
        "device.congestion",
        "device.link_down",
    ):
        assert not Alarm.objects.filter(code=code).exists(), code
    assert not Event.objects.filter(
        code__in=["device.link_up", "device.link_down", "device.interface_up"]
    ).exists()

    poll_devices([dev], inventory=False)
    swp2.refresh_from_db()
    assert swp2.error_deltas == {} and swp2.rate_reason == ""  # measured now: nothing moved
    assert not Alarm.objects.filter(
        code__in=["device.interface_discards", "device.interface_errors"]
    ).exists()
    assert Event.objects.filter(code="device.interface_down", object_key__startswith="msn-base/").count() == 1
    assert Alarm.objects.open().filter(code="device.interface_down").count() == 1


def test_first_poll_alarms_down_ports_but_not_empty_cages(make_device, snmp_dir, viewer):
    """The Arista 7150 recording: its admin-up ports that are down raise alarms at the first poll;
    the admin-up ports without a transceiver (notPresent) are its baseline, not faults, and the
    devices list's "Down" count and the heatmap's down marks say the same."""
    rec = snmprec.read(snmp_dir / RECORDINGS["arista7150"])
    oper = snmprec.column(rec, mibs.IF_OPER)
    admin = snmprec.column(rec, mibs.IF_ADMIN)
    not_present = [i for i in admin if admin[i] == UP and oper.get(i) == 6]
    assert not_present  # the recording has empty cages, admin up
    dev = make_device("arista7150")
    poll_devices([dev])
    keys = set(Alarm.objects.open().filter(code="device.interface_down").values_list("object_key", flat=True))
    assert keys == {f"arista7150/{n}" for n in _admin_up_oper_down(rec)}
    assert len(keys) == 4
    html = viewer.get("/devices/").content.decode()
    row = re.search(r'<tr data-device="arista7150".*?</tr>', html, re.S).group(0)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    assert cells[7].strip() == "4", cells  # Down (admin up): not the empty cages
    snap = viewer.get(f"/api/fabric/heatmap/{dev.fabric_id}/").json()
    mine = [c for c in snap["cells"] if c[1] == -dev.pk]
    status = {i.pk: i.oper_status for i in Interface.objects.filter(device=dev)}
    marked = {-c[0] for c in mine if c[7] == 1}
    assert marked and {status[pk] for pk in marked} == {"down"}  # no notPresent cage marked
    assert marked == {-c[0] for c in mine if status[-c[0]] == "down"}
    assert any(status[-c[0]] == "notPresent" for c in mine)  # the empty cages are in the heatmap
