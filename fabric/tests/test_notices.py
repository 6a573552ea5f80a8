"""Link and port state within seconds (issue 10): SM notices → targeted refresh → events/alarms.

Unit tests of the MAD layouts and of ``apply_port_states``; lab tests with the real OpenSM under
ibsim (``Unlink``/``ReLink`` on the console send trap 128 to OpenSM, which forwards it to the
listener's subscription): the alarm within one poll interval + 2 s (measured with a bounded
wait), the port Down through the API and the map, a host's only link, an SM failover, and the
port-state fallback when no notice is delivered.
"""

from __future__ import annotations

import struct
import time

import pytest
from django.conf import settings

from events.models import Alarm, Event
from fabric.choices import DiscoverySource, PortState
from fabric.collectors.notices import (
    ATTR_INFORM_INFO,
    SA_DATA,
    build_sa,
    build_smp,
    decode_notice,
    decode_port_info,
    inform_info,
)
from fabric.keys import link_ends, link_key_str, link_name
from fabric.models import Discovery, Fabric, Link, Node, Port
from fabric.parsers import parse_ibnetdiscover
from fabric.parsers.ibnetdiscover import derived_guid
from fabric.services.discovery import discover
from fabric.services.ingest import PortObservation, apply_port_states, ingest_topology
from fabric.services.notice_status import notice_status
from fabric.services.notices import NoticeListener, fallback_targets, lab_listener_hosts
from telemetry.services.sweep import poll_fabric
from tests.support.topologies import BASE
from tests.support.waits import locked_is_not_yet, wait_for

G = derived_guid


# -- MAD layouts ---------------------------------------------------------------------------------


def test_inform_info_subscribes_to_one_generic_trap_from_anyone():
    mad = build_sa(0x1234, 0x02, ATTR_INFORM_INFO, inform_info(128))
    assert len(mad) == 256 and mad[1:4] == bytes([0x03, 2, 0x02])
    assert struct.unpack_from(">QH", mad, 8) == (0x1234, ATTR_INFORM_INFO)
    info = mad[SA_DATA : SA_DATA + 36]
    assert info[:16] == bytes(16)  # GID 0
    lid_begin, lid_end, _, generic, subscribe, trap_type, trap = struct.unpack_from(">HHHBBHH", info, 16)
    assert (lid_begin, generic, subscribe, trap_type, trap) == (0xFFFF, 1, 1, 0xFFFF, 128)
    assert info[33:36] == b"\xff\xff\xff"  # ProducerType: all


def test_notices_decode_as_the_ibta_lays_them_out():
    trap128 = bytearray(80)
    trap128[0] = 0x80 | 1  # generic, urgent
    trap128[1:4] = (2).to_bytes(3, "big")  # producer: switch
    struct.pack_into(">HH", trap128, 4, 128, 7)
    struct.pack_into(">H", trap128, 10, 7)
    n = decode_notice(bytes(trap128))
    assert (n["generic"], n["trap"], n["issuer_lid"], n["lid"], n["producer"]) == (True, 128, 7, 7, 2)
    trap129 = bytearray(80)
    trap129[0] = 0x80
    struct.pack_into(">HH", trap129, 4, 129, 9)
    struct.pack_into(">HB", trap129, 12, 9, 17)
    assert (decode_notice(bytes(trap129))["lid"], decode_notice(bytes(trap129))["port"]) == (9, 17)
    trap64 = bytearray(80)
    trap64[0] = 0x80
    struct.pack_into(">HH", trap64, 4, 64, 1)
    trap64[16:32] = bytes.fromhex("fe800000000000000002c90300a1b2c3")
    assert decode_notice(bytes(trap64))["details"] == {"port_guid": "0x0002c90300a1b2c3"}
    smp = build_smp(5, 0x15, 3)
    assert smp[1] == 0x01 and struct.unpack_from(">HHI", smp, 16) == (0x15, 0, 3)
    dr = build_smp(5, 0x15, directed=True)
    assert dr[1] == 0x81 and struct.unpack_from(">HH", dr, 32) == (0xFFFF, 0xFFFF)
    pi = bytearray(64)
    struct.pack_into(">HH", pi, 16, 12, 1)
    pi[31], pi[32], pi[33], pi[35] = 2, 0x21, 0x52, 0x11
    assert decode_port_info(bytes(pi)) == {"lid": 12, "sm_lid": 1, "width": 2, "state": 1, "phys_state": 5,
                                           "speed": 1}  # fmt: skip


# -- the refresh service -------------------------------------------------------------------------


@pytest.fixture
def fabric(db):
    return Fabric.objects.create(name="t")


def test_port_down_removes_its_link_and_sets_the_other_end_down(
    fabric, committed_signals, django_capture_on_commit_callbacks
):
    ingest_topology(fabric, parse_ibnetdiscover(BASE, "t"), source="file")
    before = Discovery.objects.count()
    with django_capture_on_commit_callbacks(execute=True):
        res = apply_port_states(
            fabric, {(G("leaf1"), 7): PortObservation(PortState.DOWN, 2)}, note="trap 128"
        )
    key = link_key_str(link_ends(G("leaf1"), 7, G("spine"), 1))
    assert res.links_down == [key] and res.isolated == [] and not res.needs_discovery
    assert Link.objects.filter(fabric=fabric).count() == 4
    assert Port.objects.get(node__node_guid=G("leaf1"), port_num=7).state == PortState.DOWN
    assert Port.objects.get(node__node_guid=G("spine"), port_num=1).state == PortState.DOWN
    ev = Event.objects.get(fabric=fabric, code="link.down")
    # named as everywhere (fabric.keys.port_name/link_name: "name [port]"), the GUIDs only in the key
    leaf, spine = Node.objects.get(node_guid=G("leaf1")), Node.objects.get(node_guid=G("spine"))
    shown = link_name((str(leaf), 7), (str(spine), 1))
    assert ev.object_key == key and ev.object_repr in (shown, link_name((str(spine), 1), (str(leaf), 7)))
    assert ev.message == f"link {ev.object_repr} is down (trap 128)" and "0x" not in ev.message
    assert (ev.object_repr.count(" ["), str(Port.objects.get(node=leaf, port_num=7))) == (2, "leaf-1 [7]")
    states = Event.objects.filter(fabric=fabric, code="port.state_changed")
    assert sorted(states.values_list("object_key", flat=True)) == sorted(
        [f"{G('leaf1')}/7", f"{G('spine')}/1"]
    )
    assert sorted(states.values_list("object_repr", flat=True)) == ["leaf-1 [7]", "spine-1 [1]"]
    d = res.discovery
    assert (
        d.source == DiscoverySource.NOTICE
        and d.diff["removed"]["links"] == [key]
        and d.diff["note"] == "trap 128"
    )
    assert Discovery.objects.count() == before + 1 and committed_signals[-1] == (fabric.pk, d.pk)
    assert Fabric.objects.get(pk=fabric.pk).last_discovery_id == d.pk
    # the same again changes nothing and writes no Discovery
    again = apply_port_states(fabric, {(G("leaf1"), 7): PortObservation(PortState.DOWN, 2)})
    assert again.discovery is None and Discovery.objects.count() == before + 1
    # the port answers Init again: a discovery must learn the other end
    up = apply_port_states(fabric, {(G("leaf1"), 7): PortObservation(PortState.INIT, 5)})
    assert up.came_up == [(G("leaf1"), 7)] and up.needs_discovery


def test_a_host_that_lost_its_only_link_asks_for_a_discovery(fabric, committed_signals):
    ingest_topology(fabric, parse_ibnetdiscover(BASE, "t"), source="file")
    res = apply_port_states(fabric, {(G("leaf2"), 1): PortObservation(PortState.DOWN, 2)})
    assert res.isolated == [G("h3")] and res.needs_discovery
    assert Node.objects.filter(node_guid=G("h3")).exists()  # only a discovery removes nodes


def test_fallback_reads_one_end_of_every_switch_cable(fabric, committed_signals):
    ingest_topology(fabric, parse_ibnetdiscover(BASE, "t"), source="file")
    targets = fallback_targets(fabric)
    # spine-leaf cables once (from the lower node id), the host cables from their leaf
    assert sum(len(p) for p in targets.values()) == Link.objects.filter(fabric=fabric).count() == 5
    leaf1 = Node.objects.get(node_guid=G("leaf1"))
    assert sorted(targets[leaf1.lid]) in ([1, 2], [1, 2, 7])


# -- lab -----------------------------------------------------------------------------------------


def _lab_fabric(lab, name="lab") -> Fabric:
    fabric = Fabric.objects.create(name=name, tool_env=dict(lab.tool_env))
    assert discover(fabric).status == "ok"
    return Fabric.objects.get(pk=fabric.pk)


def _listen(fabric, **kw) -> NoticeListener:
    listener = NoticeListener(fabric.pk, **kw)
    listener.start()
    status = wait_for(
        lambda: (notice_status(fabric.pk) or {}).get("state") == "subscribed" and notice_status(fabric.pk),
        30,
        "the listener to be subscribed to the SM's notices",
    )
    assert status["traps"] == {str(t): 0 for t in (64, 65, 128, 129, 130, 131, 144)}
    return listener


def _alarm(fabric, code, key=None, state=("active", "acknowledged")):
    def find():
        qs = Alarm.objects.filter(fabric=fabric, code=code, state__in=state)
        if key is not None:
            qs = qs.filter(object_key=key)
        return qs.first()

    return locked_is_not_yet(find)()


@pytest.fixture
def listeners():
    """Listener threads started by the test (stopped at teardown). The test thread reads while a
    listener writes: on the tests' in-memory SQLite (shared cache, table locks between
    connections) its reads do not wait for the writer's table locks (``read_uncommitted``)."""
    from django.db import connection

    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA read_uncommitted = 1")
    started: list[NoticeListener] = []
    yield started
    for listener in started:
        listener.stop()


@pytest.mark.lab
@pytest.mark.django_db(transaction=True)
def test_unlink_leaf_spine_alarms_within_seconds_relink_clears(lab_factory, listeners, viewer):
    from lab.pytest_plugin import small_netfile

    lab = lab_factory(small_netfile())
    fabric = _lab_fabric(lab)
    listeners.append(_listen(fabric, fallback="off"))
    g1, g2 = lab.guid_of("Switch1"), lab.guid_of("Switch2")
    key = link_key_str(link_ends(g1, 3, g2, 3))
    budget = settings.WEFT_POLL_INTERVAL_S + 2
    poll_fabric(fabric)  # the heatmap knows the cable carried a link
    heat_url = f"/api/fabric/heatmap/{fabric.pk}/"
    p13 = Port.objects.get(node__node_guid=g1, port_num=3)

    def heat_down() -> int:
        return {c[0]: c for c in viewer.get(heat_url).json()["cells"]}[p13.pk][7]

    assert heat_down() == 0

    t0 = time.monotonic()
    lab.unlink("Switch1", 3)
    alarm = wait_for(lambda: _alarm(fabric, "link.down", key), budget, "a link.down alarm", interval=0.02)
    latency_down = time.monotonic() - t0
    assert alarm.severity == "critical"
    names = dict(Node.objects.filter(fabric=fabric).values_list("node_guid", "description"))
    assert f"{names[g1]} [3]" in alarm.object_repr and f"{names[g2]} [3]" in alarm.object_repr
    event = Event.objects.get(fabric=fabric, code="link.down", object_key=key)
    assert "SM notice: trap 128" in event.message
    # the API shows both ends Down, the map the cable Down (one of the two parallel cables)
    for guid in (g1, g2):
        body = viewer.get("/api/fabric/ports/", {"node_guid": guid, "port_num": 3}).json()
        assert [p["state"]["label"] for p in body["results"]] == ["Down"]
    edges = viewer.get(f"/api/fabric/fabrics/{fabric.pk}/map/").json()["edges"]
    ids = viewer.get(f"/api/fabric/fabrics/{fabric.pk}/map/").json()["nodes"]["guid"]
    pair = sorted([ids.index(g1), ids.index(g2)])
    (e,) = [i for i in range(len(edges["a"])) if sorted([edges["a"][i], edges["b"][i]]) == pair]
    assert (edges["n"][e], edges["down"][e], edges["state"][e]) == (1, 1, PortState.DOWN)
    # the heatmap draws the cell as a lost link, the port page says Down
    assert heat_down() == 1
    page = viewer.get(p13.get_absolute_url()).content.decode()
    assert '<dd class="state-1">Down</dd>' in page

    t0 = time.monotonic()
    lab.relink("Switch1", 3)
    wait_for(
        lambda: _alarm(fabric, "link.down", key, state=("cleared",)),
        budget,
        "the alarm cleared",
        interval=0.02,
    )
    latency_up = time.monotonic() - t0
    assert Event.objects.filter(fabric=fabric, code="link.up", object_key=key).exists()
    assert Link.objects.filter(fabric=fabric).count() == 6
    # the SM makes the ports Active right after: read again until they are
    wait_for(
        locked_is_not_yet(
            lambda: set(
                Port.objects.filter(node__node_guid__in=[g1, g2], port_num=3).values_list("state", flat=True)
            )
            == {PortState.ACTIVE}
        ),
        budget,
        "both ends Active again",
    )
    edges = viewer.get(f"/api/fabric/fabrics/{fabric.pk}/map/").json()["edges"]
    (e,) = [i for i in range(len(edges["a"])) if sorted([edges["a"][i], edges["b"][i]]) == pair]
    assert (edges["n"][e], edges["down"][e], edges["state"][e]) == (2, 0, PortState.ACTIVE)
    assert heat_down() == 0
    print(f"notice latency: link.down alarm {latency_down:.3f} s, cleared {latency_up:.3f} s")
    assert latency_down < budget and latency_up < budget


@pytest.mark.lab
@pytest.mark.django_db(transaction=True)
def test_host_whose_only_link_is_pulled_is_removed_only_when_unreachable(lab_factory, listeners):
    from lab.pytest_plugin import small_netfile

    lab = lab_factory(small_netfile())
    fabric = _lab_fabric(lab)
    listener = _listen(fabric, fallback="off")
    listeners.append(listener)
    host = "Hca3"  # on Switch1; the listener is on another CA
    assert listener.status.sim_host != host
    guid = lab.guid_of(host)
    lab.unlink(host)
    # the alarm is raised after the discovery that removed the node committed
    wait_for(lambda: _alarm(fabric, "node.removed", guid), settings.WEFT_POLL_INTERVAL_S + 2, "node.removed")
    removed = Event.objects.get(fabric=fabric, code="node.removed")
    assert removed.object_key == guid
    # link.down first (the notice's refresh), then the discovery that found the host gone
    down = Event.objects.get(fabric=fabric, code="link.down")
    assert f"{guid}/1" in down.object_key and down.pk < removed.pk
    rows = list(Discovery.objects.filter(fabric=fabric).order_by("id").values_list("id", "source", "diff"))
    refresh = next(
        i for i, src, diff in rows if src == "notice" and diff["removed"]["links"] == [down.object_key]
    )
    gone = next(i for i, src, diff in rows if src == "live" and diff["removed"]["nodes"] == [guid])
    assert refresh < gone
    assert Node.objects.filter(fabric=fabric).count() == 5
    assert Event.objects.filter(fabric=fabric, code="node.removed").count() == 1
    lab.relink(host)
    # node.added clears the node.removed alarm after its discovery committed
    wait_for(lambda: _alarm(fabric, "node.removed", guid, state=("cleared",)), 15, "the host back")
    assert Event.objects.filter(fabric=fabric, code="node.added", object_key=guid).exists()
    assert Node.objects.filter(fabric=fabric, node_guid=guid).exists()


@pytest.mark.lab
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_sm_failover_keeps_the_subscription(lab_factory, listeners):
    from lab.pytest_plugin import small_netfile

    lab = lab_factory(
        small_netfile(),
        standby_sm="Hca2",
        opensm_conf={"sminfo_polling_timeout": "1000", "polling_retry_number": "2"},
    )
    fabric = _lab_fabric(lab)
    listener = _listen(fabric, fallback="off")
    listeners.append(listener)
    assert listener.status.sim_host not in ("Hca1", "Hca2")
    old = lab.sm_info()
    lab.kill_master_sm()
    new = lab.wait_master(60, guid="Hca2")
    assert new["lid"] != old["lid"]
    wait_for(
        lambda: (notice_status(fabric.pk) or {}).get("state") == "subscribed"
        and notice_status(fabric.pk)["sm_lid"] == new["lid"],
        30,
        "the listener re-subscribed to the new master",
    )
    fabric.refresh_from_db()
    g1, g2 = lab.guid_of("Switch1"), lab.guid_of("Switch2")
    key = link_key_str(link_ends(g1, 5, g2, 5))
    t0 = time.monotonic()
    lab.unlink("Switch2", 5)
    wait_for(
        lambda: _alarm(fabric, "link.down", key),
        settings.WEFT_POLL_INTERVAL_S + 2,
        "link.down after failover",
    )
    print(f"notice latency after failover: {time.monotonic() - t0:.3f} s")
    assert Discovery.objects.filter(fabric=fabric, source="notice").exists()
    # the SM service heard of the move at once (the listener asked the SM watch)
    wait_for(
        lambda: Event.objects.filter(fabric=fabric, code="sm.master_changed").exists(),
        30,
        "sm.master_changed",
    )


@pytest.mark.lab
@pytest.mark.django_db(transaction=True)
def test_port_state_fallback_without_notices(lab_factory, listeners):
    from lab.pytest_plugin import small_netfile

    lab = lab_factory(small_netfile())
    fabric = _lab_fabric(lab)
    # subscribed to trap 64 only: no link-state notice reaches this listener
    listener = NoticeListener(fabric.pk, fallback="always", interval=1.0, traps=(64,))
    listeners.append(listener)
    listener.start()
    wait_for(lambda: (notice_status(fabric.pk) or {}).get("fallback_reads", 0) >= 1, 30, "a fallback read")
    mads = notice_status(fabric.pk)["fallback_mads"]
    targets = fallback_targets(fabric)
    # one PortInfo per cable (from one switch end) and one NodeInfo per switch read
    assert sum(len(p) for p in targets.values()) == Link.objects.filter(fabric=fabric).count() == 6
    assert mads == 6 + len(targets) == 8
    g1, g2 = lab.guid_of("Switch1"), lab.guid_of("Switch2")
    key = link_key_str(link_ends(g1, 3, g2, 3))
    t0 = time.monotonic()
    lab.unlink("Switch1", 3)
    wait_for(lambda: _alarm(fabric, "link.down", key), 1.0 + 2, "link.down from the fallback")
    print(f"fallback: {mads} SMPs per read, link.down after {time.monotonic() - t0:.3f} s")
    assert notice_status(fabric.pk)["notices"] == 0
    # read by the listener, not told by a notice: the periodic fallback, or (first, under load)
    # the check it makes after a hint that the SM swept the subnet
    message = Event.objects.get(fabric=fabric, code="link.down").message
    assert "port-state fallback" in message or "port-state check after" in message, message
    assert "SM notice: trap" not in message


@pytest.mark.lab
@pytest.mark.django_db(transaction=True)
def test_listener_hosts_avoid_the_sm_and_tools(lab_factory):
    from lab.pytest_plugin import small_netfile

    lab = lab_factory(small_netfile())
    fabric = _lab_fabric(lab)
    hosts = lab_listener_hosts(fabric)
    assert hosts == ["Hca4", "Hca3", "Hca2"]  # Hca1 runs OpenSM and the tools


@pytest.mark.lab
@pytest.mark.django_db(transaction=True)
def test_listen_notices_command_listens_to_every_live_fabric(lab_factory, settings):
    import io
    import json
    import threading

    from django.core.management import call_command
    from django.db import connection

    from lab.pytest_plugin import small_netfile

    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA read_uncommitted = 1")
    settings.WEFT_NOTICE_RESCAN_S = 0.5
    lab = lab_factory(small_netfile())
    fabric = _lab_fabric(lab)
    Fabric.objects.create(name="imported")  # no live access: not listened to
    out = io.StringIO()
    runner = threading.Thread(
        target=call_command, args=("listen_notices",), kwargs={"seconds": 6, "stdout": out}
    )
    runner.start()
    try:
        wait_for(lambda: (notice_status(fabric.pk) or {}).get("state") == "subscribed", 30, "subscribed")
        lab.unlink("Switch2", 5)
        # the cable on the SM's route to the listener: its Reports are lost (the SA sends them on the
        # old route), the check after the SM's sweep finds it
        wait_for(lambda: _alarm(fabric, "link.down"), settings.WEFT_POLL_INTERVAL_S + 2, "link.down")
    finally:
        runner.join(30)
    summary = json.loads(out.getvalue().strip().splitlines()[-1])
    assert summary["fabrics"] == 1
    (row,) = summary["listeners"]
    assert (row["fabric"], row["state"]) == ("lab", "subscribed")
    # which of the two parallel cables carries the SM's route to the listener is OpenSM's choice:
    # a notice found the pulled one, or (its Reports lost with it) the check after the SM's sweep;
    # in the second case a Report may still arrive later, once the SM has rerouted (it finds the
    # link already down and writes nothing): whoever wrote the one link.down shows its source
    message = Event.objects.get(fabric=fabric, code="link.down").message
    if "SM notice: trap 128" in message:
        assert row["notices"] >= 1 and row["refreshes"] >= 1
    else:
        assert "port-state check after the SM" in message and row["fallback_reads"] >= 1


def test_error_traps_write_port_error_trap(fabric, committed_signals):
    from fabric.services.notices import record_error_trap

    ingest_topology(fabric, parse_ibnetdiscover(BASE, "t"), source="file")
    leaf1 = Node.objects.get(node_guid=G("leaf1"))
    record_error_trap(fabric, {"trap": 129, "lid": leaf1.lid, "port": 7})
    ev = Event.objects.get(fabric=fabric, code="port.error_trap")
    assert ev.object_key == f"{G('leaf1')}/7" and ev.severity == "warning"
    assert "local link integrity" in ev.message and ev.details == {"trap": 129, "lid": leaf1.lid, "port": 7}


@pytest.mark.lab
@pytest.mark.django_db(transaction=True)
def test_supervisor_follows_the_live_fabrics(lab_factory):
    import os

    from fabric.services.notices import NoticeSupervisor
    from lab.pytest_plugin import small_netfile

    lab = lab_factory(small_netfile())
    fabric = _lab_fabric(lab)
    Fabric.objects.create(name="imported")  # no live access
    supervisor = NoticeSupervisor(rescan_s=3600, fallback="off")
    try:
        assert supervisor.rescan() == [fabric.pk]
        status = wait_for(
            lambda: (notice_status(fabric.pk) or {}).get("state") == "subscribed"
            and notice_status(fabric.pk),
            30,
            "subscribed",
        )
        assert supervisor.rescan() == [fabric.pk]  # unchanged: the same listener keeps running
        assert notice_status(fabric.pk)["pid"] == status["pid"]
        Fabric.objects.filter(pk=fabric.pk).update(discovery_enabled=False)
        assert supervisor.rescan() == []
        with pytest.raises(ProcessLookupError):
            os.kill(status["pid"], 0)  # the child ended with its listener
    finally:
        supervisor.stop()


def test_a_discovery_older_than_a_notice_does_not_bring_the_link_back(fabric, committed_signals):
    from django.utils import timezone

    ingest_topology(fabric, parse_ibnetdiscover(BASE, "t"), source="file")
    snapshot_began = timezone.now()  # a periodic discovery starts ibnetdiscover...
    apply_port_states(fabric, {(G("leaf1"), 7): PortObservation(PortState.DOWN, 2)})  # ...a cable is pulled
    key = link_key_str(link_ends(G("leaf1"), 7, G("spine"), 1))
    # ...and the discovery, whose snapshot still had the cable, commits after the notice's refresh
    stale = ingest_topology(fabric, parse_ibnetdiscover(BASE, "t"), source="live", started=snapshot_began)
    assert stale.diff["added"]["links"] == [] and stale.diff["changed"]["ports"] == []
    assert not Link.objects.filter(port_a__node__node_guid__in=[G("leaf1"), G("spine")], port_a__port_num__in=[1, 7],
                                   port_b__node__node_guid__in=[G("leaf1"), G("spine")]).exists()  # fmt: skip
    assert Port.objects.get(node__node_guid=G("leaf1"), port_num=7).state == PortState.DOWN
    assert not Event.objects.filter(fabric=fabric, code="link.up").exists()
    # a discovery started after the notice sees the cable back: applied
    fresh = ingest_topology(fabric, parse_ibnetdiscover(BASE, "t"), source="live")
    assert fresh.diff["added"]["links"] == [key]
    assert Event.objects.filter(fabric=fabric, code="link.up", object_key=key).exists()


def test_the_simulators_attach_message_is_not_a_warning(caplog):
    """umad2sim prints ``sim_connect: attached as client N`` at every listener start: DEBUG; any other
    stderr line of the child stays a WARNING."""
    import io
    import logging
    from types import SimpleNamespace

    from fabric.services.notices import NoticeChild

    child = NoticeChild.__new__(NoticeChild)
    child.proc = SimpleNamespace(
        pid=4242,
        stderr=io.StringIO(
            'ibwarn: [4242] sim_connect: attached as client 1 at node "host01 mlx5_0"\n'
            "ibwarn: [4242] umad_open_port: can't open UMAD port (mlx5_0:1)\n"
        ),
    )
    with caplog.at_level(logging.DEBUG, logger="fabric.services.notices"):
        child._log_stderr()
    levels = [(r.levelname, "attached as client" in r.getMessage()) for r in caplog.records]
    assert levels == [("DEBUG", True), ("WARNING", False)]


@pytest.mark.backend
def test_the_lab_listener_is_not_listed_as_a_subnet_manager(db, monkeypatch):
    """ibsim lab: the notice listener attaches as an SM client (IsSM set, answers SMInfo as a
    NOTACTIVE SM, priority 0) so ``saquery -s`` lists its port; the SM watch leaves that port out
    (and drops a row an earlier watch stored), other standby SMs stay."""
    from django.core.cache import cache

    from fabric.collectors.sm import MasterProbe
    from fabric.models import SubnetManager
    from fabric.parsers.records import SMRecord
    from fabric.services import sm
    from fabric.services.notice_status import status_key
    from fabric.services.notices import ListenerStatus

    fabric = Fabric.objects.create(name="lab")
    master = SMRecord(guid="0x0000000000000001", lid=1, priority=15, state=3, activity_count=5)
    standby = SMRecord(guid="0x0000000000000002", lid=2, priority=14, state=2, activity_count=1)
    listener = SMRecord(guid="0x00000000000000aa", lid=9, priority=0, state=3, activity_count=0)
    monkeypatch.setattr(sm, "probe_master", lambda fabric, timeout: MasterProbe(master=master))
    monkeypatch.setattr(sm, "read_all_sms", lambda fabric, timeout: ([master, standby, listener], ""))
    sm.watch(fabric)  # no listener status yet: stored like any SM
    assert SubnetManager.objects.filter(fabric=fabric).count() == 3
    status = ListenerStatus(fabric="lab", sm_client_guid=listener.guid)
    cache.set(status_key(fabric.pk), status.as_dict(), 60)
    try:
        sm.watch(fabric)
    finally:
        cache.delete(status_key(fabric.pk))
    assert sorted(SubnetManager.objects.filter(fabric=fabric).values_list("guid", flat=True)) == [
        master.guid,
        standby.guid,
    ]


def test_a_port_stuck_coming_up_asks_one_discovery_not_one_per_recheck(fabric, committed_signals):
    """A switch port read as Init without a stored link (its peer never comes up: an ``Enable``
    the lab's peer does not follow) asks a discovery the first time a recheck sees it, not on each
    of the up to RECHECKS reads a second apart; seen Down in between, it asks again. A notice's
    own refresh always asks."""
    ingest_topology(fabric, parse_ibnetdiscover(BASE, "t"), source="file")
    apply_port_states(fabric, {(G("leaf2"), 1): PortObservation(PortState.DOWN, 3)})  # the link goes
    lid = Node.objects.get(fabric=fabric, node_guid=G("leaf2")).lid
    listener = NoticeListener(fabric.pk)
    asked: list[str] = []
    listener._want_discovery = asked.append
    init = {(lid, 1): (PortState.INIT, 5)}
    for _ in range(5):
        listener._apply(fabric, init, "port states read again", recheck=True)
    assert len(asked) == 1 and "a port came up" in asked[0]
    listener._apply(fabric, {(lid, 1): (PortState.DOWN, 2)}, "port states read again", recheck=True)
    listener._apply(fabric, init, "port states read again", recheck=True)
    assert len(asked) == 2
    listener._apply(fabric, init, "SM notice (trap 128)")
    assert len(asked) == 3


def test_a_childs_repeated_failure_is_logged_once_then_counted(caplog, settings):
    """After ibsim is killed the listener child fails the same way every second (stderr
    ``umad2sim_write: cannot write``, ``send failed`` error messages): one WARNING line each,
    the repeats counted in one summary (a real child process writes the stderr lines)."""
    import logging
    import sys

    from core.repeatlog import RepeatLog
    from fabric.services.notices import NoticeChild

    name = "fabric.services.notices"
    listener = NoticeListener(1, fallback="off")
    listener.repeats = RepeatLog(logging.getLogger(name), clock=lambda: 0.0)  # the counts' "last 0 s"
    script = (
        "import sys\n"
        "for _ in range(300): print('ERR: umad2sim_write: cannot write', file=sys.stderr, flush=True)\n"
        "print('Traceback: something else', file=sys.stderr)\n"
    )
    with caplog.at_level(logging.DEBUG, logger=name):
        child = NoticeChild([sys.executable, "-c", script], {"PATH": "/usr/bin:/bin"}, listener.repeats)
        try:
            assert child.proc.wait(30) == 0
            wait_for(
                lambda: any("something else" in r.getMessage() for r in caplog.records), 10, "stderr read"
            )
        finally:
            child.close()
        for _ in range(160):
            listener._on_message({"type": "error", "message": "send failed: [Errno 107] not connected"})
        assert listener.repeats.flush() == 2
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == name]
    pid = child.proc.pid
    assert lines == [
        ("WARNING", f"notice listener {pid}: ERR: umad2sim_write: cannot write"),
        ("WARNING", f"notice listener {pid}: Traceback: something else"),
        ("WARNING", "notice listener of 1: send failed: [Errno 107] not connected"),
        (
            "WARNING",
            f"notice listener {pid}: ERR: umad2sim_write: cannot write (repeated 299 times in the last 0 s)",
        ),
        (
            "WARNING",
            "notice listener of 1: send failed: [Errno 107] not connected (repeated 159 times in the last 0 s)",
        ),
    ]


#: a listener child for the test below: answers every ``portinfo`` command from stdin (each port of
#: each LID), "no answer" the first time, then the port states given in argv[1] ``{"port": [state,
#: phys]}`` (ports not given: Down) and the node GUID in argv[2]
_CHILD_ROUTE_HEALS = """
import json, sys
states, guid = json.loads(sys.argv[1]), sys.argv[2]
for n, line in enumerate(sys.stdin):
    cmd = json.loads(line)
    ports, nodes = [], {}
    for lid, nums in cmd["targets"]:
        nodes[str(lid)] = None if n == 0 else guid
        for p in nums:
            ports.append([lid, p, None, "no answer"] if n == 0 else [lid, p, *states.get(str(p), [1, 2])])
    print(json.dumps({"type": "portinfo", "id": cmd["id"], "ports": ports, "nodes": nodes,
                      "mads": len(ports) + len(nodes), "elapsed_s": 0.0}), flush=True)
"""


@pytest.mark.django_db(transaction=True)
def test_a_notice_whose_switch_did_not_answer_is_read_again(committed_signals):
    """The Report of a pulled cable can reach the listener while its own route to the switch the
    notice names still runs through that cable (OpenSM reroutes after its sweep; ibsim answers a
    MAD it cannot route at once with status ETIMEDOUT, hardware after the MAD's timeout): the
    refresh reads no PortInfo. The notice is kept and its switch read again (every REREAD_S) until
    it answers, so the link.down comes from the second read; dropped, it came from nothing with
    the fallback off (``bench/port_states.py`` waited for it in vain). A real child process answers
    the listener's ``portinfo`` commands: no answer the first time, then leaf-2 [1] Down."""
    import json
    import sys

    from fabric.services.notices import NoticeChild

    fabric = Fabric.objects.create(name="t")
    ingest_topology(fabric, parse_ibnetdiscover(BASE, "t"), source="file")
    leaf2 = Node.objects.get(fabric=fabric, node_guid=G("leaf2"))
    states = {
        str(num): [state, phys]
        for num, state, phys in Port.objects.filter(node=leaf2, port_num__gte=1).values_list(
            "port_num", "state", "phys_state"
        )
    }
    states["1"] = [PortState.DOWN, 2]
    listener = NoticeListener(fabric.pk, fallback="off")
    listener.child = NoticeChild(
        [sys.executable, "-c", _CHILD_ROUTE_HEALS, json.dumps(states), leaf2.node_guid],
        {"PATH": "/usr/bin:/bin"},
    )
    try:
        listener._on_notice({"type": "notice", "trap": 128, "lid": leaf2.lid, "issuer_lid": leaf2.lid,
                             "received": time.time()})  # fmt: skip

        def link_down() -> bool:
            listener._due(time.monotonic())
            return Event.objects.filter(fabric=fabric, code="link.down").exists()

        wait_for(link_down, 10, "the link.down of the second read", interval=0.05)
        assert listener.status.refreshes == 2 and not listener._refresh
        event = Event.objects.get(fabric=fabric, code="link.down")
        assert event.object_key == link_key_str(link_ends(G("leaf2"), 1, G("h3"), 1))
        assert "SM notice: trap 128" in event.message
    finally:
        listener.child.close()
