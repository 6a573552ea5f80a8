"""The whole flow of issue 10 against a real server: ``manage.py serve`` (its in-process notice
listeners, worker and beat) pointed at a running lab; a cable pulled on the ibsim console shows
up as a Critical alarm through the REST API within seconds, and ``manage.py alarms --active``
names the link; putting it back clears it."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from tests.support.waits import wait_for

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def _get(server, token: str, path: str) -> dict:
    req = urllib.request.Request(f"{server.url}{path}", headers={"Authorization": f"Token {token}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def test_serve_alarms_on_a_pulled_cable_within_seconds(lab_factory, weft_server_factory):
    from django.conf import settings

    from lab.pytest_plugin import small_netfile

    lab = lab_factory(small_netfile())
    # rescan every second so the listener starts right after the fabric exists
    server = weft_server_factory(WEFT_NOTICE_RESCAN_S="1")
    code = (
        "import json; from fabric.models import Fabric; from accounts.tokens import create_token; "
        "from django.contrib.auth import get_user_model; "
        f"Fabric.objects.create(name='lab', tool_env=json.loads({json.dumps(json.dumps(lab.tool_env))})); "
        "print(create_token(get_user_model().objects.get(username='viewer'), 'flow test').key)"
    )
    token = server.manage("shell", "-c", code).stdout.strip().splitlines()[-1]
    server.manage("discover", "--fabric", "lab")
    (fabric,) = _get(server, token, "/api/fabric/fabrics/?name=lab")["results"]
    wait_for(
        lambda: (_get(server, token, f"/api/fabric/fabrics/{fabric['id']}/")["notices"] or {}).get("state")
        == "subscribed",
        60,
        "the server's listener to subscribe to the SM's notices",
        interval=0.5,
    )
    g1, g2 = lab.guid_of("Switch1"), lab.guid_of("Switch2")
    key = f"{min(g1, g2)}/3-{max(g1, g2)}/3"

    def alarm(open_: str):
        rows = _get(server, token, f"/api/fabric/alarms/?code=link.down&open={open_}&fabric={fabric['id']}")
        return next((a for a in rows["results"] if a["object_key"] == key), None)

    t0 = time.monotonic()
    lab.unlink("Switch1", 3)
    found = wait_for(lambda: alarm("true"), settings.WEFT_POLL_INTERVAL_S + 2, "the link.down alarm via the API",
                     interval=0.1)  # fmt: skip
    latency = time.monotonic() - t0
    assert found["severity"] == "critical"
    active = json.loads(server.manage("alarms", "--active").stdout.strip().splitlines()[-1])
    (row,) = [a for a in active if a["type"] == "link.down"]
    assert row["object_key"] == key and "Switch1" in row["object"] and "Switch2" in row["object"]
    lab.relink("Switch1", 3)
    wait_for(
        lambda: alarm("false"),
        settings.WEFT_POLL_INTERVAL_S + 2,
        "the alarm cleared via the API",
        interval=0.1,
    )
    status = _get(server, token, f"/api/fabric/fabrics/{fabric['id']}/")["notices"]
    # the unplug and the replug were each read from the switch: after a notice, or after the hint
    # that one was lost (the cable on the SM's route to the listener takes its Report with it)
    assert status["state"] == "subscribed" and status["notices"] >= 1
    assert status["refreshes"] + status["fallback_reads"] >= 2
    print(f"serve: link.down alarm in the API {latency:.3f} s after Unlink")
