"""Ethernet switches in the heatmap snapshot (``devices.heatmap``), from a real recording served by
snmpsim with counters moved between two polls: one row per device, one cell per Ethernet
interface carrying the poller's own utilisation (not recomputed), the down port flagged."""

from __future__ import annotations

import time

import pytest
from django.core.cache import cache

from devices import mibs
from devices.heatmap import ETHERNET_IF_TYPES, publish, state_key
from devices.models import Interface
from devices.services.poll import poll_devices
from telemetry.producer import PRECISION
from tests.support.snmp_counters import set_counters

pytestmark = [pytest.mark.snmpsim, pytest.mark.django_db(transaction=False)]


def test_ethernet_rows_carry_the_pollers_rates(agent, make_device, viewer, eth_fabric):
    set_counters(agent, "msn-moving", 5, True, in_octets=10**12, out_octets=10**9, in_pkts=1, out_pkts=1)
    dev = make_device("msn-moving")
    t0 = time.monotonic()
    poll_devices([dev])
    set_counters(agent, "msn-moving", 5, True, in_octets=10**12 + 30_000_000_000, out_octets=10**9,
                  in_pkts=2, out_pkts=2)  # fmt: skip
    agent.set_values("msn-moving", {f"{mibs.IF_OPER}.5": ("2", "1")})
    poll_devices([dev], inventory=False)
    between = time.monotonic() - t0  # at least the time between the two polls' counter reads
    snap = viewer.get(f"/api/fabric/heatmap/{eth_fabric.pk}/").json()
    assert snap["tiers"] == [{"tier": "ethernet", "name": "Ethernet (SNMP)", "rows": 1}]
    [row] = snap["rows"]
    ifaces = list(
        Interface.objects.filter(device=dev, present=True, if_type__in=ETHERNET_IF_TYPES).order_by("if_index")
    )
    assert row["node"] == -dev.pk and row["name"] == "msn-moving" and row["num_ports"] == len(ifaces)
    assert row["url"] == f"/devices/{dev.pk}/"
    assert len(snap["cells"]) == len(ifaces) and snap["columns"] == len(ifaces)
    cells = {c[0]: c for c in snap["cells"]}
    swp2 = Interface.objects.get(device=dev, if_index=5)
    col = [i.pk for i in ifaces].index(swp2.pk) + 1
    assert row["ports"][str(col)] == "swp2"
    cell = cells[-swp2.pk]
    assert cell[:3] == [-swp2.pk, -dev.pk, col]
    # 30 GB between the two polls on a 200 Gb/s port: at least that over the wall time both took
    # (the bound holds however loaded the machine is; the rate is the poller's, in bytes/s)
    assert swp2.speed_mbps == 200_000
    assert swp2.in_bytes_per_s >= 30_000_000_000 / between
    # utilisation is the rate over the port's speed, at most 1 (a poll interval under 1.2 s)
    assert swp2.utilisation == pytest.approx(min(1.0, swp2.in_bytes_per_s * 8 / 200e9), rel=1e-6)
    # at least the 30 GB over the polls' wall time on 200 Gb/s (1.2 s of traffic: 1 under ~1.2 s; a
    # fixed "> 0.5" failed when the two polls took over 2.4 s on a loaded machine)
    assert swp2.utilisation >= min(1.0, 30_000_000_000 * 8 / 200e9 / between) * (1 - 1e-9) > 0
    assert cell[3] == round(swp2.utilisation, PRECISION) and cell[4] == round(swp2.congestion, PRECISION)
    assert cell[6:] == [0, 0]  # a rate this poll, up
    down = [i for i in ifaces if i.admin_status == "up" and i.oper_status != "up"]
    assert len(down) == 1 and cells[-down[0].pk][7] == 1
    # the live delta sent after a poll: the same cells, marked as the devices' own
    cache.delete(state_key(eth_fabric.pk))
    payload = publish(eth_fabric.pk)
    assert payload["source"] == "devices" and payload["full"] is True
    assert sorted(payload["cells"]) == sorted(snap["cells"])
    # nothing moved since: the next delta carries no cell; one interface going down, only its own
    assert publish(eth_fabric.pk)["cells"] == []
    Interface.objects.filter(pk=swp2.pk).update(oper_status="down")
    again = publish(eth_fabric.pk)
    assert "full" not in again and again["cells"] == [[*cell[:7], 1]]


def test_ib_fabric_heatmap_has_no_ethernet_rows(viewer, db):
    from fabric.models import Fabric

    f = Fabric.objects.create(name="ib")
    snap = viewer.get(f"/api/fabric/heatmap/{f.pk}/").json()
    assert snap["rows"] == [] and snap["tiers"] == []
