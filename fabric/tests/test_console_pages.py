"""Issue 14's fabric pages: an imported fabric reads as an imported snapshot (neutral wording,
disabled controls), the subnet-manager page (master/standby, failover history), the port page
names its node, and a first discovery's "added" split into nodes and links."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from events.services import EventSpec, record_events
from fabric.choices import SMState
from fabric.models import Fabric, Node, Port, SubnetManager
from fabric.services.ingest import import_topology_text
from tests.support.topologies import BASE

pytestmark = pytest.mark.django_db


@pytest.fixture
def imported() -> Fabric:
    fabric = import_topology_text("base", BASE, filename="base.net").fabric
    return Fabric.objects.get(pk=fabric.pk)  # last_discovery as stored


def test_imported_fabric_page_is_a_neutral_snapshot(imported, client_for):
    html = client_for("operator").get(f"/fabric/{imported.pk}/").content.decode()
    assert 'id="snapshot-notice"' in html and "Imported snapshot" in html and "base.net" in html
    button = re.search(r"<button[^>]*>Discover now</button>", html).group(0)
    assert "disabled" in button and 'aria-disabled="true"' in button
    assert "not known (imported snapshot)" in html
    assert 'class="error"' not in html and "sev-critical" not in html
    assert "default port default" not in html and "none: not reachable from this host" in html
    # the first discovery of a file: "first import", and its added count split
    counts = imported.last_discovery.counts
    nodes = counts["switches"] + counts["cas"] + counts.get("routers", 0)
    assert f"{nodes} nodes, {counts['links']} links" in html and "first import" in html


def test_live_fabric_page_has_no_snapshot_notice_and_labels_first_discovery(imported, client_for):
    imported.local_hca = True
    imported.save()
    d = imported.last_discovery
    d.source = "live"
    d.save()
    html = client_for("operator").get(f"/fabric/{imported.pk}/").content.decode()
    assert "snapshot-notice" not in html and "first discovery" in html and "first import" not in html
    assert "this host&#x27;s first active HCA port" in html or "this host's first active HCA port" in html
    assert "disabled" not in re.search(r"<button[^>]*>Discover now</button>", html).group(0)


def test_dashboard_calls_an_imported_fabric_a_snapshot(imported, client_for):
    client = client_for("viewer")
    html = client.get("/").content.decode()
    assert "imported snapshot" in html and "none known" not in html
    assert client.get("/dashboard/summary.json").json()["fabrics"][0]["live"] is False


def test_port_page_names_its_node_and_says_why_charts_are_empty_when_imported(imported, client_for):
    port = Port.objects.filter(node__fabric=imported, node__node_type="switch").first()
    html = client_for("viewer").get(f"/fabric/ports/{port.pk}/").content.decode()
    node = port.node
    assert f'<a href="/fabric/nodes/{node.pk}/">{node}</a>' in html
    assert "Switch 0x" not in html
    assert "snapshot-notice" in html


def test_subnet_manager_page_lists_master_standby_and_failover_history(imported, client_for):
    # SMInfo names the SM's port GUID; this text has none, so the node GUIDs stand in (the page
    # looks both up)
    cas = list(Node.objects.filter(fabric=imported, node_type="ca").order_by("description")[:2])
    ports = [type("SM", (), {"port_guid": ca.node_guid})() for ca in cas]
    now = timezone.now()
    SubnetManager.objects.create(
        fabric=imported, guid=ports[0].port_guid, lid=1, priority=14, state=SMState.MASTER,
        activity_count=5120, last_seen=now,
    )  # fmt: skip
    SubnetManager.objects.create(
        fabric=imported, guid=ports[1].port_guid, lid=7, priority=10, state=SMState.STANDBY,
        activity_count=33, last_seen=now,
    )  # fmt: skip
    Fabric.objects.filter(pk=imported.pk).update(master_sm_guid=ports[0].port_guid, master_sm_lid=1)
    record_events(
        imported,
        [
            EventSpec(
                code="sm.master_changed", category="sm", object_type="sm", object_key=ports[0].port_guid,
                object_repr=ports[0].port_guid, message=f"master SM moved to {ports[0].port_guid}",
            )
        ],
    )  # fmt: skip
    client = client_for("viewer")
    fabric_html = client.get(f"/fabric/{imported.pk}/").content.decode()
    assert f'href="/fabric/{imported.pk}/subnet-managers/"' in fabric_html
    assert f'href="/fabric/{imported.pk}/subnet-managers/"' in client.get("/fabric/").content.decode()
    html = client.get(f"/fabric/{imported.pk}/subnet-managers/").content.decode()
    rows = re.findall(r'<tr data-guid="([^"]+)"><td>(.*?)</td>', html)
    assert rows == [(ports[0].port_guid, "<strong>master</strong>"), (ports[1].port_guid, "standby")]
    assert "5120" in html and "33" in html and ">14<" in html
    assert str(cas[0]) in html and str(cas[1]) in html
    assert "sm.master_changed" in html and f"master SM moved to {ports[0].port_guid}" in html


def test_subnet_manager_page_of_an_imported_fabric_says_why_it_is_empty(imported, client_for):
    html = client_for("viewer").get(f"/fabric/{imported.pk}/subnet-managers/").content.decode()
    assert "snapshot-notice" in html and "No SM seen." in html
    assert "No master change, loss or recovery recorded." in html
