"""``/api/pools/``: GPU reads with filters, and host reports on ``agent/`` (roles, located 400s,
host by HCA GUIDs). The generic permission/list/brief/filter tests are in tests/test_api_viewsets.py."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from accounts.models import AuditEntry
from accounts.tokens import create_token
from fabric.models import Node
from pools.api.permissions import AGENT_GROUP
from pools.models import Gpu, HostInventory
from tests.support.agent_reports import XML, body


def test_operator_reports_viewer_reads(base_fabric, client_for):
    r = client_for("viewer").post("/api/pools/agent/", body(), format="json")
    assert r.status_code == 403 and Gpu.objects.count() == 0
    r = client_for("operator").post("/api/pools/agent/", body(), format="json")
    assert r.status_code == 200, r.content
    b = r.json()
    assert (b["host"], b["gpus"], b["mig_slices"], b["added"]) == ("host001", 2, 0, 2)
    assert [w["where"] for w in b["warnings"]] == ["gpu[1]/fb_memory_usage/used"]
    viewer = client_for("viewer")
    gpus = viewer.get("/api/pools/gpus/", {"host_name": "host001"}).json()["results"]
    assert [(g["index"], g["rail_device"], g["rail"]["description"], g["health"]) for g in gpus] == [
        (0, "mlx5_0", "host001 mlx5_0", "healthy"), (1, "mlx5_1", "host001 mlx5_1", "unhealthy")]  # fmt: skip
    assert viewer.get("/api/pools/gpus/", {"health": "unhealthy"}).json()["count"] == 1
    assert (
        viewer.get("/api/pools/gpus/", {"uuid": "GPU-aaa", "brief": 1}).json()["results"][0]["uuid"]
        == "GPU-aaa"
    )
    hosts = viewer.get("/api/pools/hosts/").json()["results"]
    assert [(h["host"]["name"], h["report_source"], len(h["gpus"])) for h in hosts] == [
        ("host001", "agent", 2)
    ]
    entry = AuditEntry.objects.get(action="gpu.inventory")
    assert entry.username == "olga" and entry.changes["gpus"] == 2
    assert APIClient().get("/api/pools/gpus/").status_code == 401


def test_host_agent_group_token(base_fabric, users):
    agent_user = users["viewer"]
    agent_user.groups.add(Group.objects.get_or_create(name=AGENT_GROUP)[0])
    key = create_token(agent_user, "agent", actor=agent_user).key
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    r = client.post("/api/pools/agent/", body(), format="json")
    assert r.status_code == 200 and r.json()["gpus"] == 2
    client.credentials(HTTP_AUTHORIZATION="Token nope")
    assert client.post("/api/pools/agent/", body(), format="json").status_code == 401


def test_host_found_by_hca_guid_whatever_its_name(base_fabric, operator):
    guid = Node.objects.get(description="host002 mlx5_0").node_guid
    hcas = [{"name": "mlx5_0", "node_guid": guid, "ports": [{"port_num": 1, "link_layer": "InfiniBand"}]}]
    r = operator.post("/api/pools/agent/", body(host="node-17.example.org", hcas=hcas), format="json")
    assert r.status_code == 200 and r.json()["host"] == "host002"
    assert HostInventory.objects.get().hcas[0]["ports"][0]["link_layer"] == "InfiniBand"


def test_bad_reports_are_located_and_store_nothing(base_fabric, operator):
    r = operator.post("/api/pools/agent/", body(nvidia_smi_xml=XML.replace("</gpu>\n</nvidia", "</gpux>\n</nvidia")),
                      format="json")  # fmt: skip
    assert r.status_code == 400
    assert (r.json()["field"], r.json()["line"]) == ("nvidia_smi_xml", 9)
    r = operator.post("/api/pools/agent/", body(topo="\tGPU0\tmlx5_0\nGPU0\t X \tBAD\n"), format="json")
    assert r.status_code == 400 and (r.json()["field"], r.json()["line"], r.json()["element"]) == (
        "topo",
        2,
        "GPU0",
    )
    r = operator.post("/api/pools/agent/", body(host="ghost"), format="json")
    assert r.status_code == 404 and "no host 'ghost'" in r.json()["detail"]
    r = operator.post("/api/pools/agent/", {"host": "host001"}, format="json")
    assert r.status_code == 400 and "nvidia_smi_xml" in r.json()
    assert Gpu.objects.count() == 0 and HostInventory.objects.count() == 0


@pytest.mark.parametrize("path", ["/api/pools/gpus/", "/api/pools/mig-slices/", "/api/pools/hosts/"])
def test_reads_are_viewer_and_writes_are_refused(base_fabric, viewer, admin, path):
    assert viewer.get(path).status_code == 200
    assert admin.post(path, {}, format="json").status_code == 405
