"""``manage.py export_topology`` and ``GET /api/scheduler/topology/`` on stored fabrics."""

from __future__ import annotations

import re
from io import StringIO

import pytest
import yaml
from django.core.management import CommandError, call_command

from fabric.models import Fabric
from fabric.services.ingest import import_topology_text
from lab import netgen
from scheduler.exports import parse_topology_conf

URL = "/api/scheduler/topology/"


@pytest.fixture
def fabric(db, committed_signals):
    return import_topology_text("ft", netgen.fat_tree_2level(3, 2, 2), filename="ft.topo").fabric


def _run(*args, stdin=None, monkeypatch=None):
    out, err = StringIO(), StringIO()
    call_command("export_topology", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_command_prints_the_file_and_warns_on_stderr(fabric, tmp_path):
    out, err = _run("--fabric", "ft", "--format", "slurm-tree")
    lines = parse_topology_conf(out)
    assert {h for c in lines if c.nodes for h in c.nodes} == {f"host00{i}" for i in range(1, 7)}
    assert err == ""
    nodes = tmp_path / "nodes"
    nodes.write_text("host00[1-3]\nNodeName=cpu7 CPUs=4\n")
    out, err = _run("--fabric", "ft", "--format", "slurm-block", "--nodes", str(nodes))
    # raw descriptions made safe, tagged with the switch GUID's last 6 hex digits
    # (scheduler.exports.slurm_names; the form of the real files in $WEFT_REALDATA/slurm_topology)
    assert "MF0;leaf-01" not in out
    assert re.search(r"^BlockName=MF0_leaf-01_MQM8700_U1-[0-9a-f]{6} Nodes=host\[001-002\]$", out, re.M)
    assert (
        "warning: 3 fabric hosts are not Slurm nodes" in err
        and "warning: 1 Slurm nodes are on no fabric: cpu7" in err
    )
    out, _ = _run("--fabric", "ft", "--format", "volcano")
    assert [d["kind"] for d in yaml.safe_load_all(out)].count("HyperNode") == 3 + 1 + 1 + 1


@pytest.mark.parametrize(
    "args,message",
    [
        (["--fabric", "nope", "--format", "kai"], "no fabric 'nope'; fabrics: ft"),
        (["--fabric", "ft", "--format", "kai", "--nodes", "/no/such/file"], "cannot read the node list"),
        (["--fabric", "ft", "--format", "slurm-tree", "--nodes", "BADLIST"], None),
    ],
)
def test_command_errors_are_command_errors(fabric, tmp_path, args, message):
    if message is None:
        bad = tmp_path / "nodes"
        bad.write_text("ok\ngpu[1-\n")
        args[-1] = str(bad)
        message = r"bad node list: .*nodes:2: unclosed"
    with pytest.raises(CommandError, match=message):
        _run(*args)


def test_command_on_a_storage_fabric_says_why(fabric):
    Fabric.objects.filter(pk=fabric.pk).update(role="storage")
    with pytest.raises(CommandError, match="no fabric with placed hosts.*role is storage"):
        _run("--fabric", "ft", "--format", "slurm-tree")


def test_api_returns_the_text(fabric, viewer):
    resp = viewer.get(URL, {"fabric": "ft", "format": "slurm-tree"})
    assert resp.status_code == 200 and resp["Content-Type"] == "text/plain; charset=utf-8"
    assert resp["X-Weft-Warnings"] == "0"
    assert len(parse_topology_conf(resp.content.decode())) == 4
    resp = viewer.get(URL, {"fabric": str(fabric.pk), "format": "kueue", "nodes": "host00[1-2],ghost"},
                      HTTP_ACCEPT="application/yaml")  # fmt: skip
    assert resp.status_code == 200 and resp["Content-Type"] == "application/yaml; charset=utf-8"
    text = resp.content.decode()
    assert resp["X-Weft-Warnings"] == "2" and text.startswith(
        "# warning: 4 fabric hosts are not Kubernetes nodes"
    )
    assert [d["kind"] for d in yaml.safe_load_all(text)] == ["Topology", "ResourceFlavor"]


@pytest.mark.parametrize(
    "params,status,key",
    [
        ({"fabric": "ft", "format": "pbs"}, 400, "format"),
        ({"fabric": "ft"}, 400, "format"),
        ({"format": "kai"}, 400, "fabric"),
        ({"fabric": "nope", "format": "kai"}, 404, "detail"),
        ({"fabric": "99999999999999999999", "format": "kai"}, 404, "detail"),
        ({"fabric": "ft", "format": "kai", "nodes": "a[1-"}, 400, "nodes"),
        ({"fabric": "ft", "format": "kai", "nodes": "nobody"}, 400, "error"),
        ({"fabric": "ft", "format": "kai", "name": "Bad Name"}, 400, "name"),
    ],
)
def test_api_bad_input_is_a_clear_4xx(fabric, viewer, params, status, key):
    resp = viewer.get(URL, params)
    assert resp.status_code == status and key in resp.json()


def test_api_needs_a_signed_in_user(fabric, anonymous):
    resp = anonymous.get(URL, {"fabric": "ft", "format": "kai"})
    assert resp.status_code == 401 and resp["WWW-Authenticate"].startswith("Token")


def test_api_error_as_text_when_text_was_asked(fabric, viewer):
    resp = viewer.get(URL, {"fabric": "ft", "format": "pbs"}, HTTP_ACCEPT="text/plain")
    assert resp.status_code == 400 and "format" in resp.content.decode()


def test_fabrics_with_the_same_host_names_each_export_their_own(fabric, viewer):
    """A second fabric with the same host names (a storage fabric, another site): exporting it
    alone writes its own hosts and says which names clash with the other fabric; it is never
    refused because Weft's own scheduler places those hosts on the first fabric."""
    import_topology_text("ft-storage", netgen.fat_tree_2level(1, 1, 6), filename="s.topo")
    out, err = _run("--fabric", "ft-storage", "--format", "slurm-tree")
    (leaf,) = [c for c in parse_topology_conf(out) if c.nodes]
    assert leaf.nodes == [f"host{i:03d}" for i in range(1, 7)]  # one leaf of ft-storage, all 6
    assert re.search(
        r"warning: 6 hosts of fabric ft-storage have the same names as hosts of fabric ft \(two sites.*host001, "
        r"host002, host003, host004, host005, host006",
        err,
    )
    out, err = _run("--fabric", "ft", "--format", "slurm-tree")
    conf = parse_topology_conf(out)
    assert [len(c.nodes) for c in conf if c.nodes] == [2, 2, 2]  # ft's own three leaves
    assert "6 hosts of fabric ft have the same names as hosts of fabric ft-storage" in err
    # both named together: one tree, as Weft's scheduler sees it (placed on ft, the rule-5 note)
    out, err = _run("--fabric", "ft,ft-storage", "--format", "slurm-tree")
    assert len({h for c in parse_topology_conf(out) if c.nodes for h in c.nodes}) == 6
    assert "also on fabric ft" in err and "same names" not in err
    # the API: the same export, the clash as a warning line and counted
    resp = viewer.get(URL, {"fabric": "ft-storage", "format": "slurm-tree"})
    body = resp.content.decode()
    assert resp.status_code == 200 and resp["X-Weft-Warnings"] == "1"
    assert body.startswith(
        "# warning: 6 hosts of fabric ft-storage have the same names as hosts of fabric ft "
    )
    assert "Nodes=host[001-006]" in body
