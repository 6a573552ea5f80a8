"""Fabric pages (server-rendered HTML) on fabrics imported from real ibnetdiscover files."""

from __future__ import annotations

import re

import pytest
from django.template import TemplateDoesNotExist
from django.template.loader import select_template
from django.test import Client

from accounts.models import AuditEntry
from fabric.choices import NodeType
from fabric.models import Discovery, Fabric, Link, Node, Port
from fabric.services.ingest import import_topology_text
from fabric.views import OBJECT_ALARMS_TEMPLATE, PORT_CHARTS_TEMPLATE, diff_sections

SMALL = "ibnetdiscover/ufm_small_topo_file.ibnetdiscover.txt"


@pytest.fixture
def small_text(realdata) -> str:
    return (realdata / SMALL).read_text()


@pytest.fixture
def small(small_text, db) -> Fabric:
    return import_topology_text("small", small_text, filename=SMALL).fabric


def exists(name: str) -> bool:
    try:
        select_template([name])
    except TemplateDoesNotExist:
        return False
    return True


@pytest.mark.parametrize("url", ["/fabric/", "/fabric/map/", "/fabric/changes/", "/fabric/import/"])
def test_pages_need_login(db, url):
    resp = Client().get(url)
    assert resp.status_code == 302 and "/accounts/login/" in resp["Location"]


def test_fabric_list_shows_counts(small, client_for):
    html = client_for("viewer").get("/fabric/").content.decode()
    row = re.search(r'<tr data-fabric="small">(.*?)</tr>', html, re.S).group(1)
    cells = re.findall(r"<td>(\d+)</td>", row)
    switches = Node.objects.filter(fabric=small, node_type=NodeType.SWITCH).count()
    cas = Node.objects.filter(fabric=small, node_type=NodeType.CA).count()
    assert cells[:4] == [str(switches), str(cas), "0", str(Link.objects.filter(fabric=small).count())]


def test_fabric_page_discover_button_by_role(
    small, client_for, monkeypatch, django_capture_on_commit_callbacks
):
    from fabric import tasks

    url = f"/fabric/{small.pk}/"
    viewer_html = client_for("viewer").get(url).content.decode()
    assert 'id="discover-form"' not in viewer_html
    assert (
        f'id="count-cas">{Node.objects.filter(fabric=small, node_type=NodeType.CA).count()}<' in viewer_html
    )
    assert client_for("viewer").post(f"/fabric/{small.pk}/discover/").status_code == 403
    operator = client_for("operator")
    html = operator.get(url).content.decode()
    assert (
        'id="discover-form"' in html and "disabled" in html.split('id="discover-form"')[1].split("</form>")[0]
    )
    queued = []
    monkeypatch.setattr(
        tasks.discover_fabric_task, "apply_async", lambda args, task_id: queued.append(args[0])
    )
    with django_capture_on_commit_callbacks(execute=True):
        resp = operator.post(f"/fabric/{small.pk}/discover/", follow=True)
    assert queued == [] and "no live access" in resp.content.decode()
    Fabric.objects.filter(pk=small.pk).update(tool_env={"LD_PRELOAD": "libumad2sim.so"})
    html = operator.get(url).content.decode()
    assert "disabled" not in html.split('id="discover-form"')[1].split("</form>")[0]
    with django_capture_on_commit_callbacks(execute=True):
        resp = operator.post(f"/fabric/{small.pk}/discover/", follow=True)
    assert resp.redirect_chain[-1][0] == url
    assert queued == [small.pk]
    assert "Discovery of small queued" in resp.content.decode()
    assert AuditEntry.objects.filter(action="fabric.discover", username="olga").count() == 1


def test_a_get_of_a_post_only_form_url_goes_to_its_form(small, client_for):
    """``discover/`` and a port's ``action/`` (POST-only, as the node-name map's ``names/``) answer
    a GET (a reload, a typed address) with the page their form is on and a message, not Django's
    empty 405; nothing is queued or done, and the roles still apply."""
    operator = client_for("operator")
    discoveries, audits = Discovery.objects.count(), AuditEntry.objects.count()
    r = operator.get(f"/fabric/{small.pk}/discover/", follow=True)
    assert r.redirect_chain == [(f"/fabric/{small.pk}/#discover-form", 302)]
    assert "A discovery is started with the “Discover now” button of the fabric page." in r.content.decode()
    port = Port.objects.filter(node__fabric=small, node__node_type=NodeType.SWITCH, port_num__gt=0).first()
    r = operator.get(f"/fabric/ports/{port.pk}/action/", follow=True)
    assert r.redirect_chain == [(f"/fabric/ports/{port.pk}/#port-actions", 302)]
    body = r.content.decode()
    assert "Port actions are taken with the form of the port page." in body and 'id="port-actions"' in body
    assert (Discovery.objects.count(), AuditEntry.objects.count()) == (discoveries, audits)
    assert client_for("viewer").get(f"/fabric/{small.pk}/discover/").status_code == 403
    assert client_for("viewer").get(f"/fabric/ports/{port.pk}/action/").status_code == 403


def test_map_page_points_at_the_layout_api(small, client_for):
    html = client_for("viewer").get("/fabric/map/").content.decode()
    assert f'data-map-url="/api/fabric/fabrics/{small.pk}/map/"' in html
    assert "vendor/sigma/sigma.min.js" in html and "vendor/graphology/graphology.umd.min.js" in html
    assert "https://" not in re.sub(r'href="https?://[^"]*"', "", html).split("<main>")[1]  # no CDN
    node = Node.objects.filter(fabric=small).first()
    html = client_for("viewer").get(f"/fabric/map/?fabric={small.pk}&focus={node.node_guid}").content.decode()
    assert f'data-focus="{node.node_guid}"' in html
    assert "No fabric “nope”" in client_for("viewer").get("/fabric/map/?fabric=nope").content.decode()


def test_map_page_without_fabric(db, client_for):
    html = client_for("admin").get("/fabric/map/").content.decode()
    assert "No fabric yet" in html and 'href="/fabric/import/"' in html


def test_node_page_lists_ports_and_remote_ends(small, client_for):
    switch = Node.objects.filter(fabric=small, node_type=NodeType.SWITCH).order_by("id").first()
    html = client_for("viewer").get(f"/fabric/nodes/{switch.pk}/").content.decode()
    assert switch.node_guid in html
    rows = re.findall(r'<tr data-port="(\d+)">(.*?)</tr>', html, re.S)
    assert [int(n) for n, _ in rows] == list(
        Port.objects.filter(node=switch).order_by("port_num").values_list("port_num", flat=True)
    )
    for num, row in rows:
        port = Port.objects.get(node=switch, port_num=int(num))
        link = Link.objects.filter(port_a=port).first() or Link.objects.filter(port_b=port).first()
        if link is None:
            continue
        remote = link.port_b if link.port_a_id == port.pk else link.port_a
        assert f'href="/fabric/nodes/{remote.node_id}/"' in row
        assert f'href="/fabric/ports/{remote.pk}/">{remote.port_num}</a>' in row
        if remote.node_id == switch.pk:
            assert "loopback" in row
    assert f"/fabric/map/?fabric={small.pk}&amp;focus={switch.node_guid}" in html


def test_port_page_link_and_optional_includes(small, client_for):
    port = (
        Port.objects.filter(node__fabric=small, node__node_type=NodeType.CA, link_as_a__isnull=False).first()
        or Port.objects.filter(
            node__fabric=small, node__node_type=NodeType.CA, link_as_b__isnull=False
        ).first()
    )
    resp = client_for("viewer").get(f"/fabric/ports/{port.pk}/")
    assert resp.status_code == 200
    link = Link.objects.filter(port_a=port).first() or Link.objects.get(port_b=port)
    remote = link.port_b if link.port_a_id == port.pk else link.port_a
    html = resp.content.decode()
    assert remote.node.node_guid in html
    assert resp.context["charts_template"] == (PORT_CHARTS_TEMPLATE if exists(PORT_CHARTS_TEMPLATE) else None)
    assert resp.context["alarms_template"] == (
        OBJECT_ALARMS_TEMPLATE if exists(OBJECT_ALARMS_TEMPLATE) else None
    )
    unlinked = Port.objects.filter(node__fabric=small, link_as_a__isnull=True, link_as_b__isnull=True).first()
    if unlinked is not None:
        assert "Not connected." in client_for("viewer").get(f"/fabric/ports/{unlinked.pk}/").content.decode()


def test_changes_page_shows_the_diff_of_a_reimport(small, small_text, client_for):
    switch = Node.objects.filter(fabric=small, node_type=NodeType.SWITCH).order_by("id").first()
    # the same fabric with one switch renamed: a description change
    changed_text = small_text.replace(f'"{switch.description}"', '"renamed-switch-for-test"', 1)
    assert changed_text != small_text
    second = import_topology_text("small", changed_text, filename="renamed.txt")
    assert second.changed >= 1
    html = client_for("viewer").get(f"/fabric/changes/?fabric={small.pk}").content.decode()
    rows = re.findall(r'<tr data-discovery="(\d+)">(.*?)</tr>', html, re.S)
    assert [int(pk) for pk, _ in rows] == list(
        Discovery.objects.filter(fabric=small).values_list("pk", flat=True)
    )
    newest = rows[0][1]
    assert f"~{second.changed}" in newest and "renamed.txt" in newest
    assert '<details class="diff diff-changed">' in newest
    assert switch.node_guid in newest
    # only-with-changes filter keeps both (the first import added everything)
    html = client_for("viewer").get(f"/fabric/changes/?fabric={small.pk}&changed=1").content.decode()
    assert len(re.findall(r'<tr data-discovery="', html)) == 2


def test_diff_sections_flattens_nested_items():
    sections = diff_sections(
        {"added": {"links": ["a", "b", "c"]}, "changed": {"nodes": [{"key": "0x1", "lid": [1, 2]}]}}, limit=2
    )
    assert sections[0]["kinds"] == [{"kind": "links", "total": 3, "items": ["a", "b"], "more": 1}]
    assert sections[1]["total"] == 0
    assert sections[2]["kinds"][0]["items"] == ["0x1: lid 1 → 2"]


def test_import_page_is_for_admins(db, client_for):
    assert client_for("viewer").get("/fabric/import/").status_code == 403
    assert client_for("operator").get("/fabric/import/").status_code == 403
    resp = client_for("admin").get("/fabric/import/")
    assert resp.status_code == 200
    html = resp.content.decode()
    assert 'data-url="/api/fabric/fabrics/import/"' in html and 'type="file"' in html and "<progress" in html
    assert "up to 256 MiB" in html  # WEFT_IMPORT_MAX_BYTES's default, not a number of its own


def test_import_page_states_the_configured_limit(db, client_for, settings):
    settings.WEFT_IMPORT_MAX_BYTES = 1536 * 1024
    html = client_for("admin").get("/fabric/import/").content.decode()
    assert "up to 1.5 MiB" in html


@pytest.mark.parametrize("module", ["fabric.views", "events.views", "telemetry.views"])
def test_pages_import_nothing_from_the_rest_api(module):
    """Pages and the API share querysets (``fabric.querysets``), model properties (``Port.link``)
    and services (``fabric.services.requests``); a page never imports the API's modules."""
    import ast
    import importlib.util
    from pathlib import Path

    tree = ast.parse(Path(importlib.util.find_spec(module).origin).read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names |= {base} | {f"{base}.{a.name}" if node.module else f"{base}{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    assert names, module
    assert not [n for n in names if "api" in n.replace("_", ".").split(".")], sorted(names)


def test_sharp_aggregation_nodes_on_the_switch_page_and_the_fabric_page(realdata, db, client_for):
    """hk_topo1: 4 MSB7800 (Switch-IB 2), each with its SHARP Aggregation Node on port 37: the
    switch page names its AN, the AN's page its switch, the fabric page counts them apart from
    the hosts."""
    path = "ibnetdiscover/hk_topo1_anonymized_edr_sharp.ibnetdiscover.txt"
    fabric = import_topology_text("sharp", (realdata / path).read_text(), filename=path).fabric
    ans = Node.objects.filter(fabric=fabric, aggregation_node=True)
    assert ans.count() == 4 and not ans.filter(host__isnull=False).exists()
    an = ans.get(node_guid="0x7cfe900300ac2d58")
    switch = an.aggregation_switch
    assert switch.name == "MF0;IB_switch_4:MSB7800/U1"
    viewer = client_for("viewer")
    html = viewer.get(f"/fabric/nodes/{switch.pk}/").content.decode()
    sharp = re.search(r'<dd id="node-sharp">(.*?)</dd>', html, re.S).group(1)
    assert f'href="/fabric/nodes/{an.pk}/"' in sharp and an.node_guid in sharp
    html = viewer.get(f"/fabric/nodes/{an.pk}/").content.decode()
    sharp = re.search(r'<dd id="node-sharp">(.*?)</dd>', html, re.S).group(1)
    assert "no host" in sharp and f'href="/fabric/nodes/{switch.pk}/"' in sharp
    html = viewer.get(f"/fabric/{fabric.pk}/").content.decode()
    assert re.search(r'id="sharp-switches">4 with SHARP<', html)
    assert re.search(r'id="aggregation-nodes">4 SHARP Aggregation Nodes<', html)
    assert f"{fabric.hosts.count()} hosts" in html and fabric.hosts.count() == 4  # 8 CAs, 4 of them ANs
    # the API: the kind and the switch, and filters on both
    rows = viewer.get("/api/fabric/nodes/", {"fabric": fabric.pk, "aggregation_node": "true"}).json()[
        "results"
    ]
    assert sorted(r["node_guid"] for r in rows) == sorted(ans.values_list("node_guid", flat=True))
    assert all(r["host"] is None and r["aggregation_switch_guid"] for r in rows)
    rows = viewer.get("/api/fabric/nodes/", {"aggregation_switch": switch.node_guid}).json()["results"]
    assert [(r["node_guid"], r["aggregation_node"]) for r in rows] == [(an.node_guid, True)]
