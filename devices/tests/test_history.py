"""Device history (``devices.services.history``): each poll of a real recording served by snmpsim
writes one sample with the rates and readings the poller stored; the device page's history API
returns them; rollups average them and retention drops them as the IB counter history does."""

from __future__ import annotations

import pytest

from devices import mibs
from devices.models import DeviceSample, Interface, Sensor
from devices.services import history
from devices.services.poll import poll_devices
from telemetry.models import Resolution
from tests.support.snmp_counters import set_counters

pytestmark = [pytest.mark.snmpsim, pytest.mark.django_db(transaction=False)]


def test_polls_write_history_the_api_returns(agent, make_device, viewer, settings):
    settings.WEFT_SNMP_SENSORS_S = 0.0  # sensors read at every poll, as the counters
    set_counters(agent, "msn-moving", 5, True, in_octets=10**12, out_octets=10**9, in_pkts=1, out_pkts=1,
                  in_discards=10, out_errors=1)  # fmt: skip
    agent.set_values("msn-moving", {f"{mibs.SENSOR_VALUE}.100000001": ("2", "390")})
    dev = make_device("msn-moving")
    poll_devices([dev])
    set_counters(agent, "msn-moving", 5, True, in_octets=10**12 + 8_000_000_000, out_octets=10**9 + 4_000,
                  in_pkts=2, out_pkts=2, in_discards=15, out_errors=3)  # fmt: skip
    agent.set_values("msn-moving", {f"{mibs.SENSOR_VALUE}.100000001": ("2", "455")})
    poll_devices([dev], inventory=False)
    assert DeviceSample.objects.filter(device=dev, resolution=Resolution.RAW).count() == 2
    swp2 = Interface.objects.get(device=dev, if_index=5)
    r = viewer.get(f"/api/devices/devices/{dev.pk}/history/?start=-1h&interface=5")
    assert r.status_code == 200, r.content
    doc = r.json()
    assert doc["resolution"] == "raw" and len(doc["t"]) == 2
    i = doc["interface"]
    assert i["name"] == "swp2"
    # the poller's own values, kept to 6 significant digits
    for key in ("in_bytes_per_s", "out_bytes_per_s", "utilisation"):
        assert i[key][0] is None and i[key][1] == pytest.approx(getattr(swp2, key), rel=5e-6), key
        assert i[key][1] == float(f"{getattr(swp2, key):.6g}")
    assert i["errors"] == [None, 7]  # 5 discards + 2 errors
    psu = next(s for s in doc["sensors"] if s["index"] == 100000001)
    assert (psu["name"], psu["unit"], psu["values"]) == ("PSU1Temp1", "°C", [39.0, 45.5])
    assert len(doc["sensors"]) == Sensor.objects.filter(device=dev).count()
    bad = viewer.get(f"/api/devices/devices/{dev.pk}/history/?interface=swp2")
    assert bad.status_code == 400 and "interface" in bad.json()
    assert viewer.get(f"/api/devices/devices/{dev.pk}/history/?resolution=week").status_code == 400


def test_rollup_averages_and_retention_drops(eth_fabric, settings):
    from devices.models import Device

    dev = Device.objects.create(fabric=eth_fabric, name="leaf9", address="10.0.0.9")
    t0 = 1_800_000_000 - 1_800_000_000 % 3600  # an hour boundary
    for k, (rate, temp, errs) in enumerate([(100.0, 40.0, 2), (None, 42.0, None), (300.0, None, 3)]):
        DeviceSample.objects.create(
            device=dev, t=t0 + 10 * k, data=history.encode({7: [rate, rate, 0.5, 0.0, errs]}, {3: temp})
        )
    out = history.rollup(now=t0 + 60 + 1)
    assert out["minute"] == 1 and out["hour"] == 0
    [minute] = DeviceSample.objects.filter(resolution=Resolution.MINUTE)
    ifaces, sensors = history.decode(minute.data)
    assert minute.t == t0 and ifaces[7] == [200.0, 200.0, 0.5, 0.0, 5] and sensors[3] == 41.0
    assert history.rollup(now=t0 + 60 + 1)["minute"] == 0  # idempotent
    settings.WEFT_HISTORY_RAW_HOURS = 1
    out = history.rollup(now=t0 + 3600 + 61)
    assert out["deleted"] == 3 and out["hour"] == 1
    assert not DeviceSample.objects.filter(resolution=Resolution.RAW).exists()
