"""A sweep with saturated counters (IBTA 16.1.3: each counter stops at its maximum on its own): the
port's other counters keep their rates and deltas, the Sweep counts counters and ports, and the
counter rules still see the SymbolErrorCounter delta (collector replaced by known reads; SQLite)."""

from __future__ import annotations

import pytest

from events.models import Alarm
from events.rules.counters import evaluate_sweep
from fabric.models import Fabric, Node, Port
from telemetry import semantics
from telemetry.collectors.counters import Collected, PortRead
from telemetry.models import PortCounters
from telemetry.services.sweep import run as sweep_mod

pytestmark = [pytest.mark.django_db, pytest.mark.backend]  # backend: the sweep store (COPY on PostgreSQL)

TOP = 0xFFFFFFFF


def raw(**values) -> tuple:
    return tuple(values.get(n, 0) for n in semantics.ALL_COUNTERS)


@pytest.fixture
def fabric_and_port():
    fabric = Fabric.objects.create(name="sat")
    node = Node.objects.create(fabric=fabric, node_guid="0x0000000000000005", node_type="ca", description="h")
    return fabric, Port.objects.create(node=node, port_num=1, lid=5, rate_gbps=32.0)


def sweep_reading(monkeypatch, fabric, values: tuple):
    def collect(reqs, **kw):  # the fabric has one port: every port request is for it
        reads = {(r[1], r[2]): PortRead(r[1], r[2], False, values) for r in reqs if r[0] == "Q"}
        assert len(reads) == 1
        return Collected(reads, {}, "mad", 0.01)

    monkeypatch.setattr(sweep_mod, "run_madpoll", collect)
    return sweep_mod.poll_fabric(fabric)


def test_saturated_xmit_data_leaves_the_other_rates_the_deltas_and_the_alarm(monkeypatch, fabric_and_port):
    fabric, port = fabric_and_port
    before = raw(
        xmit_data=TOP - 100, rcv_data=1_000, xmit_pkts=TOP - 1, rcv_pkts=20, xmit_wait=10, symbol_errors=4
    )
    s1 = sweep_reading(monkeypatch, fabric, before)
    a = PortCounters.objects.get(port=port)
    assert (s1.saturated, s1.saturated_ports) == (0, 0)

    after = raw(xmit_data=TOP, rcv_data=1_000 + 250_000, xmit_pkts=TOP, rcv_pkts=20 + 600, xmit_wait=10 + 4_000,
                symbol_errors=6)  # fmt: skip
    s2 = sweep_reading(monkeypatch, fabric, after)
    pc = PortCounters.objects.get(port=port)
    dt = pc.sampled_at.timestamp() - a.sampled_at.timestamp()
    assert pc.saturated == ["xmit_data", "xmit_pkts"] and pc.reset is False
    assert pc.xmit_bytes_per_s is None and pc.xmit_pkts_per_s is None and pc.utilisation is None
    assert pc.rcv_bytes_per_s == pytest.approx(250_000 * 4 / dt, rel=1e-9)
    assert pc.rcv_pkts_per_s == pytest.approx(600 / dt, rel=1e-9)
    assert pc.xmit_wait_per_s == pytest.approx(4_000 / dt, rel=1e-9)
    assert pc.error_deltas == {"symbol_errors": 2}
    assert (s2.saturated, s2.saturated_ports) == (2, 1)
    assert s2.summary()["saturated"] == 2 and s2.summary()["saturated_ports"] == 1

    evaluate_sweep(fabric.pk, s2.pk)
    alarm = Alarm.objects.get(code="port.symbol_errors")
    assert alarm.state == "active" and alarm.details["delta"] == 2.0


def test_metrics_show_saturated_ports_and_counters(monkeypatch, fabric_and_port):
    from prometheus_client.parser import text_string_to_metric_families

    from telemetry.metrics import render

    fabric, _port = fabric_and_port
    sweep_reading(monkeypatch, fabric, raw(xmit_data=TOP, rcv_data=TOP, symbol_errors=0xFFFF))
    got = {
        fam.name: [s.value for s in fam.samples]
        for fam in text_string_to_metric_families(render({fabric.pk: fabric.name}))
        if fam.name.startswith("weft_sweep_saturated")
    }
    assert got == {"weft_sweep_saturated_ports": [1.0], "weft_sweep_saturated_counters": [3.0]}
