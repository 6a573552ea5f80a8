"""Lab tests: the whole flow on ibsim + OpenSM + infiniband-diags, with a real SMTP server.

discovery/sweep commit → signal → evaluate task (eager: no worker runs here) → rules → outbox →
mail through aiosmtpd on loopback.
"""

from __future__ import annotations

import pytest
from django.conf import settings

from events.models import Alarm, Event, EventPolicy
from events.policies import ensure_policies
from tests.support.waits import wait_for

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def make_fabric(lab, name="lab"):
    from fabric.models import Fabric

    return Fabric.objects.create(name=name, tool_env=lab.tool_env)


def discover(fabric):
    from fabric.services.discovery import discover as run

    fabric.refresh_from_db()
    return run(fabric, timeout=60)


def sweep(fabric):
    from telemetry.services.sweep import poll_fabric

    fabric.refresh_from_db()
    return poll_fabric(fabric, timeout=60)


def test_unlink_leaf_spine_raises_critical_and_mails_both_ends_relink_clears(small_lab, smtp):
    lab = small_lab
    ensure_policies()
    EventPolicy.objects.filter(code="link.down").update(recipient_emails="noc@example.org", notify_clear=True)
    fabric = make_fabric(lab)
    discover(fabric)
    assert not Alarm.objects.filter(code="link.down").exists()
    lab.unlink("Switch1", 3)
    try:
        discover(fabric)
        alarm = Alarm.objects.get(code="link.down")
        assert alarm.severity == "critical" and alarm.state == "active"
        # The two ends of the pulled cable (Switch1 port 3 <-> Switch2 port 3), by GUID in the key.
        g1, g2 = lab.guid_of("Switch1"), lab.guid_of("Switch2")
        assert sorted(alarm.object_key.split("-")) == sorted([f"{g1}/3", f"{g2}/3"])
        ((to, msg),) = smtp.messages
        assert to == ["noc@example.org"]
        subject = msg["Subject"]
        assert subject.startswith("[Weft CRITICAL] Link down:") and "(fabric lab)" in subject
        from fabric.models import Node

        names = dict(Node.objects.filter(fabric=fabric).values_list("node_guid", "description"))
        assert f"{names[g1]} [3]" in subject and f"{names[g2]} [3]" in subject
    finally:
        lab.relink("Switch1", 3)
    discover(fabric)
    alarm.refresh_from_db()
    assert alarm.state == "cleared"
    assert alarm.cleared_event is not None and alarm.cleared_event.code == "link.up"
    assert len(smtp.messages) == 2 and smtp.messages[1][1]["Subject"].startswith("[Weft CLEARED] Link down:")


def test_link_downed_and_symbol_errors_raise(small_lab):
    lab = small_lab
    fabric = make_fabric(lab, "lab-counters")
    discover(fabric)
    first = sweep(fabric)
    assert first.status in ("ok", "partial"), first.error
    from telemetry.models import PortCounters

    row = PortCounters.objects.get(
        port__node__fabric=fabric, port__node__description__icontains="Switch1", port__port_num=1
    )
    lab.perf_set("Switch1", 1, "LinkDownedCounter", (row.link_downed or 0) + 1)
    lab.perf_set("Switch1", 1, "SymbolErrorCounter", (row.symbol_errors or 0) + 500)
    # perf_set returns once ibsim has applied the value; the rate uses the stored interval, whatever it is
    second = sweep(fabric)
    row.refresh_from_db()
    assert row.sweep_id == second.pk and row.error_deltas.get("symbol_errors") == 500, row.error_deltas
    alarms = {a.code: a for a in Alarm.objects.filter(fabric=fabric)}
    assert set(alarms) >= {"port.link_downed", "port.symbol_errors"}
    assert alarms["port.link_downed"].port_id == row.port_id == alarms["port.symbol_errors"].port_id
    expected_rate = 500 / second.interval_s * 60
    assert alarms["port.symbol_errors"].details["value"] == pytest.approx(expected_rate)
    # Sweeps without new errors clear both, after WEFT_COUNTER_CLEAR_SWEEPS (3) of them in a row.
    for n in range(3):
        sweep(fabric)
        for alarm in alarms.values():
            alarm.refresh_from_db()
        expected = "cleared" if n == 2 else "active"
        assert (alarms["port.symbol_errors"].state, alarms["port.link_downed"].state) == (
            expected,
            expected,
        ), n


def test_congestion_over_threshold_for_n_sweeps_raises_below_clears(small_lab):
    lab = small_lab
    ensure_policies()
    EventPolicy.objects.filter(code="port.congestion").update(consecutive=3, threshold=0.5)
    fabric = make_fabric(lab, "lab-congestion")
    discover(fabric)
    sweep(fabric)
    from telemetry.models import PortCounters

    row = PortCounters.objects.get(
        port__node__fabric=fabric, port__node__description__icontains="Switch2", port__port_num=1
    )
    wait = row.xmit_wait or 0
    states = []
    for _ in range(3):
        wait += 50_000_000  # ≥ 5e6 ticks/s over any interval ≤ 10 s: congestion index ≥ 0.5 (1 µs ticks)
        lab.perf_set("Switch2", 1, "PortXmitWait", wait)
        sweep(fabric)
        row.refresh_from_db()
        assert row.congestion is not None and row.congestion > 0.5, row.congestion
        states.append(
            list(Alarm.objects.filter(fabric=fabric, code="port.congestion").values_list("state", flat=True))
        )
    for _ in range(3):  # clear hysteresis (policy default): 3 sweeps at or below 0.4 clear it
        sweep(fabric)  # PortXmitWait unchanged: congestion 0
        row.refresh_from_db()
        assert row.congestion == 0
        states.append(
            list(Alarm.objects.filter(fabric=fabric, code="port.congestion").values_list("state", flat=True))
        )
    assert states == [[], [], ["active"], ["active"], ["active"], ["cleared"]]


def test_sm_failover_master_changed_names_new_master(lab_factory):
    from fabric.services.sm import watch
    from lab.pytest_plugin import small_netfile

    lab = lab_factory(
        small_netfile(),
        standby_sm="Hca2",
        opensm_conf={"sminfo_polling_timeout": "1000", "polling_retry_number": "2"},
    )
    old = lab.wait_master(60)
    fabric = make_fabric(lab, "lab-sm")
    first = watch(fabric)
    assert first.master is not None and first.master.guid == old["guid"] and first.event == ""
    # The standby is found through the SA (saquery -s, then sminfo <lid>) once it has a LID.
    from fabric.models import SubnetManager

    def standby_known() -> bool:
        if SubnetManager.objects.filter(fabric=fabric).count() >= 2:
            return True
        assert watch(fabric).event == ""  # finding the standby is no master change
        return False

    wait_for(standby_known, 30, "the standby SM to be found through the SA", interval=1)
    states = dict(SubnetManager.objects.filter(fabric=fabric).values_list("guid", "state"))
    assert states[old["guid"]] == 3 and sorted(states.values()) == [2, 3], states
    lab.kill_master_sm()

    def master_changed():
        watch(fabric)
        return Event.objects.filter(fabric=fabric, code="sm.master_changed").first()

    changed = wait_for(master_changed, 90, "an sm.master_changed event after the master SM died", interval=1)
    new = lab.sm_info()
    assert new["guid"] != old["guid"]
    assert changed.object_key == new["guid"] and new["guid"] in changed.message
    assert changed.details["old_guid"] == old["guid"] and changed.details["new_lid"] == new["lid"]
    alarm = Alarm.objects.get(fabric=fabric, code="sm.master_changed")
    assert alarm.state == "active" and alarm.severity == "warning"
    fabric.refresh_from_db()
    assert fabric.master_sm_guid == new["guid"]
    assert SubnetManager.objects.get(fabric=fabric, guid=new["guid"]).state == 3
    # A lost-master alarm, if the watch saw the gap, was cleared by the change.
    assert not Alarm.objects.open().filter(fabric=fabric, code="sm.master_lost").exists()


def test_fault_injector_flap_and_burst_raise_alarms(small_lab):
    from lab.faults import FaultInjector

    lab = small_lab
    fabric = make_fabric(lab, "lab-faults")
    discover(fabric)
    sweep(fabric)
    flapper = FaultInjector(lab, 60, kinds=("flap",), flap_s=3, seed=7)
    # Default targets: one end of each switch-to-switch link of the netfile (Switch1/Switch2 ports 3 and 5).
    assert sorted(flapper.targets) == [("Switch1", 3), ("Switch1", 5)]
    fault = flapper.inject_once()
    discover(fabric)
    down = Alarm.objects.get(fabric=fabric, code="link.down")
    assert f"{lab.guid_of(fault.node)}/{fault.port}" in down.object_key

    def relinked() -> bool:  # the injector relinks after flap_s; a discovery then sees the link
        discover(fabric)
        down.refresh_from_db()
        return down.state == "cleared"

    wait_for(relinked, 30, "the flapped link to be back and its alarm cleared", interval=0.5)
    assert down.state == "cleared"

    burster = FaultInjector(lab, 60, kinds=("burst",), burst=400, seed=3)
    for node, port in burster.targets:  # counters not at zero: the burst adds to them
        lab.perf_set(node, port, "SymbolErrorCounter", 1000)
    sweep(fabric)
    for _ in range(settings.WEFT_COUNTER_CLEAR_SWEEPS):  # no new errors: the alarms of that jump clear
        sweep(fabric)
    assert not Alarm.objects.open().filter(fabric=fabric, code="port.symbol_errors").exists()
    fault = burster.inject_once()  # the counters are set when it returns
    sweep(fabric)
    alarm = Alarm.objects.open().get(fabric=fabric, code="port.symbol_errors")
    assert alarm.port.port_num == fault.port and alarm.details["delta"] == 400
    assert Alarm.objects.filter(fabric=fabric, code="port.link_downed", port=alarm.port).exists()
    burster.stop()
    flapper.stop()

    # As the demo runs it: a started injector stops within its timeout (Ctrl-C of the demo).
    running = FaultInjector(lab, 3600, kinds=("burst",), seed=1)
    running.start()
    running.stop(timeout=5)
    assert not running.is_alive()


def test_sm_watch_task_polls_live_fabrics_only(small_lab):
    from fabric.models import Fabric
    from fabric.tasks import sm_watch_task

    make_fabric(small_lab, "lab-live")
    Fabric.objects.create(name="imported")  # no tool_env/ca_name: not reachable from here
    out = sm_watch_task()
    assert [r["fabric"] for r in out] == ["lab-live"]
    assert out[0]["master_guid"] == small_lab.sm_info()["guid"] and out[0]["error"] == ""


def test_leaf_switch_dies_one_summary_mail(lab_factory, smtp):
    """A leaf switch dies: its host links and uplinks go down and its hosts vanish at once; on-call
    gets one summary mail per urgency class listing them, not one mail per link."""
    from lab import netgen

    lab = lab_factory(netgen.fat_tree_2level(3, 4, 4))
    lab.wait_master(60)
    ensure_policies()
    EventPolicy.objects.filter(code__in=["link.down", "node.removed"]).update(
        recipient_emails="noc@example.org"
    )
    fabric = make_fabric(lab, "lab-storm")
    discover(fabric)
    sm_ca = lab.net.cas[0].node_id  # OpenSM (and the diags) run on the first CA
    cas = {n.node_id for n in lab.net.cas}
    switches = {n.node_id for n in lab.net.switches}
    neighbours = {s: set() for s in switches}
    for (a, _), (b, _) in lab.net.links:
        if a in switches:
            neighbours[a].add(b)
        if b in switches:
            neighbours[b].add(a)
    leaves = sorted(s for s, peers in neighbours.items() if peers & cas and sm_ca not in peers)
    leaf = leaves[-1]
    hosts = neighbours[leaf] & cas
    uplinks = neighbours[leaf] & switches
    lab.unlink(leaf)
    discover(fabric)
    downs = Alarm.objects.filter(fabric=fabric, code="link.down", state="active").count()
    removed = Alarm.objects.filter(fabric=fabric, code="node.removed", state="active").count()
    # Every cable of the dead leaf, and the leaf and its hosts as nodes.
    assert downs == len(hosts) + len(uplinks) and removed == len(hosts) + 1
    # one summary per urgency class (events.notify: Critical mail never waits on, or shares a mail
    # with, lower severities): the Critical one lists the cables, the Minor one the nodes
    assert len(smtp.messages) == 2, [m["Subject"] for _, m in smtp.messages]
    by_subject = {msg["Subject"]: (to, msg) for to, msg in smtp.messages}
    critical = f"[Weft] {downs} alarm(s) on fabric lab-storm: {downs} critical"
    minor = f"[Weft] {removed} alarm(s) on fabric lab-storm: {removed} minor"
    assert set(by_subject) == {critical, minor}
    for subject, group, other in ((critical, f"Link down ({downs}):", "Node removed ("),
                                  (minor, f"Node removed ({removed}):", "Link down (")):  # fmt: skip
        to, msg = by_subject[subject]
        assert to == ["noc@example.org"]
        body = msg.get_body(("plain",)).get_content()
        assert group in body and other not in body
