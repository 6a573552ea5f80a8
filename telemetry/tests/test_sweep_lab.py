"""Counter sweeps against the lab (ibsim + OpenSM + diags): exact rates, saturation, reset, stale ports,
the commands, /metrics, and the collector checked against perfquery / ibqueryerrors.

Our own MADs and OpenSM's sweeps move the data counters a little (ibsim counts every MAD that crosses
a port: 72 words per hop), so exact-rate tests drive a large, known delta with ``PerformanceSet`` and
assert (a) the rate is exactly the stored raw delta × 4 / the stored sample interval, and (b) the raw
delta is the driven delta plus at most a few MADs' worth of words.
"""

from __future__ import annotations

import io
import json
import os
import signal
import time
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client

from accounts.models import AuditEntry
from fabric.models import Fabric, Port
from fabric.services.discovery import discover
from telemetry.models import PortCounters, Sweep
from telemetry.parsers.ibqueryerrors import parse_ibqueryerrors
from telemetry.parsers.perfquery import merge_port_counters, parse_perfquery
from telemetry.services.sweep import poll_fabric
from tests.support.waits import wait_for

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]

MAD_SLACK_WORDS = 72 * 40  # a few dozen MADs crossing the port between two reads
LINK_BYTES_PER_S = 8e9 / 8  # 4x SDR: 4 lanes × 2 Gb/s data rate (8b/10b)


@pytest.fixture
def fabric(small_lab):
    f = Fabric.objects.create(name="lab", tool_env=small_lab.tool_env)
    discover(f)
    f.refresh_from_db()
    return f


def counters(node: str, port: int) -> PortCounters:
    return PortCounters.objects.get(port__node__description=node, port__port_num=port)


def last_json(command: str, *args) -> dict:
    out = io.StringIO()
    call_command(command, *args, stdout=out)
    lines = out.getvalue().strip().splitlines()
    if command == "poll_counters":
        assert len(lines) == 1, lines  # the JSON summary alone, no log line before it (issue 14)
    return json.loads(lines[-1])


def lid_of(node: str) -> int:
    p = Port.objects.select_related("node").get(node__description=node, port_num=1)
    return p.node.lid if p.node.node_type == "switch" else p.lid


def test_collector_reads_what_perfquery_reads(small_lab, fabric):
    small_lab.perf_set("Hca3", 1, "PortXmitWait", 123457)
    small_lab.perf_set("Hca3", 1, "SymbolErrorCounter", 17)
    small_lab.perf_set("Hca3", 1, "LinkDownedCounter", 3)
    small_lab.perf_set("Hca3", 1, "PortCountersExtended.PortRcvData", 7_000_000_000_123)
    lid = lid_of("Hca3")
    text = (
        small_lab.run(["perfquery", str(lid), "1"]).stdout
        + small_lab.run(["perfquery", "-x", str(lid), "1"]).stdout
    )
    ref = merge_port_counters(parse_perfquery(text))[(lid, 1)]["values"]
    poll_fabric(fabric)
    pc = counters("Hca3", 1)
    assert pc.extended is True
    assert (
        (pc.xmit_wait, pc.symbol_errors, pc.link_downed)
        == (123457, 17, 3)
        == (
            ref["xmit_wait"],
            ref["symbol_errors"],
            ref["link_downed"],
        )
    )
    for name in ("rcv_errors", "xmit_discards", "vl15_dropped", "local_link_integrity_errors"):
        assert getattr(pc, name) == ref[name]
    # data counters only grow between the perfquery read and ours (our own MADs cross the port)
    assert 0 <= pc.rcv_data - ref["rcv_data"] <= MAD_SLACK_WORDS
    assert ref["rcv_data"] >= 7_000_000_000_123


def _exact_rate_case(small_lab, fabric, node, extended):
    prefix = "PortCountersExtended." if extended else ""
    small_lab.perf_set(node, 1, f"{prefix}PortXmitData", 1_000_000)
    small_lab.perf_set(node, 1, f"{prefix}PortRcvData", 2_000_000)
    small_lab.perf_set(node, 1, "PortXmitWait", 1_000)
    policy = "auto" if extended else "never"
    s1 = poll_fabric(fabric, extended=policy)
    a = counters(node, 1)
    assert a.extended is extended
    d_xmit, d_rcv, d_wait = 150_000_000, 40_000_000, 300_000
    small_lab.perf_set(node, 1, f"{prefix}PortXmitData", a.xmit_data + d_xmit)
    small_lab.perf_set(node, 1, f"{prefix}PortRcvData", a.rcv_data + d_rcv)
    small_lab.perf_set(node, 1, "PortXmitWait", a.xmit_wait + d_wait)
    s2 = poll_fabric(fabric, extended=policy)
    b = counters(node, 1)
    assert b.sweep_id == s2.pk != s1.pk and not b.stale and not b.reset and b.saturated == []
    dt = b.sampled_at.timestamp() - a.sampled_at.timestamp()  # as the sweep computes it
    assert dt > 0
    # (a) the rate is the stored delta in bytes over the stored interval
    assert b.xmit_bytes_per_s == pytest.approx((b.xmit_data - a.xmit_data) * 4 / dt, rel=1e-6)
    assert b.rcv_bytes_per_s == pytest.approx((b.rcv_data - a.rcv_data) * 4 / dt, rel=1e-6)
    # (b) ... and that delta is the driven one plus only our own MADs
    assert d_xmit <= b.xmit_data - a.xmit_data <= d_xmit + MAD_SLACK_WORDS
    assert d_rcv <= b.rcv_data - a.rcv_data <= d_rcv + MAD_SLACK_WORDS
    assert d_xmit * 4 / dt <= b.xmit_bytes_per_s <= (d_xmit + MAD_SLACK_WORDS) * 4 / dt
    assert b.xmit_wait - a.xmit_wait == d_wait  # nothing else moves PortXmitWait in ibsim
    assert b.xmit_wait_per_s == pytest.approx(d_wait / dt, rel=1e-6)
    assert b.congestion == pytest.approx(min(1.0, d_wait / dt * 1e-6), rel=1e-6)  # 1 µs tick (default)
    util = max(b.xmit_bytes_per_s, b.rcv_bytes_per_s) / LINK_BYTES_PER_S
    assert b.utilisation == pytest.approx(min(1.0, util), rel=1e-6)
    assert s2.interval_s == pytest.approx((s2.started - s1.started).total_seconds())


def test_exact_rates_extended_counters(small_lab, fabric):
    _exact_rate_case(small_lab, fabric, "Hca2", extended=True)


def test_exact_rates_32bit_counters(small_lab, fabric):
    _exact_rate_case(small_lab, fabric, "Hca4", extended=False)


def test_saturation_gives_no_rate_and_a_flag(small_lab, fabric):
    poll_fabric(fabric, extended="never")
    a = counters("Hca1", 1)
    small_lab.perf_set("Hca1", 1, "PortXmitData", 0xFFFFFFFF)
    small_lab.perf_set("Hca1", 1, "SymbolErrorCounter", 0xFFFF)
    small_lab.perf_set("Hca1", 1, "PortXmitWait", a.xmit_wait + 30_000)
    s = poll_fabric(fabric, extended="never")
    pc = counters("Hca1", 1)
    assert pc.xmit_data == 0xFFFFFFFF
    assert pc.saturated == ["xmit_data", "symbol_errors"]
    assert pc.xmit_bytes_per_s is None and pc.utilisation is None
    # per counter (IBTA 16.1.3): the unsaturated counters keep their rates, the saturated
    # SymbolErrorCounter has no delta
    dt = pc.sampled_at.timestamp() - a.sampled_at.timestamp()
    assert pc.rcv_bytes_per_s == pytest.approx((pc.rcv_data - a.rcv_data) * 4 / dt, rel=1e-6)
    assert pc.xmit_wait_per_s == pytest.approx(30_000 / dt, rel=1e-6) and pc.congestion is not None
    assert pc.error_deltas == {}
    assert s.saturated >= 2 and s.saturated_ports >= 1
    out = last_json("show_port", "Hca1", "1")
    assert out["saturated"] == ["xmit_data", "symbol_errors"] and out["xmit_bytes_per_s"] is None


def test_reset_gives_no_rate_and_a_flag_then_rates_again(small_lab, fabric):
    small_lab.perf_set("Hca3", 1, "PortCountersExtended.PortXmitData", 900_000_000)
    poll_fabric(fabric)
    small_lab.perf_set("Hca3", 1, "PortCountersExtended.PortXmitData", 10)
    s = poll_fabric(fabric)
    pc = counters("Hca3", 1)
    assert pc.reset is True and pc.xmit_bytes_per_s is None and pc.congestion is None
    assert s.resets >= 1
    poll_fabric(fabric)
    pc = counters("Hca3", 1)
    assert pc.reset is False and pc.xmit_bytes_per_s is not None and pc.xmit_bytes_per_s >= 0


def test_vanished_port_is_stale_not_a_failed_sweep(small_lab, fabric):
    poll_fabric(fabric)
    before = counters("Hca4", 1)
    small_lab.unlink("Hca4", 1)
    try:
        s = poll_fabric(fabric)
    finally:
        small_lab.relink("Hca4", 1)
    assert (
        s.status == "partial"
        and s.stale == 1
        and s.ports == Port.objects.filter(node__fabric=fabric).count() - 1
    )
    pc = counters("Hca4", 1)
    assert pc.stale is True and "no answer" in pc.stale_reason and "LID" in pc.stale_reason
    assert pc.xmit_data == before.xmit_data  # last known raw values kept
    assert pc.xmit_bytes_per_s is None
    assert counters("Hca3", 1).stale is False
    # Relinked: fresh again once OpenSM has brought the port back to Active (its next sweep,
    # a second or two under load; MADs to the port time out until then).
    deadline = time.monotonic() + 20
    while True:
        summary = last_json("poll_counters", "--fabric", "lab")
        if summary["stale"] == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert summary["stale"] == 0, counters("Hca4", 1).stale_reason


def test_failed_collector_marks_everything_stale(small_lab, fabric):
    poll_fabric(fabric)
    fabric.tool_env = dict(fabric.tool_env, IBSIM_SOCKNAME="no-such-lab")
    fabric.save()
    s = poll_fabric(fabric, timeout=15)
    assert s.status == "failed" and s.error
    assert PortCounters.objects.filter(port__node__fabric=fabric, stale=False).count() == 0
    assert "sweep failed" in counters("Hca1", 1).stale_reason


def test_poll_counters_and_show_port_commands(small_lab, fabric):
    first = last_json("poll_counters", "--fabric", "lab")
    assert set(first) >= {"ports", "stale", "duration_s", "saturated", "resets"}
    assert first["ports"] == Port.objects.filter(node__fabric=fabric).count() and first["stale"] == 0
    small_lab.perf_set("Switch1", 3, "PortXmitWait", counters("Switch1", 3).xmit_wait + 200_000)
    last_json("poll_counters", "--fabric", "lab")
    guid = small_lab.guid_of("Switch1")
    by_guid = last_json("show_port", guid, "3")
    by_desc = last_json("show_port", "Switch1", "3", "--fabric", "lab")
    by_lid = last_json("show_port", str(lid_of("Switch1")), "3")
    unpadded = last_json("show_port", hex(int(guid, 16)), "3")
    assert by_guid == by_desc == by_lid == unpadded
    for key in (
        "xmit_bytes_per_s",
        "rcv_bytes_per_s",
        "xmit_wait_per_s",
        "utilisation",
        "congestion",
        "stale",
    ):
        assert key in by_guid
    assert by_guid["xmit_wait_per_s"] > 0 and by_guid["raw"]["xmit_wait"] >= 200_000
    assert by_guid["remote"]["node"] == "Switch2" and by_guid["remote"]["port"] == 3


def test_reset_option_clears_counters_and_is_audited(small_lab, fabric):
    small_lab.perf_set("Hca2", 1, "SymbolErrorCounter", 9)
    small_lab.perf_set("Hca2", 1, "PortCountersExtended.PortXmitData", 5_000_000)
    out = last_json("poll_counters", "--fabric", "lab", "--reset")
    assert out["reset_done"] is True
    entry = AuditEntry.objects.get(action="telemetry.reset_counters")
    assert entry.changes["ports"] == out["ports"] and entry.changes["failed"] == 0
    lid = lid_of("Hca2")
    after = merge_port_counters(parse_perfquery(small_lab.run(["perfquery", "-x", str(lid), "1"]).stdout))
    assert after[(lid, 1)]["values"]["xmit_data"] < 5_000_000
    nxt = last_json("poll_counters", "--fabric", "lab")
    assert nxt["resets"] >= 1 and counters("Hca2", 1).symbol_errors == 0


def test_default_sweeps_never_reset(small_lab, fabric):
    small_lab.perf_set("Hca1", 1, "LinkDownedCounter", 4)
    poll_fabric(fabric)
    poll_fabric(fabric)
    lid = lid_of("Hca1")
    ref = merge_port_counters(parse_perfquery(small_lab.run(["perfquery", str(lid), "1"]).stdout))
    assert ref[(lid, 1)]["values"]["link_downed"] == 4
    assert not AuditEntry.objects.filter(action="telemetry.reset_counters").exists()


def test_metrics_endpoint(small_lab, fabric, settings):
    poll_fabric(fabric)
    poll_fabric(fabric)
    settings.WEFT_METRICS_TOKENS = ["s3cret"]
    settings.WEFT_METRICS_ALLOW = ["10.9.0.0/16"]
    assert Client(REMOTE_ADDR="192.0.2.1").get("/metrics", secure=True).status_code == 403
    assert (
        Client(REMOTE_ADDR="192.0.2.1")
        .get("/metrics", secure=True, HTTP_AUTHORIZATION="Bearer nope")
        .status_code
        == 403
    )
    ok = Client(REMOTE_ADDR="192.0.2.1").get("/metrics", secure=True, HTTP_AUTHORIZATION="Bearer s3cret")
    assert ok.status_code == 200
    by_address = Client(REMOTE_ADDR="10.9.3.4").get("/metrics", secure=True)
    assert by_address.status_code == 200
    assert f'weft_sweep_ok{{fabric="{fabric.name}"}} 1.0' in by_address.content.decode().splitlines()
    text = ok.content.decode()
    pc = counters("Switch1", 3)
    guid = small_lab.guid_of("Switch1")
    ident = f'fabric="lab",guid="{guid}",port="3"'
    assert f"weft_port_xmit_bytes_total{{{ident}}} {pc.xmit_data * 4}" in text.splitlines()
    assert f"weft_port_xmit_wait_ticks_total{{{ident}}} {pc.xmit_wait}" in text.splitlines()
    assert (
        f'weft_port_info{{{ident},node_desc="Switch1",remote_guid="{small_lab.guid_of("Switch2")}",'
        'remote_port="3",remote_desc="Switch2",width="4x",speed="'
    ) in text
    assert f"weft_port_errors_total{{{ident}}} " in text
    sweep = Sweep.objects.filter(fabric=fabric).first()
    assert f'weft_sweep_duration_seconds{{fabric="lab"}} {sweep.duration_s}' in text
    assert 'weft_sweep_stale_ports{fabric="lab"} 0.0' in text
    assert Client(REMOTE_ADDR="10.9.3.4").get("/metrics?fabric=nope", secure=True).status_code == 404


def test_ibqueryerrors_details_names_are_swapped_and_corrected(small_lab):
    """rdma-core prints PortXmitDiscardDetails under the PortRcvErrorDetails names and vice versa;
    the parser renames them — checked against perfquery -D / -E on the same port."""
    small_lab.perf_set("Hca2", 1, "PortXmitDiscards", 5)
    small_lab.perf_set("Hca2", 1, "PortXmitDiscardDetails.PortInactiveDiscards", 3)
    small_lab.perf_set("Hca2", 1, "PortXmitDiscardDetails.PortNeighborMTUDiscards", 2)
    small_lab.perf_set("Hca2", 1, "PortRcvErrors", 7)
    small_lab.perf_set("Hca2", 1, "PortRcvErrorDetails.PortMalformedPacketErrors", 4)
    try:
        res = small_lab.run(["ibqueryerrors", "--details", "--data"], check=False)
        assert res.returncode == 1  # "ports over threshold" is a result, not a failure
        rep = parse_ibqueryerrors(res.stdout)
        values = next(p for n in rep.nodes if n.name == "Hca2" for p in n.ports if p.port == 1)
        d_text = small_lab.run(["perfquery", "-D", "-G", hex(values.guid), "1"]).stdout
        e_text = small_lab.run(["perfquery", "-E", "-G", hex(values.guid), "1"]).stdout
        xd = parse_perfquery(d_text)[0]
        re_ = parse_perfquery(e_text)[0]
        assert xd.kind == "xmit_discard_details" and re_.kind == "rcv_error_details"
        assert values.values["inactive_discards"] == xd.values["inactive_discards"] == 3
        assert values.values["neighbor_mtu_discards"] == xd.values["neighbor_mtu_discards"] == 2
        assert values.values["malformed_pkt_errors"] == re_.values["malformed_pkt_errors"] == 4
        assert values.swapped_details == 3
        assert "local_physical_errors" not in values.values  # the wrong name is not kept
    finally:
        for f in ("PortXmitDiscards", "PortRcvErrors"):
            small_lab.perf_set("Hca2", 1, f, 0)


@pytest.mark.integration
def test_sweeps_on_postgresql_store_rates_and_history(small_lab, fabric):
    """The PostgreSQL path (one ``INSERT .. SELECT unnest(..) ON CONFLICT`` statement) stores the same
    semantics as the portable one: inserts, then updates, JSON flags, and a history chunk per bucket."""
    from django.db import connection

    from telemetry.models import CounterChunk

    assert connection.vendor == "postgresql"
    poll_fabric(fabric)
    a = counters("Hca1", 1)
    small_lab.perf_set("Hca1", 1, "PortXmitWait", a.xmit_wait + 50_000)
    small_lab.perf_set("Hca1", 1, "SymbolErrorCounter", a.symbol_errors + 2)
    s2 = poll_fabric(fabric)
    pc = counters("Hca1", 1)
    assert pc.sweep_id == s2.pk and pc.error_deltas == {"symbol_errors": 2} and pc.saturated == []
    dt = pc.sampled_at.timestamp() - a.sampled_at.timestamp()
    assert pc.xmit_wait_per_s == pytest.approx(50_000 / dt, rel=1e-6)
    n_ports = Port.objects.filter(node__fabric=fabric).count()
    assert PortCounters.objects.filter(port__node__fabric=fabric).count() == n_ports
    assert CounterChunk.objects.filter(fabric=fabric).count() >= 2


def test_sm_move_is_recorded_and_the_sweep_goes_on(lab_factory):
    from lab import netgen

    lab = lab_factory(netgen.two_switch_four_ca(), standby_sm="Hca4", sm_node="Hca2")
    fabric = Fabric.objects.create(name="smlab", tool_env=lab.tool_env, discovery_enabled=False)
    discover(fabric)
    fabric.refresh_from_db()
    assert fabric.master_sm_guid == f"0x{lab.node('Hca2').port_guid(1):016x}"
    assert poll_fabric(fabric).status == "ok"
    lab.kill_master_sm()
    new = lab.wait_master(timeout=60, guid="Hca4")
    s = poll_fabric(fabric)
    assert (
        s.status == "partial" and s.stale == 0 and s.ports == Port.objects.filter(node__fabric=fabric).count()
    )
    assert f"master SM moved from {fabric.master_sm_guid} to {new['guid']}" in s.error


def test_admin_reset_action_clears_selected_ports_and_is_audited(small_lab, fabric):
    from django.contrib.auth import get_user_model

    small_lab.perf_set("Hca1", 1, "SymbolErrorCounter", 6)
    small_lab.perf_set("Hca3", 1, "SymbolErrorCounter", 8)
    poll_fabric(fabric)
    admin_user = get_user_model().objects.create_superuser("root", "root@example.org", "pw-123456")
    client = Client()
    client.force_login(admin_user)
    pc = counters("Hca1", 1)
    resp = client.post(
        "/admin/telemetry/portcounters/",
        {"action": "reset_counters", "_selected_action": [pc.pk]},
        secure=True,
    )
    assert resp.status_code == 302
    entry = AuditEntry.objects.get(action="telemetry.reset_counters")
    assert entry.user == admin_user and entry.changes["ports"] == 1 and entry.changes["failed"] == 0
    poll_fabric(fabric)
    assert counters("Hca1", 1).symbol_errors == 0 and counters("Hca1", 1).reset is True
    assert counters("Hca3", 1).symbol_errors == 8  # not selected: untouched


def test_split_collector_reads_the_same_as_one_process(small_lab, fabric):
    from fabric.collectors.tools import fabric_ca_args, fabric_env
    from telemetry.collectors.counters import run_madpoll
    from telemetry.services.sweep.targets import fabric_targets, requests_for

    small_lab.perf_set("Switch2", 5, "PortXmitWait", 4242)
    reqs = requests_for(fabric, fabric_targets(fabric), "auto")
    kw = {"env": fabric_env(fabric), "ca_args": fabric_ca_args(fabric), "timeout": 30}
    one = run_madpoll(reqs, **kw)
    three = run_madpoll(reqs, processes=3, split_min=1, **kw)
    assert three.stats.count("madpoll:") == 3
    assert (
        set(one.reads) == set(three.reads)
        and len(one.reads) == Port.objects.filter(node__fabric=fabric).count()
    )
    for key, a in one.reads.items():
        b = three.reads[key]
        assert (a.error, b.error) == ("", "") and a.extended == b.extended
        assert a.raw[4:] == b.raw[4:]  # PortXmitWait and the error counters do not move by themselves
    assert one.capmasks == three.capmasks and set(one.capmasks.values()) == {0x1300, 0x1200}
    lid = Port.objects.get(node__description="Switch2", port_num=5).node.lid
    assert one.reads[(lid, 5)].values["xmit_wait"] == 4242


def test_serving_poller_is_reused_and_replaced_when_it_dies(small_lab, fabric):
    from telemetry.collectors import counters as coll

    coll.close_servers()
    poll_fabric(fabric)
    (pid,) = coll.server_pids()
    s = poll_fabric(fabric)
    assert s.status == "ok" and coll.server_pids() == [pid]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: coll.server_pids() == [], 5, "the killed poller to be seen dead")
    s = poll_fabric(fabric)  # the dead server is noticed and replaced, nothing goes stale
    assert s.status == "ok" and s.stale == 0
    (new,) = coll.server_pids()
    assert new != pid and Path(f"/proc/{new}").exists()
    coll.close_servers()
    assert coll.server_pids() == [] and not Path(f"/proc/{new}").exists()  # stopped and reaped
