"""A job knows when its fabric fails, in the running system (issue 24 §3): ``manage.py serve`` (its
notice listener, in-process worker and beat) against a small rail pod in the lab. An HCA cable of
a running job's host pulled on the ibsim console makes the job ``degraded`` through the API within
a bounded wait (the notice → ``link.down`` → the alarm engine's commit → the fault evaluation),
with the host and rail; putting it back makes it ``running`` again. A job with
``on_fault=requeue`` goes back to pending and its GPUs on that host are free; the tenant's
contact gets mail (the console backend's lines in the server log)."""

from __future__ import annotations

import json
import time

import pytest

from lab import netgen
from lab.faults import FaultInjector
from tests.support.server_api import call as _call
from tests.support.waits import wait_for

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def test_a_pulled_hca_cable_degrades_the_running_job_and_requeues_per_policy(
    lab_factory, weft_server_factory
):
    lab = lab_factory(netgen.rail_pod(hosts=4, rails=2), timeout=120)
    sm_desc = next(n.description for n in lab.net.nodes if n.node_id == lab.tool_env["SIM_HOST"])
    server = weft_server_factory(WEFT_NOTICE_RESCAN_S="1")
    code = (
        "import json; from fabric.models import Fabric; from accounts.tokens import create_token; "
        "from django.contrib.auth import get_user_model; from pools.models import Pool, Tenant; "
        "from fabric.services.discovery import discover; from pools.lab import seed_lab_gpus; "
        f"f = Fabric.objects.create(name='lab', tool_env=json.loads({json.dumps(json.dumps(lab.tool_env))})); "
        "discover(f); seed_lab_gpus(f, 8); "
        "t = Tenant.objects.create(name='t-lab', contacts=['owner@tenant.example']); "
        "p = Pool.objects.create(name='p-lab', tenant=t, fabric=f); "
        "print(json.dumps({'pool': p.pk, 'fabric': f.pk, "
        "'token': create_token(get_user_model().objects.get(username='admin'), 'faults').key}))"
    )
    ids = json.loads(server.manage("shell", "-c", code).stdout.strip().splitlines()[-1])
    token = ids["token"]
    wait_for(
        lambda: (_call(server, token, f"/api/fabric/fabrics/{ids['fabric']}/")["notices"] or {}).get("state")
        == "subscribed",
        60, "the server's listener to subscribe to the SM's notices", interval=0.5,
    )  # fmt: skip

    def running(name: str, **kw) -> dict:
        job = _call(server, token, "/api/scheduler/jobs/",
                    {"name": name, "pool": ids["pool"], "count": 8, "gpus_per_host": 8, **kw})  # fmt: skip
        wait_for(lambda: _call(server, token, f"/api/scheduler/jobs/{job['id']}/")["state"] == "placed", 30,
                 f"{name} placed by the pass its submit queued", interval=0.2)  # fmt: skip
        _call(server, token, f"/api/scheduler/jobs/{job['id']}/start/", {})
        return _call(server, token, f"/api/scheduler/jobs/{job['id']}/")

    def cable(job: dict) -> str:
        (host,) = job["placement"]
        hca = f"{host} mlx5_1"
        return hca if hca != sm_desc else f"{host} mlx5_0"  # never the SM's own port

    job = running("notify-job")
    (host,) = job["placement"]
    hca = cable(job)
    t0 = time.monotonic()
    lab.unlink(hca, 1)
    got = wait_for(lambda: (j := _call(server, token, f"/api/scheduler/jobs/{job['id']}/"))["state"] == "degraded" and j,
                   20, "the job degraded via the API", interval=0.1)  # fmt: skip
    latency = time.monotonic() - t0
    codes = {(f["code"], f["host"]) for f in got["faults"]}
    assert ("hca_link_down", host) in codes, got["faults"]
    hca_fault = next(f for f in got["faults"] if f["code"] == "hca_link_down")
    # the rail as the fabric names the pulled HCA ("host003 mlx5_1" is rail 1: faults.rails)
    rail = int(hca.rsplit("_", 1)[1])
    assert hca_fault["details"]["rail"] == rail and hca_fault["details"]["hca"].startswith(host)
    assert (
        hca_fault["details"]["hca"].endswith(f"mlx5_{rail}")
        and f"HCA link of rail {rail} down" in got["reason"]
    )
    assert got["allocation"] is not None and got["placement"] == {host: 8}  # it keeps running there
    lab.relink(hca, 1)
    wait_for(lambda: _call(server, token, f"/api/scheduler/jobs/{job['id']}/")["state"] == "running", 30,
             "the job running again once the cable is back", interval=0.2)  # fmt: skip
    assert _call(server, token, f"/api/scheduler/jobs/{job['id']}/")["faults"] == []
    _call(server, token, f"/api/scheduler/jobs/{job['id']}/finish/", {"ok": True})

    req = running("requeue-job", on_fault="requeue")
    (rhost,) = req["placement"]
    # the demo's fault injector pulls it (kind "hca": a cable of a host running a job)
    injector = FaultInjector(lab, 3600, flap_s=3600, hca_targets=lambda: [(cable(req), 1)], hca_share=1.0)
    fault = injector.inject_once()
    assert (fault.kind, fault.node) == ("hca", cable(req))

    def requeued():
        j = _call(server, token, f"/api/scheduler/jobs/{req['id']}/")
        return j["preemptions"] == 1 and rhost not in (j["placement"] or {}) and j

    after = wait_for(requeued, 20, "the requeue job back to pending off its host", interval=0.1)
    assert after["state"] in ("pending", "placed") and after["submitted_at"] == req["submitted_at"]
    gpus = _call(server, token, f"/api/pools/gpus/?host_name={rhost}&limit=50")["results"]
    assert len(gpus) == 8 and {g["state"] for g in gpus} == {"free"}
    wait_for(lambda: "owner@tenant.example" in server.log() and "Job requeued" in server.log(), 75,
             "the tenant's requeue mail on the console", interval=0.5)  # fmt: skip
    injector.stop()
    print(f"serve: job degraded in the API {latency:.3f} s after Unlink of {hca}")
