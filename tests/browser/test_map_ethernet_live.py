"""The open map follows the Ethernet layer live, and its "CAs" box hides the Ethernet hosts
(Chromium against a server whose in-process beat polls a real agent: snmpsim serving the SONiC
recording's LLDP table).

The agent starts without one LLDP system (its rows deleted from the served copy); the map opens
with the others. The rows put back, the server's next poll sees the system: the open map must
draw it and its link in place (no reload: a marker set on the page survives, the reload banner
stays hidden). Expected names and counts come from the recording and the REST API.
"""

from __future__ import annotations

import time

import pytest

from devices import mibs
from tests.support import snmprec
from tests.support.map_pages import api_get, import_file, login, open_map
from tests.support.server_api import admin_token, api

pytestmark = [pytest.mark.browser, pytest.mark.snmpsim]

SMALL = "ibnetdiscover/ufm_small_topo_file.ibnetdiscover.txt"
SONIC = "snmp/librenms_dell-sonic-4.4.1_e3248p.snmprec"


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} not within {timeout} s")


def test_new_lldp_system_drawn_live_and_cas_box_hides_ethernet_hosts(
    weft_server_factory, browser_page, realdata
):
    from lab.snmpsim import SnmpSim, snmpsim_available

    if not snmpsim_available():
        pytest.skip("snmpsim is not installed")
    if not (realdata / SONIC).is_file():
        pytest.skip(f"{realdata / SONIC} is absent")
    system, oids = snmprec.lone_row(snmprec.read(realdata / SONIC), mibs.LLDP_REM_SYS_NAME, mibs.LLDP_REM)

    server = weft_server_factory(WEFT_SNMP_TICK_S="1", WEFT_DISCOVERY_INTERVAL_S="3600")
    summary = import_file(server, realdata / SMALL, "ib")
    page = browser_page
    with SnmpSim({"sonic": realdata / SONIC}) as agent:
        agent.delete_values("sonic", oids)
        token = admin_token(server)
        fabric = api(server, token, "GET", "/api/fabric/fabrics/?name=ib")["results"][0]
        device = api(server, token, "POST", "/api/devices/devices/", {
            "fabric": fabric["id"], "name": "sonic", "address": agent.host, "port": agent.port, "version": "2c",
            "community": "sonic", "poll_interval_s": 1, "timeout_s": 2, "retries": 1,
        })  # fmt: skip
        neighbours = f"/api/devices/neighbours/?device={device['id']}&limit=500"
        _wait(
            lambda: api(server, token, "GET", neighbours)["count"] == 22, 60, "the first poll's 22 neighbours"
        )
        systems = {n["sys_name"] or n["chassis_id"] for n in api(server, token, "GET", neighbours)["results"]}
        assert system not in systems

        login(page, server, "viewer")
        data = open_map(page, server, "ib")
        page.wait_for_function("() => document.getElementById('map').dataset.live === '1'", timeout=30000)
        assert int(data["ethNodes"]) == 1 + len(systems) and int(data["ethLinks"]) == 22
        assert int(data["nodes"]) == summary["switches"] + summary["cas"] + summary["routers"] + 1 + len(
            systems
        )
        assert page.evaluate("n => window.weftMap.ethDrawn(n)", system) is None

        # the "CAs" box hides the IB CAs and the Ethernet hosts with them, not the Ethernet switch
        ca = api_get(page, server, "/api/fabric/nodes/?fabric_name=ib&type=ca&limit=1")["results"][0]
        host = sorted(systems)[0]
        drawn = "([g, h]) => [weftMap.drawn(g).hidden, weftMap.ethDrawn(h).hidden, weftMap.ethDrawn('sonic').hidden]"
        assert page.evaluate(drawn, [ca["node_guid"], host]) == [False, False, False]
        assert page.evaluate("h => weftMap.ethDrawn(h).kind", host) == "host"
        page.uncheck("#map-show-cas")
        assert page.evaluate(drawn, [ca["node_guid"], host]) == [True, True, False]
        page.check("#map-show-cas")
        assert page.evaluate(drawn, [ca["node_guid"], host]) == [False, False, False]

        # the system comes back on the agent: the server's next poll sees it, the open map adds it
        page.evaluate("() => { window.__notReloaded = 1; }")
        started = time.monotonic()
        agent.set_values("sonic", snmprec.recorded(realdata / SONIC, oids))
        page.wait_for_function("n => window.weftMap.ethDrawn(n) !== null", arg=system, timeout=30000)
        elapsed = time.monotonic() - started
        page.wait_for_function(
            "() => document.getElementById('map').dataset.ethLinks === '23'", timeout=10000
        )
    assert page.evaluate("() => window.__notReloaded") == 1, "the page was reloaded"
    assert page.is_hidden("#map-changed"), "an Ethernet change is applied in place, not by a reload"
    data = page.eval_on_selector("#map", "el => ({...el.dataset})")
    assert int(data["ethNodes"]) == 2 + len(systems)
    assert int(data["nodes"]) == summary["switches"] + summary["cas"] + summary["routers"] + 2 + len(systems)
    edges = page.evaluate("() => window.weftMap.ethernetEdges()")
    assert {e["b"] if e["a"] == "sonic" else e["a"] for e in edges} == systems | {system}
    assert page.inner_text("#map-legend li[data-legend=ethernet]") == "Ethernet (LLDP) (23)"
    # the new host follows the CAs box too
    page.uncheck("#map-show-cas")
    assert page.evaluate("n => window.weftMap.ethDrawn(n).hidden", system) is True
    print(f"map: new LLDP system drawn {elapsed:.2f} s after the agent showed it")
