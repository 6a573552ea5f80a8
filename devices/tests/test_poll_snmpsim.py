"""Polling real recordings served by a real agent (snmpsim on loopback): discovery checked against
the recording text, exact rates from counters moved between polls, the 32-bit path through a
wrap, a dead device among live ones, SNMPv3 with right and wrong keys, LLDP links and interface
state into events and alarms."""

from __future__ import annotations

import pytest

from devices import mibs
from devices.models import Device, Interface, Neighbour, Sensor
from devices.services.poll import poll_devices
from events.models import Alarm
from tests.support import snmprec
from tests.support.snmp_counters import set_counters

from .conftest import RECORDINGS, V3

pytestmark = [
    pytest.mark.snmpsim,
    pytest.mark.django_db(transaction=False),
    pytest.mark.backend,
]  # backend: the poller's raw executemany UPDATE

#: interfaces per recording (ifIndex values with an ifDescr or ifName)
COUNTS = {"msn4600": 98, "sonic": 56, "arista7050": 55, "arista7150": 59, "nohc": 69, "nxos": 59}
#: ENTITY-SENSOR-MIB scale → power of ten (RFC 3433), written out here as the test's own oracle
SCALE = {8: -3, 9: 0, 10: 3}


def _open_alarm(code: str, key: str) -> Alarm | None:
    return Alarm.objects.open().filter(code=code, object_key=key).first()


@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_recording_discovered_as_recorded(name, make_device, snmp_dir):
    """Interface count, names, speeds, HC octets and every sensor value equal the recording's."""
    rec = snmprec.read(snmp_dir / RECORDINGS[name])
    dev = make_device(name)
    [summary] = poll_devices([dev])
    assert summary["status"] == "ok", summary
    names = snmprec.column(rec, mibs.IF_NAME)
    descrs = snmprec.column(rec, mibs.IF_DESCR)
    indexes = set(names) | set(descrs)
    assert len(indexes) == COUNTS[name]
    rows = {i.if_index: i for i in Interface.objects.filter(device=dev)}
    assert sorted(rows) == sorted(int(i) for i in indexes)
    high = snmprec.column(rec, mibs.IF_HIGH_SPEED)
    hc_in = snmprec.column(rec, mibs.IF_HC_IN_OCTETS)
    for idx in indexes:
        row = rows[int(idx)]
        assert row.name == (str(names.get(idx) or "").strip() or str(descrs[idx]).strip())
        if high.get(idx):
            assert row.speed_mbps == high[idx]
        if idx in hc_in:
            assert row.hc is True and row.counters["in_octets"] == hc_in[idx]
        else:
            assert row.hc is False
    types = snmprec.column(rec, mibs.SENSOR_TYPE)
    sensors = {s.index: s for s in Sensor.objects.filter(device=dev)}
    assert len(sensors) == len(types)
    for idx in types:
        raw = snmprec.column(rec, mibs.SENSOR_VALUE)[idx]
        scale = snmprec.column(rec, mibs.SENSOR_SCALE)[idx]
        prec = snmprec.column(rec, mibs.SENSOR_PRECISION)[idx]
        status = snmprec.column(rec, mibs.SENSOR_STATUS).get(idx)
        s = sensors[int(idx)]
        assert s.raw == raw
        if status != 2:
            assert s.value == pytest.approx(raw * 10.0 ** (SCALE.get(scale, 0) - prec), rel=1e-9, abs=1e-9)
        if types[idx] == 8:
            assert s.kind == "temperature" and s.unit == "°C"
    dev.refresh_from_db()
    assert dev.sys_object_id == rec[mibs.SYS_OBJECT_ID]
    assert dev.sys_name == str(rec.get(mibs.SYS_NAME, "")).strip()
    assert dev.status == "ok" and dev.identified_at is not None


def test_msn4600_identity_and_sensors(make_device):
    """The NVIDIA MSN4600's chassis model/serial and a PSU temperature read exactly."""
    dev = make_device("msn4600")
    poll_devices([dev])
    dev.refresh_from_db()
    assert (dev.vendor, dev.model, dev.serial) == ("Cumulus", "MSN4600-VS2FC", "MTSERIALNUMER01")
    psu_temp = Sensor.objects.get(device=dev, index=100000001)
    assert (psu_temp.name, psu_temp.kind, psu_temp.value, psu_temp.status) == (
        "PSU1Temp1",
        "temperature",
        39.0,
        "ok",
    )
    swp2 = Interface.objects.get(device=dev, if_index=5)
    assert (swp2.name, swp2.speed_mbps, swp2.admin_status, swp2.oper_status) == ("swp2", 200000.0, "up", "up")


def test_moving_counters_give_exact_rates(agent, make_device):
    """Counters moved by known amounts between two polls: bytes/s, packets/s, utilisation and the
    discard/error deltas are exactly delta / the interval the poller measured."""
    set_counters(agent, "msn-moving", 5, True, in_octets=10**12, out_octets=5 * 10**11, in_pkts=10**9,
                  out_pkts=2 * 10**9, in_discards=100, out_errors=3)  # fmt: skip
    dev = make_device("msn-moving")
    poll_devices([dev])
    first = Interface.objects.get(device=dev, if_index=5)
    assert first.in_bytes_per_s is None and first.rate_reason == "first sample"
    set_counters(agent, "msn-moving", 5, True, in_octets=10**12 + 25_000_000_000, out_octets=5 * 10**11 + 1_000_000,
                  in_pkts=10**9 + 4_000_000, out_pkts=2 * 10**9 + 2_000, in_discards=107, out_errors=5)  # fmt: skip
    poll_devices([dev], inventory=False)
    row = Interface.objects.get(device=dev, if_index=5)
    dt = row.interval_s
    assert dt == pytest.approx((row.sampled_at - first.sampled_at).total_seconds(), abs=1e-5)
    assert dt > 0
    assert row.in_bytes_per_s == 25_000_000_000 / dt
    assert row.out_bytes_per_s == 1_000_000 / dt
    assert row.in_pkts_per_s == 4_000_000 / dt
    assert row.out_pkts_per_s == 2_000 / dt
    assert row.utilisation == min(1.0, (25_000_000_000 / dt) / (200e9 / 8))
    assert row.error_deltas == {"in_discards": 7, "out_errors": 2}
    assert row.wrapped == [] and row.reset is False and row.rate_reason == ""
    # no PFC counters on this device: the congestion signal is the egress discard share (none)
    assert row.congestion == 0.0


def test_no_hc_recording_takes_the_32bit_path_through_a_wrap(agent, make_device):
    """The Cumulus 4.2 recording has no ifHC* columns: the 32-bit ifInOctets wraps between two
    polls and the delta is counted once, exactly."""
    set_counters(
        agent, "nohc-moving", 3, False, in_octets=4_294_967_000, out_octets=1000, in_pkts=10, out_pkts=10
    )
    dev = make_device("nohc-moving")
    poll_devices([dev])
    row = Interface.objects.get(device=dev, if_index=3)
    assert row.hc is False and row.counters["in_octets"] == 4_294_967_000
    set_counters(agent, "nohc-moving", 3, False, in_octets=200, out_octets=1500, in_pkts=12, out_pkts=13)
    poll_devices([dev], inventory=False)
    row = Interface.objects.get(device=dev, if_index=3)
    assert row.wrapped == ["in_octets"]
    assert row.in_bytes_per_s == (200 + 2**32 - 4_294_967_000) / row.interval_s
    assert row.out_bytes_per_s == 500 / row.interval_s
    assert row.reset is False


def test_dead_device_is_unreachable_and_the_others_finish(make_device):
    """A device that does not answer is marked unreachable (alarm) while the live ones are stored."""
    from lab.snmpsim import free_udp_port

    dead = make_device("dead-switch", community="public", port=free_udp_port(), timeout_s=0.3, retries=0)
    live = make_device("sonic")
    out = {s["device"]: s for s in poll_devices([dead, live])}
    assert out["dead-switch"]["status"] == "unreachable"
    assert "no answer" in out["dead-switch"]["error"]
    assert out["sonic"]["status"] == "ok" and out["sonic"]["interfaces"] == COUNTS["sonic"]
    dead.refresh_from_db()
    assert dead.unreachable_since is not None
    assert _open_alarm("device.unreachable", "dead-switch").severity == "minor"
    assert not Alarm.objects.open().filter(object_key="sonic").exists()


def test_snmpv3_right_keys_poll_and_wrong_keys_fail_cleanly(make_device):
    """SNMPv3 (SHA + AES-128, context = the recording) reads the device; wrong keys end in the
    'credentials refused' status and alarm, nothing raised, nothing half-written."""
    good = make_device("v3-good", community="", version="3", user=V3["user"], auth_protocol="sha",
                       auth_key=V3["auth_key"], priv_protocol="aes128", priv_key=V3["priv_key"], context="arista7150")  # fmt: skip
    bad = make_device("v3-bad", community="", version="3", user=V3["user"], auth_protocol="sha",
                      auth_key="not-the-key", priv_protocol="aes128", priv_key=V3["priv_key"], context="arista7150",
                      timeout_s=1.0, retries=0)  # fmt: skip
    out = {s["device"]: s for s in poll_devices([good, bad])}
    assert out["v3-good"]["status"] == "ok" and out["v3-good"]["interfaces"] == COUNTS["arista7150"]
    assert out["v3-bad"]["status"] == "auth"
    assert "authentication" in out["v3-bad"]["error"].lower()
    assert V3["auth_key"] not in out["v3-bad"]["error"] and "not-the-key" not in out["v3-bad"]["error"]
    assert Interface.objects.filter(device=bad).count() == 0
    assert _open_alarm("device.auth_failed", "v3-bad") is not None
    good.refresh_from_db()
    assert good.model == "DCS-7150S-52-CL"


def test_lldp_link_down_and_up_raise_and_clear_an_alarm(agent, snmp_dir, make_device):
    """SONiC's 23 LLDP neighbours become links; one neighbour gone is a link-down alarm, back clears it."""
    rec = snmprec.read(snmp_dir / RECORDINGS["sonic"])
    agent.set_values("sonic-edit", {})  # as recorded
    dev = make_device("sonic-edit")
    poll_devices([dev])
    assert Neighbour.objects.filter(device=dev).count() == 23
    n = Neighbour.objects.get(device=dev, local_port="Eth1/19")
    assert n.interface.name == "Eth1/19"
    rows = {
        oid: v for oid, v in rec.items() if oid.startswith(mibs.LLDP_REM + ".") and oid.endswith(".134.19.18")
    }
    assert rows
    agent.delete_values("sonic-edit", list(rows))
    poll_devices([dev], inventory=False)
    assert Neighbour.objects.filter(device=dev).count() == 22
    key = f"sonic-edit/Eth1/19-{n.sys_name or n.chassis_id}/{n.port_id}"
    assert _open_alarm("device.link_down", key) is not None
    text = agent.text("sonic-edit")
    agent.set_values("sonic-edit", snmprec.recorded(snmp_dir / RECORDINGS["sonic"], rows))
    assert agent.text("sonic-edit") != text
    poll_devices([dev], inventory=False)
    assert Neighbour.objects.filter(device=dev).count() == 23
    assert _open_alarm("device.link_down", key) is None


def test_interface_down_and_hot_sensor_raise_and_clear_alarms(agent, make_device, settings):
    """swp2 operationally down while admin up: a Critical interface-down alarm at the next poll;
    up again clears it. PSU1Temp1 at 91.0 °C: temperature alarm once the sensors are due
    (``WEFT_SNMP_SENSORS_S``; states and counters are read every poll); back at 39.0 °C clears it."""
    agent.set_values(
        "msn-moving", {f"{mibs.IF_OPER}.5": ("2", "1"), f"{mibs.SENSOR_VALUE}.100000001": ("2", "390")}
    )
    dev = make_device("msn-moving")
    poll_devices([dev])
    agent.set_values(
        "msn-moving", {f"{mibs.IF_OPER}.5": ("2", "2"), f"{mibs.SENSOR_VALUE}.100000001": ("2", "910")}
    )
    settings.WEFT_SNMP_SENSORS_S = 300.0
    poll_devices([dev], inventory=False)
    down = _open_alarm("device.interface_down", "msn-moving/swp2")
    assert down is not None and down.severity == "critical"
    # the sensors were read 1 poll ago, not due: the stored reading is the old one, no alarm yet
    assert Sensor.objects.get(device=dev, index=100000001).value == 39.0
    assert _open_alarm("device.temperature_high", "msn-moving/sensor/100000001") is None
    settings.WEFT_SNMP_SENSORS_S = 0.0  # every poll
    poll_devices([dev], inventory=False)
    hot = _open_alarm("device.temperature_high", "msn-moving/sensor/100000001")
    assert hot is not None and hot.details["value"] == 91.0
    agent.set_values(
        "msn-moving", {f"{mibs.IF_OPER}.5": ("2", "1"), f"{mibs.SENSOR_VALUE}.100000001": ("2", "390")}
    )
    poll_devices([dev], inventory=False)
    assert _open_alarm("device.interface_down", "msn-moving/swp2") is None
    assert _open_alarm("device.temperature_high", "msn-moving/sensor/100000001") is None
    assert Device.objects.get(pk=dev.pk).status == "ok"


def test_lldp_remote_table_walked_only_when_its_change_time_moves(agent, make_device, settings):
    """The Arista EOS 4.20 agent has lldpStatsRemTablesLastChangeTime: a poll between inventories
    whose change time did not move reads no LLDP (fewer requests, the same 2 neighbours even though
    a row is gone from the agent); once the change time moves, the row's absence is a link-down."""
    settings.WEFT_SNMP_SENSORS_S = 3600.0
    agent.set_values("arista-lldp", {mibs.LLDP_REM_CHANGED: ("67", "1477423753")})  # as recorded
    dev = make_device("arista-lldp")
    [first] = poll_devices([dev])
    assert first["status"] == "ok" and first["neighbours"] == 2
    [again] = poll_devices([dev], inventory=False)
    dev.refresh_from_db()
    assert dev.lldp_changed_ticks == 1477423753
    # one GET of the scalars and the interface columns' walk, nothing else
    assert again["requests"] < first["requests"] and again["neighbours"] == 0
    # the neighbour on Ethernet24 (timeMark 0, local port 48, remIndex 2) leaves the agent's table
    gone = [
        ln.split("|", 1)[0]
        for ln in agent.text("arista-lldp").splitlines()
        if ln.startswith(mibs.LLDP_REM + ".") and ln.split("|", 1)[0].endswith(".0.48.2")
    ]
    assert len(gone) == 9
    agent.delete_values("arista-lldp", gone)
    poll_devices([dev], inventory=False)
    assert Neighbour.objects.filter(device=dev).count() == 2  # the change time did not move
    agent.set_values("arista-lldp", {mibs.LLDP_REM_CHANGED: ("67", "1477429999")})
    [moved] = poll_devices([dev], inventory=False)
    assert moved["neighbours"] == 1 and moved["requests"] > again["requests"]
    assert Neighbour.objects.filter(device=dev).count() == 1
    assert (
        Alarm.objects.open().filter(code="device.link_down", object_key__startswith="arista-lldp/").count()
        == 1
    )
    dev.refresh_from_db()
    assert dev.lldp_changed_ticks == 1477429999


def test_a_sensor_reading_is_one_evaluation_however_many_polls_keep_it(agent, make_device, settings):
    """Temperature alarm after 2 readings over the threshold: the polls between two sensor reads
    (``WEFT_SNMP_SENSORS_S``) do not count the stored reading again."""
    from events.models import EventPolicy

    EventPolicy.objects.filter(code="device.temperature_high").update(consecutive=2)
    settings.WEFT_SNMP_SENSORS_S = 300.0
    agent.set_values("msn-hot", {f"{mibs.SENSOR_VALUE}.100000001": ("2", "910")})
    dev = make_device("msn-hot")
    poll_devices([dev])  # reading 1: 91.0 °C
    assert Sensor.objects.get(device=dev, index=100000001).value == 91.0
    for _ in range(2):
        [s] = poll_devices([dev], inventory=False)
        assert s["status"] == "ok" and s["sensors"] == 0  # not due: not read
    assert _open_alarm("device.temperature_high", "msn-hot/sensor/100000001") is None
    settings.WEFT_SNMP_SENSORS_S = 0.0
    [s] = poll_devices([dev], inventory=False)  # reading 2
    assert s["sensors"] > 0
    hot = _open_alarm("device.temperature_high", "msn-hot/sensor/100000001")
    assert hot is not None and hot.details["value"] == 91.0
