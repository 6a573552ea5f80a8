"""Contract: the UFM SDK's operational scripts (``Mellanox/ufm_sdk_3.0`` ``scripts/``), their exact
calls replayed against Weft (the PKey script and the REST client are ``test_contract_ufm_sdk``).

* ``scripts/ufm_events/ufm_events.py``: ``--get_events`` is ``GET app/events`` (200, a list);
  ``--delete_event N`` is ``DELETE app/events/N`` with ``json={}`` (``utils/ufm_rest_client.py``),
  and only 200 counts as removed.
* ``scripts/ufm_ports/load_ports.py``: ``GET resources/ports?active=<A>&show_disabled=<D>`` with
  Python's ``str(bool)`` (``True``/``False``, capitalised), default ``active=True``,
  ``show_disabled=False``; ``--system G`` adds ``&system=G``. UFM's ``active=false`` is no filter.
* ``scripts/batch_isolate_devices/batch_isolate_devices.py``: ``POST /ufmRest/actions``
  ``{"params": {"action": "isolate", "device_policy": "UNHEALTHY"}, "action":
  "mark_device_unhealthy", "object_ids": [switch GUIDs], "object_type": "System", "identifier":
  "id"}`` needs 202 and a ``Location`` whose last ``/`` part is the job id; ``GET
  /ufmRest/jobs/<id>`` until ``["Status"] == "Completed"``; ``PUT /ufmRest/app/unhealthy_ports``
  ``{"ports": ["<switch guid>_<port>"], "ports_policy": "HEALTHY"}`` needs 200; ``GET
  app/unhealthy_ports`` is read as a list of objects with ``PeerGUID`` and ``PeerPortDname``.
  (The lab half, real ports going down and up, is ``test_lab``.)
* The "UFM integration" group exists after ``migrate`` (service accounts are added to it).
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from accounts.models import AuditEntry
from events.models import Event
from events.services import EventSpec, record_events
from fabric.models import Node, Port
from ufm.auth import INTEGRATION_GROUP
from ufm.models import UfmJob, UnhealthyPort

from .conftest import basic

pytestmark = pytest.mark.django_db


def sdk(user: str = "ada") -> Client:
    return Client(HTTP_AUTHORIZATION=basic(user, f"pw-{user}"), HTTP_USER_AGENT="python-requests/2.32.3")


def send(client: Client, method: str, path: str, payload: dict):
    return getattr(client, method)(path, json.dumps(payload), content_type="application/json")


def isolate_payload(guids: list[str]) -> dict:
    return {
        "params": {"action": "isolate", "device_policy": "UNHEALTHY"},
        "action": "mark_device_unhealthy",
        "object_ids": guids,
        "object_type": "System",
        "identifier": "id",
    }


def test_the_integration_group_exists_after_migrate(db):
    """``migrate`` creates the group (ufm 0003); its function is run here, as a transactional test may
    have flushed the test database's migrated rows."""
    import importlib

    from django.apps import apps

    Group.objects.filter(name=INTEGRATION_GROUP).delete()
    migration = importlib.import_module("ufm.migrations.0003_integration_group")
    assert migration.GROUP == INTEGRATION_GROUP
    migration.create_group(apps, None)
    migration.create_group(apps, None)
    assert Group.objects.filter(name=INTEGRATION_GROUP).count() == 1


def test_ufm_events_get_and_delete_event(fat_tree, users):
    record_events(fat_tree, [EventSpec(code="link.down", message="cable pulled", object_type="port",
                                       object_key="0x1/1", object_repr="leaf-01 1")])  # fmt: skip
    event = Event.objects.get(fabric=fat_tree, code="link.down")
    listed = sdk().get("/ufmRest/app/events").json()
    assert event.pk in [e["id"] for e in listed]

    # not evaluated by the alarm engine yet: refused, kept
    assert send(sdk(), "delete", f"/ufmRest/app/events/{event.pk}", {}).status_code == 409
    Event.objects.filter(pk=event.pk).update(evaluated=True)
    assert send(sdk("vic"), "delete", f"/ufmRest/app/events/{event.pk}", {}).status_code == 403
    gone = send(sdk(), "delete", f"/ufmRest/app/events/{event.pk}", {})
    assert gone.status_code == 200 and gone.json() == {"id": event.pk, "code": "link.down"}
    assert not Event.objects.filter(pk=event.pk).exists()
    assert AuditEntry.objects.filter(action="event.delete", changes__code="link.down").count() == 1
    assert event.pk not in [e["id"] for e in sdk().get("/ufmRest/app/events").json()]
    again = send(sdk(), "delete", f"/ufmRest/app/events/{event.pk}", {})
    assert again.status_code == 404 and "is not found" in again.json()["error"]


def test_load_ports_active_false_is_every_port(fat_tree, users):
    every = sdk().get("/ufmRest/resources/ports").json()
    Port.objects.update(state=4)  # Active
    Port.objects.filter(node__host__name="host001").update(state=1)  # Down
    default = sdk().get("/ufmRest/resources/ports?active=True&show_disabled=False").json()
    all_ports = sdk().get("/ufmRest/resources/ports?active=False&show_disabled=False").json()
    assert len(all_ports) == len(every) == len(default) + 1
    switch = Node.objects.filter(node_type="switch").order_by("name").first()
    one = sdk().get(f"/ufmRest/resources/ports?active=False&show_disabled=True&system={switch.node_guid[2:]}")
    assert {p["system_name"] for p in one.json()} == {switch.name}
    bad = sdk().get("/ufmRest/resources/ports?active=False&show_disabled=maybe")
    assert bad.status_code == 400 and bad.json()["field"] == "show_disabled"


def test_batch_isolate_devices_refusals_and_a_job_with_errors(fat_tree, users):
    leaf = Node.objects.get(name__contains="leaf-01")
    host = Port.objects.get(node__host__name="host001")
    cases = [
        ({**isolate_payload([leaf.node_guid[2:]]), "action": "reboot"}, "action"),
        ({**isolate_payload([leaf.node_guid[2:]]), "object_type": "Port"}, "object_type"),
        ({**isolate_payload([]), "object_ids": []}, "object_ids"),
        ({**isolate_payload(["zz"])}, "object_ids"),
        ({**isolate_payload([leaf.node_guid[2:]]), "params": {"action": "no_discover"}}, "params.action"),
        (
            {**isolate_payload([leaf.node_guid[2:]]), "params": {"device_policy": "HEALTHY"}},
            "params.device_policy",
        ),
        (isolate_payload([host.node.node_guid[2:]]), "object_ids"),
        (isolate_payload(["0123456789abcdef"]), "object_ids"),
    ]
    for payload, field in cases:
        resp = send(sdk(), "post", "/ufmRest/actions", payload)
        assert resp.status_code == 400 and resp.json()["field"] == field, (payload, resp.content)
    assert (
        send(sdk("vic"), "post", "/ufmRest/actions", isolate_payload([leaf.node_guid[2:]])).status_code == 403
    )
    assert not UfmJob.objects.exists()

    # the SM on host001: leaf-01's port to it is kept; a stored fabric has no LIDs, so every other
    # port fails in ibportstate: the job completes with errors and says so, nothing is marked
    fat_tree.master_sm_guid = host.port_guid
    fat_tree.save()
    resp = send(sdk(), "post", "/ufmRest/actions", isolate_payload([leaf.node_guid[2:]]))
    assert resp.status_code == 202
    job_id = resp["Location"].split("/")[-1]
    assert resp["Location"] == f"/ufmRest/jobs/{job_id}"
    job = sdk().get(f"/ufmRest/jobs/{job_id}").json()
    assert job["Status"] == "Completed With Errors" and job["Operation"] == "mark_device_unhealthy"
    linked = Port.objects.with_link().filter(node=leaf, port_num__gt=0)
    kept = f"{leaf.node_guid[2:]}_{host.remote.port_num}"
    assert job["Description"]["kept"] == [kept]
    assert sorted(p["port"] for p in job["Description"]["ports"]) == sorted(
        f"{leaf.node_guid[2:]}_{p.port_num}" for p in linked if p.remote and p.remote.pk != host.pk
    )
    assert not any(p["done"] for p in job["Description"]["ports"])
    assert not UnhealthyPort.objects.exists() and sdk().get("/ufmRest/app/unhealthy_ports").json() == []
    assert sdk().get("/ufmRest/jobs/999999").status_code == 404


def test_unhealthy_ports_are_ufms_objects(fat_tree, users):
    leaf = Node.objects.get(name__contains="leaf-02")
    host = Port.objects.get(node__host__name="host003")
    UnhealthyPort.objects.create(fabric=fat_tree, node_guid=leaf.node_guid, port_num=host.remote.port_num,
                                 node_name=leaf.name, peer=f"{host.node.name} 1", peer_guid=host.node.node_guid,
                                 peer_port_num=1)  # fmt: skip
    [row] = sdk().get("/ufmRest/app/unhealthy_ports").json()
    assert (row["PeerGUID"], row["PeerPortDname"], row["PeerNode"]) == (
        leaf.node_guid[2:],
        str(host.remote.port_num),
        leaf.name,
    )
    assert (row["UnhealthyGUID"], row["UnhealthyPortNumber"], row["UnhealthyNode"]) == (
        host.node.node_guid[2:],
        1,
        host.node.name,
    )
    assert row["Condition"] == "MANUAL" and len(row["StatusTime"].split()) == 5


def test_load_devices_and_load_links(fat_tree, users):
    """``scripts/ufm_devices/load_devices.py``: ``GET resources/systems[/<system>][?type=T]``;
    ``scripts/ufm_links/load_links.py``: ``GET resources/links?cable_info=False&
    monitoring_counters_info=False`` (both need 200 and JSON)."""
    leaf = Node.objects.get(name__contains="leaf-03")
    [one] = sdk().get(f"/ufmRest/resources/systems/{leaf.node_guid[2:]}").json()
    assert (one["name"], one["type"], len(one["ports"])) == (leaf.name, "switch", 4)
    assert sdk().get("/ufmRest/resources/systems/0123456789abcdef").status_code == 404
    hosts = sdk().get("/ufmRest/resources/systems?type=host").json()
    assert sorted(h["name"] for h in hosts) == [f"host00{i}" for i in range(1, 7)]
    links = sdk().get("/ufmRest/resources/links?cable_info=False&monitoring_counters_info=False")
    assert links.status_code == 200 and len(links.json()) == 12
