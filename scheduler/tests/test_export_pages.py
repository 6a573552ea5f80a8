"""The fabric page's topology download (``scheduler.export_views``): every format of
``manage.py export_topology`` as a file with its media type and name, the same text as
``GET /api/scheduler/topology/``, and a bad format or node list back on the fabric page with the
reason."""

from __future__ import annotations

from html import unescape

import pytest
import yaml

from fabric.services.ingest import import_topology_text
from lab import netgen
from scheduler.exports import FORMATS, parse_topology_conf

HOSTS = {f"host00{i}" for i in range(1, 7)}
NAMES = {
    "slurm-tree": ("text/plain", "ft-topology.conf"),
    "slurm-block": ("text/plain", "ft-topology-block.conf"),
    "slurm-yaml": ("application/yaml", "ft-topology.yaml"),
    "kueue": ("application/yaml", "ft-kueue-topology.yaml"),
    "volcano": ("application/yaml", "ft-volcano-hypernodes.yaml"),
    "kai": ("application/yaml", "ft-kai-topology.yaml"),
    "labels": ("application/yaml", "ft-node-labels.yaml"),
}


@pytest.fixture
def fabric(db, committed_signals):
    return import_topology_text("ft", netgen.fat_tree_2level(3, 2, 2), filename="ft.topo").fabric


def test_the_fabric_page_offers_every_format(fabric, client_for):
    html = client_for("viewer").get(f"/fabric/{fabric.pk}/").content.decode()
    assert 'id="export-form"' in html and 'action="/scheduler/topology-export/"' in html
    assert [f for f in FORMATS if f'<option value="{f}">' in html] == list(FORMATS)
    assert set(NAMES) == set(FORMATS)


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_downloads_as_a_named_file_with_the_apis_text(fabric, client_for, fmt):
    viewer = client_for("viewer")
    resp = viewer.get("/scheduler/topology-export/", {"fabric": fabric.pk, "format": fmt})
    media, name = NAMES[fmt]
    assert resp.status_code == 200
    assert resp["Content-Type"] == f"{media}; charset=utf-8"
    assert resp["Content-Disposition"] == f'attachment; filename="{name}"'
    api = viewer.get("/api/scheduler/topology/", {"fabric": fabric.pk, "format": fmt})
    assert resp.content == api.content and resp["X-Weft-Warnings"] == api["X-Weft-Warnings"]
    text = resp.content.decode()
    if media == "text/plain":
        lines = parse_topology_conf(text)
        assert {h for c in lines for h in c.nodes or ()} == HOSTS
    else:
        docs = [d for d in yaml.safe_load_all(text) if d]
        assert docs and all(isinstance(d, dict | list) for d in docs)
        if fmt == "slurm-yaml":  # host lists, as topology.conf
            assert "host[001-002]" in text and "host[005-006]" in text
        elif fmt not in ("kueue", "kai"):  # those name the levels only
            assert all(h in text for h in HOSTS)


def test_only_some_nodes_and_the_warning_lines(fabric, client_for):
    resp = client_for("viewer").get(
        "/scheduler/topology-export/",
        {"fabric": fabric.pk, "format": "slurm-tree", "nodes": "host00[1-2],cpu7"},
    )
    text = resp.content.decode()
    assert {h for c in parse_topology_conf(text) for h in c.nodes or ()} == {"host001", "host002"}
    warnings = [line for line in text.splitlines() if line.startswith("# warning: ")]
    assert len(warnings) == int(resp["X-Weft-Warnings"]) == 2
    assert "1 Slurm nodes are on no fabric: cpu7" in text


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"format": "pbs"}, "Export: format 'pbs' is not one of slurm-tree, slurm-block"),
        ({"format": "slurm-tree", "nodes": "host[1-"}, "Export: the node list is not a host-list expression"),
        ({"format": "slurm-tree", "nodes": "cpu[1-4]"}, "Export of ft: "),
    ],
)
def test_bad_requests_go_back_to_the_fabric_page_with_the_reason(fabric, client_for, params, message):
    resp = client_for("viewer").get(
        "/scheduler/topology-export/", {"fabric": fabric.pk, **params}, follow=True
    )
    assert resp.redirect_chain == [(f"/fabric/{fabric.pk}/#topology-export", 302)]
    assert message in unescape(resp.content.decode())


def test_unknown_fabric_and_anonymous(fabric, client_for, client):
    assert (
        client_for("viewer")
        .get("/scheduler/topology-export/", {"fabric": 99999, "format": "kai"})
        .status_code
        == 404
    )
    assert client_for("viewer").get("/scheduler/topology-export/", {"format": "kai"}).status_code == 404
    assert (
        client.get("/scheduler/topology-export/", {"fabric": fabric.pk, "format": "kai"}).status_code == 302
    )
