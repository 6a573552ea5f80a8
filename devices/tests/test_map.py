"""The Ethernet layer of the network map (``devices.maplayer``) from a real recording's LLDP
table served by snmpsim: the device and every LLDP neighbour system on the fabric's map payload,
one edge per neighbour pair with its cable count, a neighbour that disappears drawn as a down
cable while its alarm is open; the IB part is untouched."""

from __future__ import annotations

import pytest

from devices import mibs
from devices.models import Neighbour
from devices.services.poll import poll_devices
from tests.support import snmprec

from .conftest import RECORDINGS

pytestmark = [pytest.mark.snmpsim, pytest.mark.django_db(transaction=False)]


def _map(client, fabric, part=""):
    r = client.get(f"/api/fabric/fabrics/{fabric.pk}/map/" + (f"?part={part}" if part else ""))
    assert r.status_code == 200, r.content
    return r.json()


def test_lldp_neighbours_are_ethernet_links_on_the_map(agent, snmp_dir, make_device, viewer, eth_fabric):
    agent.set_values("sonic-edit", {})  # as recorded
    dev = make_device("sonic-edit")
    poll_devices([dev])
    rows = list(Neighbour.objects.filter(device=dev))
    assert len(rows) == 23
    systems = {}
    for n in rows:
        name = n.sys_name or n.chassis_id
        systems[name] = systems.get(name, 0) + 1
    eth = _map(viewer, eth_fabric)["ethernet"]
    nodes, edges = eth["nodes"], eth["edges"]
    assert nodes["name"][0] == "sonic-edit" and nodes["kind"][0] == "switch" and nodes["device"][0] == dev.pk
    assert sorted(nodes["name"][1:]) == sorted(systems) and set(nodes["kind"][1:]) == {"host"}
    drawn = {
        nodes["name"][b]: n for a, b, n in zip(edges["a"], edges["b"], edges["n"], strict=True) if a == 0
    }
    assert drawn == systems
    assert sum(edges["down"]) == 0 and eth["counts"]["links"] == 23
    assert len(set(zip(nodes["x"], nodes["y"], strict=True))) == len(nodes["name"])  # no two on one spot

    # one neighbour gone: its cable is drawn down while the device.link_down alarm is open
    rec = snmprec.read(snmp_dir / RECORDINGS["sonic"])
    gone = Neighbour.objects.get(device=dev, local_port="Eth1/19")
    oids = [o for o in rec if o.startswith(mibs.LLDP_REM + ".") and o.endswith(".134.19.18")]
    agent.delete_values("sonic-edit", oids)
    poll_devices([dev], inventory=False)
    part = _map(viewer, eth_fabric, part="edges")  # the light refresh carries the layer
    eth = part["ethernet"]
    remote = eth["nodes"]["name"].index(gone.sys_name or gone.chassis_id)
    k = next(
        i for i, (a, b) in enumerate(zip(eth["edges"]["a"], eth["edges"]["b"], strict=True)) if b == remote
    )
    assert (
        eth["edges"]["down"][k] == 1 and eth["edges"]["n"][k] == systems[gone.sys_name or gone.chassis_id] - 1
    )
    assert eth["counts"]["down_links"] == 1 and eth["counts"]["links"] == 22
    agent.set_values("sonic-edit", snmprec.recorded(snmp_dir / RECORDINGS["sonic"], oids))
    poll_devices([dev], inventory=False)
    assert _map(viewer, eth_fabric)["ethernet"]["counts"] == {**eth["counts"], "links": 23, "down_links": 0}


def test_ib_fabric_without_devices_has_an_empty_layer(viewer, db):
    from fabric.models import Fabric

    f = Fabric.objects.create(name="ib")
    eth = _map(viewer, f)["ethernet"]
    assert eth["nodes"]["name"] == [] and eth["edges"]["a"] == [] and eth["counts"]["links"] == 0


def test_a_new_lldp_system_changes_the_layer_not_the_ib_nodes(
    agent, snmp_dir, make_device, viewer, eth_fabric
):
    """A system LLDP starts to see comes in the light payload's layer (the open map adds it in
    place); the IB nodes' digest, which asks an open map to reload, stays; the poll that saw it
    is the one :func:`devices.maplayer.changed_since` names."""
    from devices import maplayer

    path = snmp_dir / RECORDINGS["sonic"]
    system, oids = snmprec.lone_row(snmprec.read(path), mibs.LLDP_REM_SYS_NAME, mibs.LLDP_REM)
    agent.set_values("sonic-edit", snmprec.recorded(path, oids))
    agent.delete_values("sonic-edit", oids)
    dev = make_device("sonic-edit")
    poll_devices([dev])
    before = _map(viewer, eth_fabric)
    assert system not in before["ethernet"]["nodes"]["name"] and before["ethernet"]["counts"]["links"] == 22
    states = maplayer.layer_states(maplayer.fabric_ids([dev]))
    poll_devices([dev], inventory=False)  # nothing new: the layer is as it was
    assert maplayer.changed_since(states) == []

    agent.set_values("sonic-edit", snmprec.recorded(path, oids))
    poll_devices([dev], inventory=False)
    assert maplayer.changed_since(states) == [eth_fabric.pk]
    part = _map(viewer, eth_fabric, part="edges")
    assert part["nodes_version"] == before["nodes_version"]
    eth = part["ethernet"]
    assert system in eth["nodes"]["name"] and eth["counts"]["links"] == 23
    k = eth["nodes"]["name"].index(system)
    assert eth["nodes"]["kind"][k] == "host"
    assert [
        n
        for a, b, n in zip(eth["edges"]["a"], eth["edges"]["b"], eth["edges"]["n"], strict=True)
        if k in (a, b)
    ] == [1]


def test_a_disabled_device_stays_drawn_greyed_with_its_last_known_links(
    agent, make_device, viewer, admin, eth_fabric
):
    """Disabling a device's polling keeps it on the map (still managed; the list says "Polling
    disabled"), its node and its 23 LLDP links marked stale (greyed), counted apart from the live
    links; the cached layer changes with it, and enabling again makes them live."""
    agent.set_values("sonic-edit", {})  # as recorded
    dev = make_device("sonic-edit")
    poll_devices([dev])
    before = _map(viewer, eth_fabric)["ethernet"]  # cached now
    assert before["counts"]["links"] == 23 and before["counts"]["stale_links"] == 0
    assert not any(before["edges"]["stale"]) and not any(before["nodes"]["stale"])
    r = admin.patch(f"/api/devices/devices/{dev.pk}/", {"enabled": False}, content_type="application/json")
    assert r.status_code == 200, r.content
    for part in ("", "edges"):
        eth = _map(viewer, eth_fabric, part)["ethernet"]
        nodes, edges = eth["nodes"], eth["edges"]
        assert nodes["name"] == before["nodes"]["name"]  # nothing hidden
        assert nodes["disabled"] == [True] + [False] * (len(nodes["name"]) - 1)
        assert all(nodes["stale"]) and all(edges["stale"]) and len(edges["a"]) == len(before["edges"]["a"])
        assert eth["counts"]["links"] == 0 and eth["counts"]["stale_links"] == 23
        assert eth["counts"]["disabled"] == 1
    row = admin.get("/devices/").content.decode()
    assert 'data-device="sonic-edit"' in row and 'data-enabled="0"' in row and "Polling disabled" in row
    r = admin.patch(f"/api/devices/devices/{dev.pk}/", {"enabled": True}, content_type="application/json")
    assert r.status_code == 200
    again = _map(viewer, eth_fabric)["ethernet"]
    assert again["counts"] == before["counts"] and not any(again["edges"]["stale"])
