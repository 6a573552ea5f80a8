"""The UFM-compatible API against the lab (ibsim + the real OpenSM + infiniband-diags): PKeys a
client posts reach the ports' P_Key tables (read here with the lab's own ``smpquery pkeys``), and
isolating a switch port takes its link down in the fabric.

The PKey changes are applied as every partition change is, after the request commits
(``fabric.services.partitions.queue_apply``: the task runs at commit here, no worker runs).
ibsim has no link training: a port enabled again (``ibportstate ... enable``: Polling) stays
Polling there, so the test does what the two PHYs of a real cable would (the cable goes down and up
through ibsim's console); OpenSM then brings the link to Active.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from events.engine import process_pending_events
from events.models import Alarm, Event
from fabric.choices import NodeType
from fabric.models import Fabric, Host, Link, Port
from fabric.parsers.partitions import parse_smpquery_pkeys
from fabric.services.discovery import discover
from fabric.services.requests import set_node_name_map
from lab import netgen
from tests.support.waits import wait_for
from ufm.models import UnhealthyPort

from .conftest import basic

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]
PKEY = 0x0B17


@pytest.fixture
def lab_fabric(lab_factory, committed_signals, users):
    lab = lab_factory(netgen.fat_tree_2level(2, 1, 4))  # 8 single-HCA hosts, SM on host001
    fabric = Fabric.objects.create(
        name="ufm-lab",
        tool_env=dict(lab.tool_env),
        partitions_path=str(lab.partitions_path),
        sm_pid_file=str(lab.sm_pid_file),
    )
    discover(fabric)
    return lab, fabric


def admin() -> Client:
    return Client(HTTP_AUTHORIZATION=basic("ada", "pw-ada"))


def send(client: Client, method: str, path: str, body: dict):
    return getattr(client, method)(path, json.dumps(body), content_type="application/json")


def ca_guid(fabric: Fabric, host: str) -> str:
    return Port.objects.get(node__fabric=fabric, node__host__name=host, node__node_type=NodeType.CA).port_guid


def membership(lab, guid: str) -> str | None:
    return parse_smpquery_pkeys(lab.run(["smpquery", "pkeys", "-G", guid]).stdout).membership(PKEY)


def test_posted_guids_reach_the_ports_and_removal_takes_them_away(lab_fabric):
    lab, fabric = lab_fabric
    hosts = sorted(Host.objects.filter(fabric=fabric).values_list("name", flat=True))
    members = [ca_guid(fabric, hosts[2]), ca_guid(fabric, hosts[6])]
    others = [ca_guid(fabric, hosts[1]), ca_guid(fabric, hosts[5])]
    offset = lab.sm_log_size()
    resp = send(admin(), "post", "/ufmRest/resources/pkeys", {"pkey": f"0x{PKEY:04X}", "index0": False,
                "ip_over_ib": True, "membership": "full", "guids": [g[2:] for g in members]})  # fmt: skip
    assert resp.status_code == 200 and resp.json()["applying"] is True
    wait_for(lambda: all(membership(lab, g) == "full" for g in members), 30, "the two hosts to get the PKey")
    assert [membership(lab, g) for g in others] == [None, None]
    assert lab.partition_errors(offset) == []

    gone = send(admin(), "post", "/ufmRest/actions/remove_guids_from_pkey", {"pkey": hex(PKEY),
                "guids": [members[0][2:]]})  # fmt: skip
    assert gone.status_code == 200 and gone.json()["removed"] == 1
    wait_for(lambda: membership(lab, members[0]) is None, 30, "the removed host to lose the PKey")
    assert membership(lab, members[1]) == "full"


def test_slurm_hosts_by_name_through_the_node_name_map(lab_fabric):
    lab, fabric = lab_fabric
    # the site's names for two hosts' HCAs: "node01", "node02" (the Slurm node names)
    mapped = {"node01": ca_guid(fabric, "host003"), "node02": ca_guid(fabric, "host004")}
    nodes = {name: Port.objects.get(port_guid=guid).node.node_guid for name, guid in mapped.items()}
    set_node_name_map(fabric, text="".join(f'{guid} "{name}"\n' for name, guid in nodes.items()))
    resp = send(admin(), "post", "/ufmRest/resources/pkeys/hosts",
                {"hosts_names": "node[01-02]", "pkey": hex(PKEY), "ip_over_ib": "true", "index0": False})  # fmt: skip
    assert resp.status_code == 200 and (resp.json()["guids"], resp.json()["unknown_hosts"]) == (2, [])
    wait_for(
        lambda: all(membership(lab, g) == "full" for g in mapped.values()), 30, "node01/02 to get the PKey"
    )
    assert membership(lab, ca_guid(fabric, "host005")) is None

    assert admin().delete(f"/ufmRest/resources/pkeys/{hex(PKEY)}/hosts/node[01-02]").status_code == 200
    wait_for(
        lambda: all(membership(lab, g) is None for g in mapped.values()), 30, "node01/02 to lose the PKey"
    )


def _phys(lab, lid: int, port: int) -> str:
    out = lab.run(["smpquery", "portinfo", str(lid), str(port)]).stdout
    return next(line.split(".")[-1] for line in out.splitlines() if line.startswith("PhysLinkState"))


def _reachable(lab, guid: str) -> bool:
    return lab.run(["smpquery", "portinfo", "-G", guid], check=False).returncode == 0


def test_isolating_a_switch_port_takes_its_link_down_and_healthy_brings_it_back(lab_fabric):
    lab, fabric = lab_fabric
    host_port = Port.objects.with_link().get(node__fabric=fabric, node__host__name="host003")
    leaf_port = host_port.remote
    leaf, num = leaf_port.node, leaf_port.port_num
    name = f"{leaf.node_guid[2:]}_{num}"
    assert _phys(lab, leaf.lid, num) == "LinkUp" and _reachable(lab, host_port.port_guid)

    # the SM's own link is refused (the lab's SM runs on host001)
    sm_port = Port.objects.with_link().get(node__fabric=fabric, node__host__name="host001").remote
    refused = send(admin(), "put", "/ufmRest/app/unhealthy_ports",
                   {"ports": [f"{sm_port.node.node_guid[2:]}_{sm_port.port_num}"], "ports_policy": "UNHEALTHY"})  # fmt: skip
    assert refused.status_code == 400 and "master SM" in refused.json()["error"]

    resp = send(admin(), "put", "/ufmRest/app/unhealthy_ports",
                {"ports": [name], "ports_policy": "UNHEALTHY", "action": "isolate"})  # fmt: skip
    assert resp.status_code == 200, resp.content
    assert resp.json()["ports"] == [{"port": name, "done": True, "physical_state": "Disabled"}]
    assert _phys(lab, leaf.lid, num) == "Disabled" and not _reachable(lab, host_port.port_guid)
    assert (
        Event.objects.filter(
            fabric=fabric, code="port.isolated", object_key=f"{leaf.node_guid}/{num}"
        ).count()
        == 1
    )
    # stored through the ingest, expected: no Critical link.down for a deliberate isolation
    assert not Event.objects.filter(fabric=fabric, code="link.down").exists()
    assert not Link.objects.filter(port_a__in=[leaf_port, host_port]).exists()
    process_pending_events(fabric.pk)
    assert Alarm.objects.open().filter(code="port.isolated").count() == 1
    listed = admin().get("/ufmRest/app/unhealthy_ports").json()
    assert [(f"{u['PeerGUID']}_{u['PeerPortDname']}", u["PeerNode"], u["UnhealthyGUID"]) for u in listed] == [
        (name, leaf.name, host_port.node.node_guid[2:])
    ]
    row = next(p for p in admin().get("/ufmRest/resources/ports").json() if p["name"] == name)
    assert (row["physical_state"], row["logical_state"], row["peer_node_name"]) == ("Disabled", "Down", "")

    healthy = send(
        admin(), "put", "/ufmRest/app/unhealthy_ports", {"ports": [name], "ports_policy": "HEALTHY"}
    )
    assert healthy.status_code == 200 and healthy.json()["ports"][0]["physical_state"] == "Polling"
    assert _phys(lab, leaf.lid, num) == "Polling"  # enabled: the port polls for its peer
    assert not UnhealthyPort.objects.exists()
    process_pending_events(fabric.pk)
    assert not Alarm.objects.open().filter(code="port.isolated").exists()
    lab.unlink(leaf.description, num)  # ibsim: what link training does on a real cable
    lab.relink(leaf.description, num)
    wait_for(lambda: _reachable(lab, host_port.port_guid), 30, "host003 to be reachable again")
    assert _phys(lab, leaf.lid, num) == "LinkUp"
    discover(fabric)
    assert Link.objects.filter(port_a__in=[leaf_port, host_port], port_b__in=[leaf_port, host_port]).exists()


def test_batch_isolate_devices_isolates_a_switch_and_brings_one_port_back(lab_fabric):
    """``batch_isolate_devices.py``'s calls (``test_contract_ufm_sdk_scripts``) on a lab switch:
    every cabled port of the leaf without the SM goes down except the one the SM reaches it
    through, the job is Completed, one port put back HEALTHY polls again and leaves the list."""
    lab, fabric = lab_fabric
    leaf = fabric.nodes.get(node_type="switch", name__contains="leaf-02")  # the SM is under leaf-01
    guid = leaf.node_guid[2:]
    payload = {"params": {"action": "isolate", "device_policy": "UNHEALTHY"}, "action": "mark_device_unhealthy",
               "object_ids": [guid], "object_type": "System", "identifier": "id"}  # fmt: skip
    resp = send(admin(), "post", "/ufmRest/actions", payload)
    assert resp.status_code == 202, resp.content
    job = admin().get(f"/ufmRest/jobs/{resp['Location'].split('/')[-1]}").json()
    assert job["Status"] == "Completed", job
    assert job["Description"]["kept"] == [f"{guid}_5"]  # its uplink: the SM's path to it
    kept = f"{guid}_5"
    isolated = [p["port"] for p in job["Description"]["ports"]]
    assert isolated == [f"{guid}_{n}" for n in (1, 2, 3, 4)] and all(
        p["physical_state"] == "Disabled" for p in job["Description"]["ports"]
    )
    assert all(_phys(lab, leaf.lid, int(p.split("_")[1])) == "Disabled" for p in isolated)
    assert _phys(lab, leaf.lid, int(kept.split("_")[1])) == "LinkUp"
    listed = admin().get("/ufmRest/app/unhealthy_ports").json()
    assert sorted(f"{u['PeerGUID']}_{u['PeerPortDname']}" for u in listed) == sorted(isolated)

    back = isolated[0]
    healthy = send(
        admin(), "put", "/ufmRest/app/unhealthy_ports", {"ports": [back], "ports_policy": "HEALTHY"}
    )
    assert healthy.status_code == 200, healthy.content
    assert _phys(lab, leaf.lid, int(back.split("_")[1])) == "Polling"
    still = admin().get("/ufmRest/app/unhealthy_ports").json()
    assert sorted(f"{u['PeerGUID']}_{u['PeerPortDname']}" for u in still) == sorted(isolated[1:])

    # mark_device_healthy puts the rest back
    payload.update(action="mark_device_healthy", params={"action": "isolate", "device_policy": "HEALTHY"})
    resp = send(admin(), "post", "/ufmRest/actions", payload)
    assert resp.status_code == 202
    assert admin().get(resp["Location"]).json()["Status"] == "Completed"
    assert admin().get("/ufmRest/app/unhealthy_ports").json() == []
    assert all(_phys(lab, leaf.lid, int(p.split("_")[1])) == "Polling" for p in isolated)


@pytest.mark.integration
@pytest.mark.slow
def test_isolation_runs_on_the_sites_worker_and_a_site_without_one_is_a_503(
    lab_factory, committed_signals, users, tmp_path, settings
):
    """Issue 25 §2: ``ibportstate`` of an unhealthy port runs on a worker of the fabric's
    collector site (``fabric.tasks.port_action_task``, the port page's path), not in the web
    process; with that worker dead the API answers 503 and sends nothing."""
    import os

    from django.db import connection

    from accounts.models import AuditEntry
    from core.sites import site_states
    from fabric.models import IsolatedPort
    from tests.support.workers import CeleryWorker
    from weft.celery import app

    if connection.vendor != "postgresql" or not os.environ.get("REDIS_URL"):
        pytest.skip("a real worker: PostgreSQL and Redis")
    ttl = 2.0
    settings.WEFT_SITE_CHECK = True
    settings.WEFT_LEASE_TTL_S = ttl
    settings.CELERY_TASK_ALWAYS_EAGER = False
    eager = app.conf.task_always_eager
    app.conf.update(CELERY_TASK_ALWAYS_EAGER=False)  # publish to the broker: the worker runs the task
    lab = lab_factory(netgen.fat_tree_2level(2, 1, 4))
    fabric = Fabric.objects.create(name="ufm-site", site="ufm-a", tool_env=dict(lab.tool_env))
    discover(fabric)
    worker = CeleryWorker(tmp_path / "ufm-a.log", "fabric.ufm-a", "ufma", WEFT_LEASE_TTL_S=str(ttl))
    try:
        wait_for(lambda: site_states(["ufm-a"])["ufm-a"].up, 30, "site ufm-a live")
        host_port = Port.objects.with_link().get(node__fabric=fabric, node__host__name="host003")
        leaf, num = host_port.remote.node, host_port.remote.port_num
        name = f"{leaf.node_guid[2:]}_{num}"
        resp = send(
            admin(), "put", "/ufmRest/app/unhealthy_ports", {"ports": [name], "ports_policy": "UNHEALTHY"}
        )
        assert resp.status_code == 200, resp.content
        assert resp.json()["ports"] == [{"port": name, "done": True, "physical_state": "Disabled"}]
        assert _phys(lab, leaf.lid, num) == "Disabled"
        assert "fabric.tasks.port_action_task[" in worker.text()  # the site's worker ran ibportstate
        row = IsolatedPort.objects.get(fabric=fabric, node_guid=leaf.node_guid, port_num=num)
        assert (row.via, row.by.username) == ("ufm", "ada")
        entry = AuditEntry.objects.filter(action="port.disable").latest("pk")
        assert (entry.changes["via"], entry.changes["done"], entry.username) == ("ufm", True, "ada")
        listed = admin().get("/ufmRest/app/unhealthy_ports").json()
        assert [f"{u['PeerGUID']}_{u['PeerPortDname']}" for u in listed] == [name]

        worker.kill()  # the site's only worker dies: its heartbeat lapses
        wait_for(lambda: not site_states(["ufm-a"])["ufm-a"].up, 4 * ttl + 5, "site ufm-a down")
        audits = AuditEntry.objects.count()
        down = send(
            admin(), "put", "/ufmRest/app/unhealthy_ports", {"ports": [name], "ports_policy": "HEALTHY"}
        )
        assert down.status_code == 503 and down["Retry-After"] == "30", down.content
        body = down.json()
        assert (body["site"], body["queue"], body["up"]) == ("ufm-a", "fabric.ufm-a", False)
        assert "no live worker" in body["error"]
        assert (
            _phys(lab, leaf.lid, num) == "Disabled"
            and IsolatedPort.objects.filter(fabric=fabric).count() == 1
        )
        assert AuditEntry.objects.count() == audits  # nothing was sent, nothing written
    finally:
        app.conf.update(CELERY_TASK_ALWAYS_EAGER=eager)
        worker.kill()
        import redis

        redis.Redis.from_url(os.environ["REDIS_URL"]).delete("fabric.ufm-a")
