"""The fabric admin (README: set a fabric's ``local_hca``/``ca_name`` "(REST API or admin)"): audited
fabric writes with the API's validation, a first discovery queued for a new live fabric, and
read-only, searchable topology listings."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import AuditEntry
from fabric.models import Fabric, Link, Node, Port
from fabric.services.ingest import import_topology_text
from tests.support.topologies import BASE

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(django_user_model) -> Client:
    user = django_user_model.objects.create_superuser("root", "root@example.org", "pw")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def queued(monkeypatch) -> list:
    from fabric import tasks

    out: list = []
    monkeypatch.setattr(tasks.discover_fabric_task, "apply_async", lambda args, task_id: out.append(args))
    return out


FORM = {
    "name": "hall-b",
    "description": "",
    "subnet_prefix": "",
    "ca_name": "",
    "ca_port": "",
    "tool_env": "{}",
    "discovery_timeout_s": "300",
    "discovery_enabled": "on",
    "polling_enabled": "on",
    "site": "default",  # the admin form's initial value (core.sites.DEFAULT_SITE)
    "switch_info_tool": "",
    "cable_info_tool": "",
}


def test_add_and_change_a_fabric_audited_with_its_first_discovery(
    admin_client, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        resp = admin_client.post("/admin/fabric/fabric/add/", FORM)
    assert resp.status_code == 302, resp.content.decode()[:2000]
    fabric = Fabric.objects.get(name="hall-b")
    assert queued == []  # no live access yet: nothing to discover
    entry = AuditEntry.objects.get(action="fabric.create")
    assert (
        entry.username == "root" and entry.object_id == str(fabric.pk) and entry.changes["name"] == "hall-b"
    )
    with django_capture_on_commit_callbacks(execute=True):
        resp = admin_client.post(
            f"/admin/fabric/fabric/{fabric.pk}/change/", {**FORM, "ca_name": "mlx5_0", "ca_port": "1"}
        )
    assert resp.status_code == 302
    fabric.refresh_from_db()
    assert (fabric.ca_name, fabric.ca_port) == ("mlx5_0", 1)
    update = AuditEntry.objects.get(action="fabric.update")
    assert update.changes == {"ca_name": ["", "mlx5_0"], "ca_port": [None, 1]}
    assert queued == [(fabric.pk,)]  # it has live access now: discovered at once, audited
    assert AuditEntry.objects.filter(action="fabric.discover", object_id=str(fabric.pk)).count() == 1


def test_the_admin_refuses_what_the_api_refuses(admin_client, queued):
    bad_env = {**FORM, "tool_env": '{"LD_PRELOAD": "/tmp/evil.so"}'}
    resp = admin_client.post("/admin/fabric/fabric/add/", bad_env)
    assert resp.status_code == 200 and "LD_PRELOAD" in resp.content.decode()
    assert (
        not Fabric.objects.exists() and not AuditEntry.objects.filter(action__startswith="fabric.").exists()
    )


def test_delete_a_fabric_audited(admin_client):
    fabric = import_topology_text("f", BASE, filename="base.topo").fabric
    resp = admin_client.post(f"/admin/fabric/fabric/{fabric.pk}/delete/", {"post": "yes"})
    assert resp.status_code == 302
    assert not Fabric.objects.exists() and not Node.objects.exists()
    assert AuditEntry.objects.filter(action="fabric.delete", object_id=str(fabric.pk)).count() == 1


def test_topology_is_listed_searchable_and_read_only(admin_client):
    fabric = import_topology_text("f", BASE, filename="base.topo").fabric
    node = Node.objects.filter(fabric=fabric).exclude(description="").first()
    port = Port.objects.filter(node=node).first()
    for url, term, expected in [
        ("/admin/fabric/node/", node.node_guid, node.description),
        ("/admin/fabric/node/", node.description, node.node_guid),
        ("/admin/fabric/port/", node.node_guid, str(port)),
        (
            "/admin/fabric/link/",
            node.description,
            str(Link.objects.filter(fabric=fabric).first().port_a.node),
        ),
        ("/admin/fabric/discovery/", "base.topo", "base.topo"),
    ]:
        resp = admin_client.get(url, {"q": term})
        assert resp.status_code == 200, url
        html = resp.content.decode()
        assert expected in html, (url, term)
        assert 'value="delete_selected"' not in html  # no bulk delete of topology rows
    assert admin_client.get("/admin/fabric/node/add/").status_code == 403
    assert admin_client.post(f"/admin/fabric/node/{node.pk}/delete/", {"post": "yes"}).status_code == 403
    assert admin_client.post(f"/admin/fabric/port/{port.pk}/change/", {}).status_code == 403
    assert Node.objects.filter(pk=node.pk).exists()
