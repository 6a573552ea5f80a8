"""/metrics without a lab: exposition from stored rows, access control, and the Grafana dashboard's
queries only use metric names that Weft exports."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.test import Client

from fabric.models import Fabric, Link, Node, Port
from telemetry.models import PortCounters, Sweep

GRAFANA = Path(__file__).resolve().parents[2] / "grafana" / "weft-fabric.json"


@pytest.fixture
def stored(db):
    fabric = Fabric.objects.create(name="f1")
    sw = Node.objects.create(
        fabric=fabric, node_guid="0x0000000000000a01", node_type="switch", description="leaf-1", lid=7
    )
    ca = Node.objects.create(
        fabric=fabric, node_guid="0x0000000000000b01", node_type="ca", description="host1 mlx5_0"
    )
    p_sw = Port.objects.create(node=sw, port_num=5, rate_gbps=200.0)
    p_ca = Port.objects.create(node=ca, port_num=1, lid=9, rate_gbps=200.0)
    Link.objects.create(fabric=fabric, port_a=p_sw, port_b=p_ca, width="4x", speed="HDR", rate_gbps=200.0)
    now = datetime.now(UTC)
    sweep = Sweep.objects.create(
        fabric=fabric,
        started=now - timedelta(seconds=3),
        duration_s=0.25,
        interval_s=10.0,
        ports=2,
        stale=1,
        status="partial",
    )
    PortCounters.objects.create(
        port=p_sw,
        sweep=sweep,
        sampled_at=now,
        xmit_data=1000,
        rcv_data=10,
        xmit_pkts=5,
        rcv_pkts=6,
        xmit_wait=77,
        symbol_errors=3,
        link_downed=1,
        extended=True,
        xmit_bytes_per_s=1.5e9,
        utilisation=0.06,
        congestion=0.25,
    )
    PortCounters.objects.create(port=p_ca, sweep=sweep, stale=True, stale_reason="no answer")
    return fabric


def test_exposition_values_labels_and_health(stored, settings):
    settings.WEFT_METRICS_ALLOW = ["127.0.0.1"]
    resp = Client(REMOTE_ADDR="127.0.0.1").get("/metrics", secure=True)
    assert resp.status_code == 200 and resp["Content-Type"].startswith("text/plain")
    text = resp.content.decode()
    labels = (
        'fabric="f1",node_desc="leaf-1",node_guid="0x0000000000000a01",port="5",'
        'remote_desc="host1 mlx5_0",remote_guid="0x0000000000000b01",remote_port="1"'
    )
    lines = text.splitlines()
    assert f"weft_port_xmit_bytes_total{{{labels}}} 4000.0" in lines  # 1000 words x 4
    assert f"weft_port_xmit_wait_ticks_total{{{labels}}} 77.0" in lines
    assert f"weft_port_symbol_errors_total{{{labels}}} 3.0" in lines
    assert f"weft_port_link_downed_total{{{labels}}} 1.0" in lines
    assert f"weft_port_congestion_ratio{{{labels}}} 0.25" in lines
    assert f"weft_port_stale{{{labels}}} 0.0" in lines
    # the stale CA port has no counters but is flagged
    assert any(
        ln.startswith("weft_port_stale{") and 'node_desc="host1 mlx5_0"' in ln and ln.endswith(" 1.0")
        for ln in lines
    )
    assert not any(
        ln.startswith("weft_port_xmit_bytes_total{") and 'node_desc="host1 mlx5_0"' in ln for ln in lines
    )
    assert 'weft_sweep_stale_ports{fabric="f1"} 1.0' in lines
    assert 'weft_sweep_ok{fabric="f1"} 0.5' in lines
    age = next(float(ln.split()[-1]) for ln in lines if ln.startswith('weft_sweep_age_seconds{fabric="f1"}'))
    assert 2.0 < age < 60.0


FORBIDDEN = "forbidden: bearer token or allowed address required\n"


def test_access_control(stored, settings):
    settings.WEFT_METRICS_TOKENS = ["tok-1", "tok-2"]
    settings.WEFT_METRICS_ALLOW = []
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics", secure=True).status_code == 403
    assert Client().get("/metrics", secure=True, HTTP_AUTHORIZATION="Bearer tok-3").status_code == 403
    assert Client().get("/metrics", secure=True, HTTP_AUTHORIZATION="Bearer tok-2").status_code == 200
    assert Client().post("/metrics", secure=True, HTTP_AUTHORIZATION="Bearer tok-2").status_code == 405
    # a refusal says why and shows no metric; the token's answer is the exposition of the fabric
    refused = Client().get("/metrics", secure=True, HTTP_AUTHORIZATION="Bearer tok-3")
    assert refused.content.decode() == FORBIDDEN
    allowed = Client().get("/metrics", secure=True, HTTP_AUTHORIZATION="Bearer tok-2").content.decode()
    assert 'weft_sweep_ok{fabric="f1"} 0.5' in allowed.splitlines()


def test_grafana_dashboard_uses_exported_metrics(stored, settings):
    settings.WEFT_METRICS_ALLOW = ["127.0.0.1"]
    text = Client(REMOTE_ADDR="127.0.0.1").get("/metrics", secure=True).content.decode()
    exported = set(re.findall(r"^# TYPE (\S+) (\S+)", text, re.M))
    names = {n if t != "counter" or n.endswith("_total") else n + "_total" for n, t in exported}
    dash = json.loads(GRAFANA.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    used = {m for e in exprs for m in re.findall(r"\bweft_[a-z0-9_]+", e)}
    assert used and used <= names, used - names


@pytest.mark.parametrize(
    "header",
    [
        {"HTTP_X_FORWARDED_FOR": "203.0.113.9"},
        {"HTTP_FORWARDED": "for=203.0.113.9;proto=https"},
        {"HTTP_X_REAL_IP": "203.0.113.9"},
    ],
)
def test_proxied_requests_are_not_allowed_by_the_proxys_loopback_address(stored, settings, header):
    """Behind the documented reverse proxy every request comes from 127.0.0.1: the address
    allow-list must not open /metrics to the world; a token still works."""
    settings.WEFT_METRICS_TOKENS = ["tok-1"]
    settings.WEFT_METRICS_ALLOW = ["127.0.0.1", "::1"]
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics", secure=True).status_code == 200
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics", secure=True, **header).status_code == 403
    authorised = Client(REMOTE_ADDR="127.0.0.1").get(
        "/metrics", secure=True, HTTP_AUTHORIZATION="Bearer tok-1", **header
    )
    assert authorised.status_code == 200
    assert 'weft_sweep_ok{fabric="f1"} 0.5' in authorised.content.decode().splitlines()
    proxied = Client(REMOTE_ADDR="127.0.0.1").get("/metrics", secure=True, **header)
    assert proxied.content.decode() == FORBIDDEN


def test_unknown_fabric_with_a_nul_is_a_404(stored):
    """``?fabric=%00`` was a 500 on PostgreSQL (a NUL cannot go into a query)."""
    resp = Client(REMOTE_ADDR="127.0.0.1").get("/metrics?fabric=%00", secure=True)
    assert resp.status_code == 404
    assert resp.content.decode() == "no fabric '\\x00'\n"


def test_a_fabric_never_discovered_is_not_swept_ok(db, settings, monkeypatch):
    """A fabric registered but not discovered yet has no ports: its sweep is ``skipped`` with the
    reason (no collector runs), and ``weft_sweep_ok`` says 0, not 1."""
    from telemetry.services import sweep as sweep_service

    def no_collector(*args, **kwargs):
        raise AssertionError("the collector ran for a fabric without ports")

    monkeypatch.setattr(sweep_service, "run_madpoll", no_collector)
    fabric = Fabric.objects.create(name="new", tool_env={"LD_PRELOAD": "libumad2sim.so"})
    sweep = sweep_service.poll_fabric(fabric)
    assert (sweep.status, sweep.ports, sweep.stale) == ("skipped", 0, 0)
    assert sweep.error == "no ports known: the fabric has not been discovered yet (nothing to read)"
    assert sweep.summary()["status"] == "skipped"
    settings.WEFT_METRICS_ALLOW = ["127.0.0.1"]
    lines = Client(REMOTE_ADDR="127.0.0.1").get("/metrics", secure=True).content.decode().splitlines()
    assert 'weft_sweep_ok{fabric="new"} 0.0' in lines
    assert 'weft_sweep_ports{fabric="new"} 0.0' in lines
