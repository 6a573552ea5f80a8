"""The open network map follows a link flap live (Chromium against a server on a lab fabric).

A 2-level fat tree runs in the lab (ibsim + OpenSM); the server (``manage.py serve``) listens to
the SM's notices. Pulling a leaf-spine cable must turn that edge Down (red) on the already open
map within seconds, with the legend and status counting it, and putting it back must clear it,
all without a reload. Checked through the page's hooks (``window.weftMap.edgeState``), not pixels.
"""

from __future__ import annotations

import time

import pytest

from lab import netgen
from tests.browser_support import login
from tests.support.server_api import admin_token, api

pytestmark = [pytest.mark.browser, pytest.mark.lab, pytest.mark.slow]

RED = "#f85149"  # static/fabric/map/base.js STATE_COLOURS[1]


def _wait_subscribed(server, fabric_id: int, timeout: float = 60.0) -> None:
    """Wait until the server's SM-notice listener of the fabric is subscribed (its supervisor
    picks a new fabric up at its next rescan, WEFT_NOTICE_RESCAN_S)."""
    token = admin_token(server)
    deadline = time.monotonic() + timeout
    while True:
        notices = api(server, token, "GET", f"/api/fabric/fabrics/{fabric_id}/")["notices"] or {}
        if notices.get("state") == "subscribed":
            return
        assert time.monotonic() < deadline, f"the notice listener is not subscribed: {notices}"
        time.sleep(0.2)


def _live_map(lab_factory, weft_server_factory, page, poll_s: str = "60"):
    """A 2-level fat-tree lab (2 leaves × 2 hosts, 2 spines), a server discovering it and
    subscribed to its SM's notices, and ``page`` (signed in as a viewer) on its map, drawn and
    live. Returns ``(lab, server)``."""
    lab = lab_factory(netgen.fat_tree_2level(2, 2, 2))
    server = weft_server_factory(WEFT_POLL_INTERVAL_S=poll_s, WEFT_DISCOVERY_INTERVAL_S="3600")
    fabric = api(
        server, admin_token(server), "POST", "/api/fabric/fabrics/", {"name": "lab", "tool_env": lab.tool_env}
    )
    server.manage("discover", "--fabric", "lab")
    _wait_subscribed(server, fabric["id"])
    login(page, server, "viewer")
    page.goto(f"{server.url}/fabric/map/?fabric={fabric['id']}")
    page.wait_for_function(
        "() => { const m = document.getElementById('map'); return m.dataset.state === 'ready' && m.dataset.live === '1'; }",
        timeout=30000,
    )
    return lab, server


def test_open_map_shows_a_pulled_cable_down_and_back(lab_factory, weft_server_factory, browser_page):
    page = browser_page
    lab, _server = _live_map(lab_factory, weft_server_factory, page)
    leaf, spine = (
        lab.guid_of("S-0c42a10300a00200"),
        lab.guid_of("S-0c42a10300a00000"),
    )  # leaf-01 [3] - spine-01 [1]
    before = page.evaluate("([a, b]) => weftMap.edgeState(a, b)", [leaf, spine])
    assert before["down"] == 0 and before["n"] == 1 and before["colour"] != RED, before
    links = int(page.get_attribute("#map", "data-links"))
    assert page.get_attribute("#map", "data-down-links") == "0"

    started = time.monotonic()
    lab.unlink("S-0c42a10300a00200", 3)
    page.wait_for_function(
        "([a, b]) => { const s = weftMap.edgeState(a, b); return s && s.down === 1; }",
        arg=[leaf, spine],
        timeout=15000,
    )
    elapsed = time.monotonic() - started
    down = page.evaluate("([a, b]) => weftMap.edgeState(a, b)", [leaf, spine])
    assert down["colour"] == RED and down["n"] == 0, down
    # counts agree with what is drawn: one link fewer up, one Down, in the status and the legend
    assert page.get_attribute("#map", "data-links") == str(links - 1)
    assert page.get_attribute("#map", "data-down-links") == "1"
    assert "1 down" in page.inner_text("#map-status")
    assert page.inner_text("#map-legend li[data-legend='Down']") == "Down (1)"  # speed mode
    page.select_option("#map-colour", "state")
    assert page.inner_text("#map-legend li[data-legend='Down']") == "Down (1)"
    assert page.inner_text("#map-legend li[data-legend='Active']") == f"Active ({links - 1})"
    assert page.is_hidden("#map-changed"), "a port-state change is applied in place, not by a reload"

    lab.relink("S-0c42a10300a00200", 3)
    page.wait_for_function(
        "([a, b]) => { const s = weftMap.edgeState(a, b); return s && s.down === 0 && s.n === 1 && s.state === 4; }",
        arg=[leaf, spine],
        timeout=20000,
    )
    back = page.evaluate("([a, b]) => weftMap.edgeState(a, b)", [leaf, spine])
    assert back["colour"] != RED, back
    assert page.get_attribute("#map", "data-down-links") == "0"
    assert page.inner_text("#map-legend li[data-legend='Active']") == f"Active ({links})"
    assert page.locator("#map-legend li[data-legend='Down']").count() == 0
    assert page.is_hidden("#map-changed")
    print(f"map: edge Down {elapsed:.2f} s after the unlink")


def test_open_map_redraws_when_a_hosts_only_cable_is_pulled_and_back(
    lab_factory, weft_server_factory, browser_page
):
    """A host's only cable pulled: the host leaves the topology (its node set changes), so the map
    redraws itself from the whole payload, and keeps following the flap: after the cable is back
    the host's link is drawn up again and nothing is counted Down (the map used to stop applying
    updates once the node set changed, showing the link red until a reload)."""
    page = browser_page
    lab, _server = _live_map(lab_factory, weft_server_factory, page, poll_s="5")
    # leaf-02 [1] - host003 (the lab's SM runs on host001, the server's notice listener on host004:
    # their cables stay)
    leaf_name, leaf_port = "S-0c42a10300a00300", 1
    leaf, host = lab.guid_of(leaf_name), lab.guid_of("H-1c34da0300400210")
    assert page.evaluate("([a, b]) => weftMap.edgeState(a, b)", [leaf, host])["down"] == 0

    lab.unlink(leaf_name, leaf_port)
    # Down at once (the SM's notice), then gone: the discovery that finds the host unreachable
    # removes it, and the open map redraws itself without it
    page.wait_for_function(
        "([a, b]) => { const s = weftMap.edgeState(a, b); return !s || s.down === 1; }",
        arg=[leaf, host],
        timeout=20000,
    )
    page.wait_for_function(
        "(h) => document.getElementById('map').dataset.reloads === '1' && !weftMap.data.nodes.guid.includes(h)",
        arg=host,
        timeout=30000,
    )
    assert page.is_visible("#map-changed")
    lab.relink(leaf_name, leaf_port)
    page.wait_for_function(
        "([a, b]) => { const s = weftMap.edgeState(a, b); return s && s.down === 0 && s.n === 1; }",
        arg=[leaf, host],
        timeout=30000,
    )
    page.wait_for_function("() => document.getElementById('map').dataset.downLinks === '0'", timeout=20000)
    assert int(page.get_attribute("#map", "data-reloads")) >= 2  # the host back is a node change too
    assert page.evaluate("([a, b]) => weftMap.edgeState(a, b)", [leaf, host])["colour"] != RED
