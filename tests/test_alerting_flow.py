"""Issue 26 §2 in the running system: ``manage.py serve`` (its notice listeners, worker and beat)
against a lab, an Alertmanager target added through the REST API, a cable pulled on the ibsim
console: Debian's ``prometheus-alertmanager`` holds a firing ``link.down`` alert with Weft's
labels; the cable put back resolves it."""

from __future__ import annotations

import json
import time

import pytest

from tests.support.receivers import ALERTMANAGER, alertmanager, alertmanager_alerts
from tests.support.server_api import admin_token, api, call
from tests.support.waits import wait_for

pytestmark = [
    pytest.mark.lab,
    pytest.mark.slow,
    pytest.mark.skipif(ALERTMANAGER is None, reason="prometheus-alertmanager is not installed (bin/setup)"),
]


def test_a_pulled_cable_fires_in_alertmanager_and_the_replug_resolves_it(lab_factory, weft_server_factory):
    from lab.pytest_plugin import small_netfile

    lab = lab_factory(small_netfile())
    with alertmanager() as am:
        server = weft_server_factory(WEFT_NOTICE_RESCAN_S="1")
        token = admin_token(server)
        code = (
            "import json; from fabric.models import Fabric; "
            f"Fabric.objects.create(name='lab', tool_env=json.loads({json.dumps(json.dumps(lab.tool_env))}))"
        )
        server.manage("shell", "-c", code)
        server.manage("discover", "--fabric", "lab")
        (fabric,) = call(server, token, "/api/fabric/fabrics/?name=lab")["results"]
        target = api(server, token, "POST", "/api/fabric/alert-targets/",
                     {"name": "oncall-am", "kind": "alertmanager", "url": am, "min_severity": "warning"})  # fmt: skip
        assert (
            call(server, token, f"/api/fabric/alert-targets/{target['id']}/test/", {})["response_code"] == 200
        )
        wait_for(
            lambda: (call(server, token, f"/api/fabric/fabrics/{fabric['id']}/")["notices"] or {}).get("state")
            == "subscribed",
            60, "the server's listener to subscribe to the SM's notices", interval=0.5,
        )  # fmt: skip
        g1, g2 = lab.guid_of("Switch1"), lab.guid_of("Switch2")
        key = f"{min(g1, g2)}/3-{max(g1, g2)}/3"

        def firing():
            return [a for a in alertmanager_alerts(am) if a["labels"].get("object") == key]

        t0 = time.monotonic()
        lab.unlink("Switch1", 3)
        (alert,) = wait_for(firing, 30, "the link.down alert in Alertmanager", interval=0.2)
        latency = time.monotonic() - t0
        (alarm,) = [
            a for a in call(server, token, f"/api/fabric/alarms/?code=link.down&open=true&fabric={fabric['id']}")[
                "results"] if a["object_key"] == key
        ]  # fmt: skip
        labels = alert["labels"]
        assert (labels["alertname"], labels["fabric"], labels["severity"], labels["source"]) == (
            "link.down", "lab", "critical", "weft")  # fmt: skip
        # node and port: the lower end of the pulled cable (Switch1 or Switch2 port 3), peer the other
        names = {lab.guid_of("Switch1"): "Switch1", lab.guid_of("Switch2"): "Switch2"}
        ends = {(labels["node"], labels["port"]), (labels["peer_node"], labels["peer_port"])}
        assert {(n.split()[0], p) for n, p in ends} == {("Switch1", "3"), ("Switch2", "3")}, labels
        assert labels["node"].split()[0] == names[min(g1, g2)]
        assert alert["status"]["state"] == "active"
        assert alert["generatorURL"].endswith(f"/alarms/{alarm['id']}/")
        log = call(server, token, f"/api/fabric/alert-targets/{target['id']}/deliveries/")
        assert any(d["event"] == "alarm.raised" and d["status"] == "delivered" for d in log)
        lab.relink("Switch1", 3)
        wait_for(lambda: not firing(), 30, "the alert resolved in Alertmanager", interval=0.2)
        log = call(server, token, f"/api/fabric/alert-targets/{target['id']}/deliveries/")
        assert any(d["event"] == "alarm.cleared" and d["status"] == "delivered" for d in log)
        print(f"serve: link.down firing in Alertmanager {latency:.3f} s after Unlink")
