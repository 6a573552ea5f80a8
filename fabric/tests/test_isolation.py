"""Deliberate isolation (``fabric.services.isolation``, the one writer of ``fabric.IsolatedPort``):
a port isolated on purpose loses its link without a Critical ``link.down`` or mail — neither when
its state is stored (``apply_port_states``) nor when a later discovery no longer sees the link —
raises the Info ``port.isolated`` instead, is shown isolated on its port page and listed with who
isolated it and when on ``/fabric/isolated/``; enabling it clears all that. The lab test of the
port page's Disable is ``test_port_actions.py``, of the UFM API ``ufm/tests/test_lab.py``."""

from __future__ import annotations

from html import unescape

import pytest

from events.engine import process_pending_events
from events.models import Alarm, Event
from fabric.choices import PhysState, PortState
from fabric.models import IsolatedPort, Link, Node, Port
from fabric.parsers import parse_ibnetdiscover
from fabric.parsers.ibnetdiscover import derived_guid as G
from fabric.services.ingest import PortObservation, apply_port_states, ingest_topology
from fabric.services.isolation import IsolationTarget, set_isolated
from tests.support.topologies import BASE

pytestmark = pytest.mark.django_db


def test_an_isolated_port_is_expected_down_info_not_critical_and_listed(users, client_for, settings):
    settings.WEFT_ALERT_EMAILS = ["oncall@example.org"]
    fabric = ingest_topology_fabric()
    leaf, spine = Node.objects.get(node_guid=G("leaf1")), Node.objects.get(node_guid=G("spine"))
    olga = users["operator"]
    target = IsolationTarget(leaf, 7, "spine-1 [1]", spine.node_guid, 1)
    assert set_isolated(fabric, [target], isolated=True, via="page", user=olga) == [True]
    res = apply_port_states(fabric, {(leaf.node_guid, 7): PortObservation(PortState.DOWN, 3)}, note="disable")
    assert len(res.links_down) == 1  # the link is gone all the same
    assert not Event.objects.filter(code="link.down").exists()
    ev = Event.objects.get(code="port.isolated")
    assert (ev.severity, ev.object_key) == ("info", f"{leaf.node_guid}/7")
    assert "by olga from the port page" in ev.message and "spine-1 [1]" in ev.message
    outcome = process_pending_events(fabric.pk)
    alarms = Alarm.objects.open().filter(fabric=fabric)
    assert list(alarms.values_list("code", "severity")) == [("port.isolated", "info")]
    assert outcome.notifications == 0  # nothing mailed, though alarm mail has a recipient
    # isolating it again keeps the first who and when
    assert set_isolated(fabric, [target], isolated=True, via="ufm", user=users["admin"]) == [False]
    row = IsolatedPort.objects.get()
    assert (row.by, row.via, row.peer) == (olga, "page", "spine-1 [1]")

    viewer = client_for("viewer")
    page = unescape(viewer.get("/fabric/isolated/").content.decode())
    assert f'data-key="{leaf.node_guid}/7"' in page and '<td class="isolated-by">olga</td>' in page
    assert row.since.strftime("%Y-%m-%d %H:%M:%S") in page and "port page" in page
    port = Port.objects.get(node=leaf, port_num=7)
    port_page = unescape(viewer.get(f"/fabric/ports/{port.pk}/").content.decode())
    assert "Isolated by olga on" in port_page and "its link to spine-1 [1] is down on purpose" in port_page

    # enabled again: the row goes, the Info alarm clears, the page lists nothing
    assert set_isolated(fabric, [IsolationTarget(leaf, 7)], isolated=False, via="page", user=olga) == [True]
    process_pending_events(fabric.pk)
    assert not Alarm.objects.open().filter(fabric=fabric).exists()
    assert "No port is isolated." in viewer.get("/fabric/isolated/").content.decode()
    # a link that goes down now is a failure again
    apply_port_states(fabric, {(leaf.node_guid, 1): PortObservation(PortState.DOWN, 2)})
    assert Event.objects.filter(code="link.down").count() == 1


def test_a_discovery_that_no_longer_sees_an_isolated_link_writes_no_link_down():
    fabric = ingest_topology_fabric()
    leaf, spine = Node.objects.get(node_guid=G("leaf1")), Node.objects.get(node_guid=G("spine"))
    set_isolated(
        fabric, [IsolationTarget(leaf, 7, "spine-1 [1]", spine.node_guid, 1)], isolated=True, via="ufm"
    )
    # both uplinks gone from the file: leaf-1's is isolated, leaf-2's is a failure
    cut = [
        ln
        for ln in BASE.splitlines()
        if not ln.startswith(('[1] "leaf1"[7]', '[2] "leaf2"[7]', '[7] "spine"'))
    ]
    ingest_topology(fabric, parse_ibnetdiscover("\n".join(cut) + "\n", "t"), source="file")
    assert Link.objects.filter(fabric=fabric).count() == 3
    downs = list(Event.objects.filter(code="link.down").values_list("object_repr", flat=True))
    assert len(downs) == 1 and "leaf-2 [7]" in downs[0], downs


def test_a_disabled_port_stays_down_disabled_through_reads_and_discoveries():
    """The walkthrough's "a disabled port's state flapped while disabled": ibsim answers a disabled
    port with PortState Initialize (Active just after the disable) beside PhysState Disabled; each
    read stored Initialize and asked for a discovery, each discovery put it back Down with no
    physical state: a port.state_changed Warning every few seconds. A port whose physical link is
    not up is Down (IBTA Vol 1 7.2), so the reads and discoveries agree."""
    fabric = ingest_topology_fabric()
    leaf, spine = Node.objects.get(node_guid=G("leaf1")), Node.objects.get(node_guid=G("spine"))
    set_isolated(
        fabric, [IsolationTarget(leaf, 7, "spine-1 [1]", spine.node_guid, 1)], isolated=True, via="page"
    )
    key = (leaf.node_guid, 7)
    apply_port_states(fabric, {key: PortObservation(PortState.DOWN, PhysState.DISABLED)}, note="disable")
    events_after_disable = Event.objects.count()
    for read in (PortState.ACTIVE, PortState.INIT, PortState.INIT):  # what ibsim answered, in order
        res = apply_port_states(fabric, {key: PortObservation(read, PhysState.DISABLED)})
        assert (res.ports, res.came_up, res.needs_discovery) == ([], [], False)
    cut = [ln for ln in BASE.splitlines() if not ln.startswith(('[1] "leaf1"[7]', '[7] "spine"[1]'))]
    ingest_topology(fabric, parse_ibnetdiscover("\n".join(cut) + "\n", "t"), source="file")
    port = Port.objects.get(node=leaf, port_num=7)
    assert (port.state, port.phys_state) == (PortState.DOWN, PhysState.DISABLED)
    assert Event.objects.count() == events_after_disable  # no port.state_changed, no link.down
    # enabled and retrained: Polling is still Down, Init/LinkUp is read as such
    assert PortObservation(PortState.ACTIVE, PhysState.POLLING).state == PortState.DOWN
    assert PortObservation(PortState.INIT, PhysState.LINKUP).state == PortState.INIT
    assert PortObservation(PortState.ACTIVE, PhysState.ERROR_RECOVERY).state == PortState.ACTIVE


def test_an_isolated_port_seen_linked_again_is_no_longer_isolated():
    """Enabled outside Weft (``ibportstate`` by hand, ``lab_console relink`` of a disabled port):
    the walkthrough found the port Active with its link and still listed isolated, its Info alarm
    open, and a failure of that link would have written no link.down."""
    fabric = ingest_topology_fabric()
    leaf, spine = Node.objects.get(node_guid=G("leaf1")), Node.objects.get(node_guid=G("spine"))
    set_isolated(
        fabric, [IsolationTarget(leaf, 7, "spine-1 [1]", spine.node_guid, 1)], isolated=True, via="page"
    )
    apply_port_states(fabric, {(leaf.node_guid, 7): PortObservation(PortState.DOWN, PhysState.DISABLED)})
    process_pending_events(fabric.pk)
    assert Alarm.objects.open().get().code == "port.isolated"
    ingest_topology(fabric, parse_ibnetdiscover(BASE, "t"), source="file")  # the link is back
    assert not IsolatedPort.objects.exists()
    ev = Event.objects.get(code="port.isolation_cleared")
    assert ev.object_key == f"{leaf.node_guid}/7" and "up again (enabled outside Weft)" in ev.message
    process_pending_events(fabric.pk)
    assert not Alarm.objects.open().filter(code="port.isolated").exists()
    # a failure of that link is a failure again
    cut = [ln for ln in BASE.splitlines() if not ln.startswith(('[1] "leaf1"[7]', '[7] "spine"[1]'))]
    ingest_topology(fabric, parse_ibnetdiscover("\n".join(cut) + "\n", "t"), source="file")
    assert Event.objects.filter(code="link.down").count() == 1


def ingest_topology_fabric():
    from fabric.models import Fabric

    fabric = Fabric.objects.create(name="t")
    ingest_topology(fabric, parse_ibnetdiscover(BASE, "t"), source="file")
    return fabric
