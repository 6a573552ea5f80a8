"""/metrics without a lab: exposition from stored rows, access control, and the Grafana dashboard's
queries only use metric names that Weft exports."""

from __future__ import annotations

import gzip
import json
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

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
    p_sw = Port.objects.create(node=sw, port_num=5, rate_gbps=200.0, width="4x", speed="HDR")
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
        rcv_errors=0,
        extended=True,
        xmit_bytes_per_s=1.5e9,
        utilisation=0.06,
        congestion=0.25,
    )
    PortCounters.objects.create(port=p_ca, sweep=sweep, stale=True, stale_reason="no answer")
    return fabric


def samples(text: str) -> dict[tuple, float]:
    """``{(sample name, ((label, value), ...)): value}`` of an exposition, read by prometheus_client's
    own parser (which refuses a malformed one)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def ident(guid: str, port: int, fabric: str = "f1") -> tuple:
    return (("fabric", fabric), ("guid", guid), ("port", str(port)))


SW, CA = "0x0000000000000a01", "0x0000000000000b01"


def test_exposition_values_labels_and_health(stored, settings):
    settings.WEFT_METRICS_ALLOW = ["127.0.0.1"]
    resp = Client(REMOTE_ADDR="127.0.0.1").get("/metrics", secure=True)
    assert resp.status_code == 200 and resp["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "Content-Encoding" not in resp  # not asked for gzip
    text = resp.content.decode()
    lines = text.splitlines()
    sw = 'fabric="f1",guid="0x0000000000000a01",port="5"'
    # counters carry only the port's identity; integers print without a fraction
    assert f"weft_port_xmit_bytes_total{{{sw}}} 4000" in lines  # 1000 words x 4
    assert f"weft_port_xmit_wait_ticks_total{{{sw}}} 77" in lines
    assert f"weft_port_symbol_errors_total{{{sw}}} 3" in lines
    assert f"weft_port_link_downed_total{{{sw}}} 1" in lines
    assert f"weft_port_errors_total{{{sw}}} 4" in lines  # 3 + 1 + rcv_errors 0
    assert "weft_port_rcv_errors_total{" not in text  # zero: left out (sparse)
    # the descriptive labels are on one info series per port (empty remote for none)
    assert (
        f'weft_port_info{{{sw},node_desc="leaf-1",remote_guid="{CA}",remote_port="1",'
        'remote_desc="host1 mlx5_0",width="4x",speed="HDR"} 1'
    ) in lines
    assert 'weft_link_data_rate_bytes_per_second{fabric="f1",width="4x",speed="HDR"} 25000000000.0' in lines
    assert 'weft_port_xmit_wait_tick_seconds{fabric="f1"} 1e-06' in lines
    # rates, utilisation and congestion are PromQL's now: no per-port gauge of them
    for gone in ("_per_second{", "weft_port_utilisation_ratio", "weft_port_congestion_ratio"):
        assert not any(ln.startswith("weft_port") and gone in ln for ln in lines), gone
    # the stale CA port: flagged, its info kept, no counter series
    got = samples(text)
    assert got[("weft_port_stale", ident(CA, 1))] == 1.0
    assert ("weft_port_stale", ident(SW, 5)) not in got
    ca_series = {k[0]: dict(k[1]) for k in got if dict(k[1]).get("guid") == CA}
    assert set(ca_series) == {"weft_port_stale", "weft_port_info"}
    assert ca_series["weft_port_info"] == {
        "fabric": "f1", "guid": CA, "port": "1", "node_desc": "host1 mlx5_0",
        "remote_desc": "leaf-1", "remote_guid": SW, "remote_port": "5", "speed": "", "width": "",
    }  # fmt: skip
    assert 'weft_sweep_stale_ports{fabric="f1"} 1.0' in lines
    assert 'weft_sweep_ok{fabric="f1"} 0.5' in lines
    age = next(float(ln.split()[-1]) for ln in lines if ln.startswith('weft_sweep_age_seconds{fabric="f1"}'))
    assert 2.0 < age < 60.0


def steady(body: bytes) -> list[bytes]:
    """The lines of an exposition but the sweep's age (it grows between two requests)."""
    return [ln for ln in body.splitlines() if not ln.startswith(b"weft_sweep_age_seconds{")]


def test_gzip_selection_and_escaping(stored, settings):
    """gzip when asked (and not when refused with q=0); ``collect[]`` groups and single families;
    repeated ``?fabric=``; a 400 naming the valid groups; label values escaped; a renamed node
    (node-name map edit) is shown by the next scrape."""
    settings.WEFT_METRICS_ALLOW = ["127.0.0.1"]
    client = Client(REMOTE_ADDR="127.0.0.1")
    before = client.get("/metrics?collect[]=info", secure=True).content.decode()
    assert f'guid="{SW}",port="5",node_desc="leaf-1",' in before  # the ports' labels are now cached
    Node.objects.filter(node_guid=SW).update(name='leaf "1" \\ a')
    Fabric.objects.filter(pk=stored.pk).update(node_name_map_changed=datetime.now(UTC))  # as a map edit does
    other = Fabric.objects.create(name="f2")
    n2 = Node.objects.create(fabric=other, node_guid=SW, node_type="switch", description="sw2")
    Sweep.objects.create(fabric=other, started=datetime.now(UTC), duration_s=1.0, ports=1, status="ok")
    PortCounters.objects.create(port=Port.objects.create(node=n2, port_num=1), xmit_data=7)
    plain = client.get("/metrics", secure=True).content
    packed = client.get("/metrics", secure=True, HTTP_ACCEPT_ENCODING="br, gzip;q=0.5")
    assert packed["Content-Encoding"] == "gzip" and packed["Vary"] == "Accept-Encoding"
    assert steady(gzip.decompress(packed.content)) == steady(plain) and len(packed.content) < len(plain)
    refused = client.get("/metrics", secure=True, HTTP_ACCEPT_ENCODING="gzip;q=0, identity")
    assert "Content-Encoding" not in refused and steady(refused.content) == steady(plain)
    got = samples(plain.decode())  # the escaped name parses back to itself; both fabrics are there
    info = [dict(k[1]) for k in got if k[0] == "weft_port_info" and dict(k[1])["guid"] == SW]
    assert sorted(i["node_desc"] for i in info) == ['leaf "1" \\ a', "sw2"]
    assert got[("weft_port_xmit_bytes_total", ident(SW, 1, "f2"))] == 28.0
    # one group, or one family, of one fabric
    traffic = client.get("/metrics?fabric=f2&collect[]=traffic", secure=True).content.decode()
    assert {k[0] for k in samples(traffic)} == {
        "weft_port_xmit_bytes_total", "weft_port_xmit_wait_tick_seconds"}  # fmt: skip
    assert 'fabric="f1"' not in traffic
    one = client.get("/metrics?collect[]=weft_sweep_ok", secure=True).content.decode()
    assert samples(one) == {
        ("weft_sweep_ok", (("fabric", "f1"),)): 0.5, ("weft_sweep_ok", (("fabric", "f2"),)): 1.0}  # fmt: skip
    both = client.get("/metrics?fabric=f1&fabric=f2&collect[]=sweep", secure=True).content.decode()
    assert {dict(k[1])["fabric"] for k in samples(both)} == {"f1", "f2"}
    every = client.get("/metrics?fabric=f2&fabric=f1", secure=True)  # registered collectors too
    assert every.status_code == 200 and sorted(steady(every.content)) == sorted(steady(plain))
    bad = client.get("/metrics?collect[]=nope&collect[]=info", secure=True)
    assert bad.status_code == 400
    assert bad.content.decode() == (
        "unknown collect[] 'nope': groups are cables, devices, errors, info, roles, sweep, switches, traffic "
        "or a metric family name of them\n"
    )


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
    # a name matcher (__name__=~"weft_port_(xmit|rcv)_bytes_total") must match exported names
    patterns = {m for e in exprs for m in re.findall(r'__name__=~"([^"]+)"', e)}
    for pattern in patterns:
        assert len([n for n in names if re.fullmatch(pattern, n)]) >= 2, pattern
    plain = [re.sub(r'__name__=~"[^"]+"', "", e) for e in exprs]
    used = {m for e in plain for m in re.findall(r"\bweft_[a-z0-9_]+", e)}
    assert used and used <= names, used - names
    # the info series' labels the dashboard joins on and shows are the ones exported
    info_labels = {
        "fabric",
        "guid",
        "port",
        "node_desc",
        "remote_guid",
        "remote_port",
        "remote_desc",
        "width",
        "speed",
    }
    joined = {
        lb.strip()
        for e in exprs
        for grp in re.findall(r"(?:on|group_left) \(([^)]*)\)", e)
        for lb in grp.split(",")
    }
    assert joined and joined <= info_labels, joined - info_labels
    legends = {
        m
        for p in dash["panels"]
        for t in p.get("targets", [])
        for m in re.findall(r"{{(\w+)}}", t.get("legendFormat", ""))
    }
    assert legends <= info_labels | {"__name__"}, legends


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
    from telemetry.services.sweep import run as sweep_service

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


@pytest.mark.slow
def test_the_metrics_bench_runs_tiny():
    """``bench/metrics.py --tiny`` (a generated fat tree, SQLite): the figures are there and
    consistent — gzip smaller, fewer bytes per port than the treydock format and than the old
    exposition of the same rows, every port polled — and the load and quietness are reported."""
    import subprocess
    import sys

    bench = Path(__file__).resolve().parents[2] / "bench" / "metrics.py"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    done = subprocess.run(
        [sys.executable, str(bench), "--tiny", "--runs", "1", "--json"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["tiny"] is True and out["ports"] == 16 * 8 * 2 + 16 * 4 * 2
    assert 0 < out["gzip_bytes"] < out["bytes"]
    if "old_error" not in out:  # the baseline comes from git history (absent from a shallow clone)
        assert out["bytes"] < out["old_bytes"] and out["samples"] < out["old_samples"]
    assert out["bytes_per_port"] < out["treydock_bytes_per_port"]
    assert out["samples"] > 5 * out["ports"] and out["server_s"] > 0 and out["server_cold_s"] > 0
    load = out["load"]
    assert set(load) == {"start", "end", "peak"} and load["peak"] >= load["start"]["1m"]
    assert out["quiet"] == (load["start"]["1m"] <= 0.5 and load["peak"] <= 3.0)


def test_metrics_answer_with_the_cache_down(stored, settings, caplog):
    """Redis down (the cache of a production deployment): the trap receiver's counters (the only
    family read from the cache) are left out and the scrape answers from the database, never a
    500 — a scrape is how an outage is seen."""
    import logging

    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
        }
    }
    with caplog.at_level(logging.INFO):
        resp = Client().get("/metrics")
    assert resp.status_code == 200, resp.content[:300]
    got = samples(resp.content.decode())
    assert got[("weft_sweep_ports", (("fabric", "f1"),))] == 2
    assert not any(name.startswith("weft_snmp_traps") for name, _ in got)
    assert not [r for r in caplog.records if r.exc_info]


def test_head_answers_an_uptime_check_without_a_body(stored, settings):
    """``HEAD /metrics`` (uptime checks) is 200 with the exposition's content type and no body; an
    unknown fabric is still a 404 and another method a 405 (it used to be a 405 for HEAD too)."""
    settings.WEFT_METRICS_ALLOW = ["127.0.0.1"]
    client = Client(REMOTE_ADDR="127.0.0.1")
    head = client.head("/metrics", secure=True)
    assert head.status_code == 200 and head.content == b""
    assert head["Content-Type"].startswith("text/plain; version=0.0.4")
    assert client.head("/metrics?fabric=nope", secure=True).status_code == 404
    assert client.post("/metrics", secure=True).status_code == 405
