"""Browser test of the map's Ethernet layer: an Admin adds an SNMP device with the device form
(the real page), the device is polled from a real agent (snmpsim serving the SONiC recording's
LLDP table), and the IB fabric's map draws its Ethernet links beside the IB cables, with their
legend entry and a panel for the device; the device page charts its history; the heatmap has
the switch's row and applies the poller's live deltas. Expected values come from the REST API."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tests.support.map_pages import api_get, import_file, login, open_map

pytestmark = [pytest.mark.browser, pytest.mark.snmpsim]

SMALL = "ibnetdiscover/ufm_small_topo_file.ibnetdiscover.txt"
SONIC = "snmp/librenms_dell-sonic-4.4.1_e3248p.snmprec"


def test_ethernet_links_beside_ib_links(weft_server, browser_page, realdata):
    from lab.snmpsim import SnmpSim, snmpsim_available

    if not snmpsim_available():
        pytest.skip("snmpsim is not installed")
    if not (realdata / SONIC).is_file():
        pytest.skip(f"{realdata / SONIC} is absent")
    server, page = weft_server, browser_page
    summary = import_file(server, realdata / SMALL, "ib")
    with SnmpSim({"sonic": realdata / SONIC}) as agent:
        login(page, server, "admin", next_url="/devices/new/")
        fabric = api_get(page, server, "/api/fabric/fabrics/?name=ib")["results"][0]
        page.select_option("#id_fabric", str(fabric["id"]))
        page.fill("#id_name", "sonic")
        page.fill("#id_address", agent.host)
        page.fill("#id_port", str(agent.port))
        page.select_option("#id_version", "2c")
        page.fill("#id_community", "sonic")
        page.click("#device-form button")
        page.wait_for_selector("#device-info")
        device = api_get(page, server, "/api/devices/devices/?name=sonic")["results"][0]
        assert device["community_set"] is True
        server.manage("poll_devices", "--device", "sonic")
    neighbours = api_get(page, server, f"/api/devices/neighbours/?device={device['id']}&limit=500")
    assert neighbours["count"] == 23
    systems = {n["sys_name"] or n["chassis_id"] for n in neighbours["results"]}

    data = open_map(page, server, "ib")
    assert int(data["links"]) == summary["links"]  # the IB cables are all still there
    assert int(data["ethLinks"]) == 23 and int(data["ethDownLinks"]) == 0
    assert int(data["ethNodes"]) == 1 + len(systems)
    assert int(data["nodes"]) == summary["switches"] + summary["cas"] + summary["routers"] + 1 + len(systems)
    edges = page.evaluate("() => window.weftMap.ethernetEdges()")
    assert {e["b"] if e["a"] == "sonic" else e["a"] for e in edges} == systems
    assert sum(e["n"] for e in edges) == 23
    assert {e["colour"] for e in edges} == {"#e3b341"}  # the Ethernet style, none down
    legend = page.locator("#map-legend li[data-legend=ethernet]")
    assert legend.inner_text() == "Ethernet (LLDP) (23)"
    assert "Ethernet: 23 links" in page.inner_text("#map-status")

    # an LLDP neighbour found by name with the map's search; Enter selects it
    host = sorted(systems)[0]
    page.fill("#map-search", host)
    page.wait_for_selector(f"#map-results li[data-eth-node='{host}']")
    page.press("#map-search", "Enter")
    page.wait_for_selector(f"#map[data-selected='{host}']")
    assert page.text_content("#panel-title") == host
    assert page.locator("#panel-eth-links li").count() == 1  # its link to the switch
    page.keyboard.press("Escape")
    page.wait_for_selector("#map:not([data-selected])")

    # the device on the map: click it where sigma draws it, its panel lists its Ethernet links
    # once the camera is still and its frame drawn (weftMap.settled): where a click lands
    pos = page.wait_for_function(
        "n => window.weftMap.settled() && window.weftMap.ethPosition(n)", arg="sonic"
    ).json_value()
    page.mouse.click(pos["x"], pos["y"])
    page.wait_for_selector("#map[data-selected='sonic']")
    assert page.text_content("#panel-title") == "sonic"
    assert page.locator("#panel-eth-links li").count() == len(systems)
    assert page.get_attribute("#panel-title a", "href") == f"/devices/{device['id']}/"

    # the device page draws its history: the interface rates and one chart per sensor kind
    sensors = api_get(page, server, f"/api/devices/sensors/?device={device['id']}&limit=500")["results"]
    page.goto(f"{server.url}/devices/{device['id']}/")
    page.wait_for_selector("#device-charts[data-state=ok], #device-charts[data-state=error]")
    charts = page.eval_on_selector("#device-charts", "el => ({...el.dataset})")
    assert charts["state"] == "ok" and int(charts["points"]) >= 1
    assert int(charts["sensorCharts"]) == len({s["kind"] for s in sensors}) > 0
    assert page.locator("#device-charts .uplot").count() == 2 + len({s["kind"] for s in sensors})
    # its times as the port page's (weft/timecharts.js): ISO dates, 24-hour clock, server time zone,
    # the date above the first tick and where the day changes
    zone = ZoneInfo(page.get_attribute("#device-charts", "data-tz"))
    start = datetime(2026, 12, 1, 22, 15, tzinfo=zone)
    splits = [int((start + timedelta(minutes=m)).timestamp()) for m in (0, 10, 120)]
    ticks = page.evaluate(
        "s => { const u = weftDeviceCharts.charts.rates; return u.axes[0].values(u, s, 0, 110, 600); }",
        splits,
    )
    assert ticks == ["2026-12-01\n22:15", "22:25", "2026-12-02\n00:15"]
    legend = page.evaluate(
        "t => { const u = weftDeviceCharts.charts.load; return u.series[0].value(u, t); }", splits[0] + 7
    )
    assert legend == "2026-12-01 22:15:07"

    # the heatmap has the switch's row; a live delta from the devices poller recolours its cell
    snap = api_get(page, server, f"/api/fabric/heatmap/{fabric['id']}/")
    [row] = [r for r in snap["rows"] if r.get("kind") == "ethernet"]
    cell = next(c for c in snap["cells"] if c[1] == row["node"])
    page.goto(f"{server.url}/heatmap/{fabric['id']}/")
    page.wait_for_function("() => window.weftHeatmap && window.weftHeatmap.findPort('sonic', 1) !== null")
    assert page.evaluate("() => window.weftHeatmap.findPort('sonic', 1)") == cell[0]
    got = page.evaluate("p => window.weftHeatmap.cellState(p)", cell[0])
    assert (got["utilisation"], got["congestion"], got["down"]) == (cell[3], cell[4], cell[7])
    delta = {"type": "heatmap.delta", "payload": {"fabric": fabric["id"], "sweep": 0, "at": snap["now"],
             "interval_s": 0, "status": "ok", "source": "devices", "cells": [[*cell[:3], 0.75, 0.25, 0, 0, 0]]}}  # fmt: skip
    page.evaluate("m => window.weftHeatmap.applyMessage(m)", delta)
    got = page.evaluate("p => window.weftHeatmap.cellState(p)", cell[0])
    assert (got["utilisation"], got["congestion"], got["stale"]) == (0.75, 0.25, 0)

    # polling disabled with the device form: still drawn, greyed with its last-known links, and
    # the devices list says so
    page.goto(f"{server.url}/devices/{device['id']}/edit/")
    page.uncheck("#id_enabled")
    page.click("#device-form button")
    page.wait_for_selector("#device-info")
    assert api_get(page, server, f"/api/devices/devices/{device['id']}/")["enabled"] is False
    data = open_map(page, server, "ib")
    assert int(data["ethLinks"]) == 0 and int(data["ethStaleLinks"]) == 23
    assert int(data["ethNodes"]) == 1 + len(systems)
    edges = page.evaluate("() => window.weftMap.ethernetEdges()")
    assert {e["colour"] for e in edges} == {"#6e7681"} and all(e["stale"] for e in edges)
    assert sum(e["n"] for e in edges) == 23
    stale = page.locator("#map-legend li[data-legend=ethernet-stale]")
    assert stale.inner_text() == "Polling disabled (1 devices, 23 last-known links)"
    page.goto(f"{server.url}/devices/")
    assert "Polling disabled" in page.inner_text("#device-table tr[data-device=sonic]")
