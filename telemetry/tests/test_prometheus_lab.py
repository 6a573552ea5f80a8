"""A real Prometheus (Debian's ``prometheus`` 2.42, loopback) scrapes Weft's ``/metrics`` of a lab
fabric: the target is up, ``rate()`` of a driven port counter is positive, every query of the
Grafana dashboard (grafana/weft-fabric.json) is valid and those fed by the lab answer with data;
``promtool check metrics`` finds nothing wrong with a scrape (issue 23 §1).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from fabric.models import Fabric
from fabric.services.discovery import discover
from telemetry.models import PortCounters
from telemetry.services.sweep import poll_fabric
from tests.support.waits import wait_for

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

GRAFANA = Path(__file__).resolve().parents[2] / "grafana" / "weft-fabric.json"
#: Dashboard panels a lab with driven traffic, congestion and symbol errors must fill (the others,
#: increases of error counters the lab does not move, only have to be valid queries).
EMPTY_ALLOWED = ("link_error_recovery", "link_downed", "rcv_errors", "xmit_discards")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _query(base: str, expr: str) -> list:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = json.load(resp)
    except urllib.error.HTTPError as exc:  # 400/422: a bad query, the answer says why
        body = json.load(exc)
    assert body["status"] == "success", (expr, body)
    return body["data"]["result"]


def _value(base: str, expr: str) -> float | None:
    result = _query(base, expr)
    return float(result[0]["value"][1]) if result else None


@pytest.mark.skipif(not shutil.which("prometheus"), reason="apt-get install prometheus")
def test_prometheus_scrapes_weft_and_the_dashboard_queries_answer(small_lab, live_server, tmp_path):
    fabric = Fabric.objects.create(name="lab", tool_env=small_lab.tool_env)
    discover(fabric)
    small_lab.perf_set("Hca1", 1, "SymbolErrorCounter", 5)
    poll_fabric(fabric)

    with urllib.request.urlopen(f"{live_server.url}/metrics", timeout=30) as resp:
        scrape = resp.read()
    check = subprocess.run(["promtool", "check", "metrics"], input=scrape, capture_output=True, timeout=60)
    assert (check.returncode, check.stdout, check.stderr) == (0, b"", b"")
    assert b"weft_port_info{" in scrape and b'weft_port_symbol_errors_total{fabric="lab"' in scrape

    port = _free_port()
    target = urllib.parse.urlsplit(live_server.url).netloc
    config = tmp_path / "prometheus.yml"
    # Defaults but the interval: scrape_timeout is left out (Prometheus' default, 10 s, capped at
    # the interval), and so are honor_labels, metrics_path (/metrics) and the scheme (http).
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"scrape_configs:\n  - job_name: weft\n    static_configs:\n      - targets: ['{target}']\n"
    )
    log = (tmp_path / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:

        def ready():
            try:
                return _value(base, 'up{job="weft"}') == 1.0
            except OSError:
                return False

        wait_for(ready, 60, "Prometheus up and its first scrape of Weft (up == 1)", interval=0.5)
        pc = PortCounters.objects.get(port__node__description="Switch1", port__port_num=3)
        series = f'weft_port_xmit_bytes_total{{fabric="lab",guid="{pc.port.node.node_guid}",port="3"}}'
        first = wait_for(lambda: _value(base, series), 30, "the first counter value in Prometheus")

        # traffic, congestion and more symbol errors, read by a sweep and scraped
        small_lab.perf_set("Switch1", 3, "PortCountersExtended.PortXmitData", pc.xmit_data + 2_000_000_000)
        small_lab.perf_set("Switch1", 3, "PortXmitWait", pc.xmit_wait + 300_000)
        small_lab.perf_set("Hca1", 1, "SymbolErrorCounter", 9)
        poll_fabric(fabric)
        wait_for(lambda: (_value(base, series) or 0) > first + 7e9, 30, "the driven counter scraped")
        assert _value(base, 'up{job="weft"}') == 1.0
        assert _value(base, f"rate({series}[20s])") > 0
        assert _value(base, 'sum(rate(weft_port_xmit_bytes_total{fabric="lab"}[20s]))') > 0

        dash = json.loads(GRAFANA.read_text())
        checked = 0
        for panel in dash["panels"]:
            for t in panel.get("targets", []):
                expr = (
                    t["expr"]
                    .replace("$fabric", "lab")
                    .replace("$topn", "10")
                    .replace("$__rate_interval", "20s")
                )
                result = _query(base, expr)  # asserts the query is valid
                checked += 1
                if not any(name in expr for name in EMPTY_ALLOWED):
                    assert result, f"{panel['title']}: no data for {expr}"
                if "group_left (node_desc" in expr and result:
                    assert all(r["metric"].get("node_desc") for r in result), expr
        assert checked == sum(len(p.get("targets", [])) for p in dash["panels"]) >= 19
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()
