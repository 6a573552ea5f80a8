"""Tasks and commands: discover_fabric_task/discover_all_task (live-discoverable fabrics only, no
overlap), ``manage.py import_topology`` and ``manage.py discover`` JSON summaries."""

from __future__ import annotations

import gzip
import io
import json
import logging
import re

import pytest
from django.core.management import CommandError, call_command

from core.locks import single_instance
from fabric.models import Discovery, Fabric, Link, Node
from fabric.tasks import discover_all_task, discover_fabric_task
from tests.support.topologies import BASE


def _last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.django_db
def test_import_topology_command_plain_and_gzip(tmp_path, committed_signals):
    plain = tmp_path / "base.topo"
    plain.write_text(BASE)
    out = io.StringIO()
    call_command("import_topology", str(plain), "--fabric", "cmd", stdout=out)
    s = _last_json(out.getvalue())
    assert {
        k: s[k] for k in ("switches", "cas", "routers", "links", "added", "removed", "changed", "warnings")
    } == {
        "switches": 3,
        "cas": 3,
        "routers": 0,
        "links": 5,
        "added": 11,
        "removed": 0,
        "changed": 0,
        "warnings": 0,
    }
    gz = tmp_path / "base.topo.gz"
    gz.write_bytes(gzip.compress(BASE.replace("lid 11 lmc 0", "lid 99 lmc 0").encode()))
    out = io.StringIO()
    call_command("import_topology", str(gz), "--fabric", "cmd", stdout=out)
    s = _last_json(out.getvalue())
    assert (s["added"], s["removed"], s["changed"], s["rows_written"] > 0) == (0, 0, 1, True)
    # default fabric name from the file name
    call_command("import_topology", str(plain), stdout=io.StringIO())
    assert Fabric.objects.filter(name="base").exists()


@pytest.mark.django_db
def test_import_topology_command_rejects_junk_with_location(tmp_path, committed_signals):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00 not a fabric\n")
    with pytest.raises(CommandError) as info:
        call_command("import_topology", str(junk), "--fabric", "j", stdout=io.StringIO())
    assert str(info.value).startswith("junk.bin:1: ")
    assert not Fabric.objects.filter(name="j").exists() and Discovery.objects.count() == 0
    with pytest.raises(CommandError):
        call_command("import_topology", str(tmp_path / "missing.topo"), stdout=io.StringIO())


@pytest.mark.django_db
def test_import_topology_command_realdata_selene_storage(realdata, committed_signals):
    path = realdata / "ibnetdiscover" / "selene_storage.ibnetdiscover.txt"
    out = io.StringIO()
    call_command("import_topology", str(path), "--fabric", "storage", stdout=out)
    s = _last_json(out.getvalue())
    text = path.read_text()
    assert s["switches"] == len(re.findall(r"^Switch\s", text, re.M))
    assert s["cas"] == len(re.findall(r"^Ca\s", text, re.M))
    assert 2 * s["links"] == len(re.findall(r"^\[\d+\]", text, re.M))
    assert Link.objects.filter(fabric__name="storage").count() == s["links"]


@pytest.mark.django_db
def test_discover_all_skips_fabrics_without_live_access(committed_signals):
    Fabric.objects.create(name="imported")  # no tool_env, no ca_name
    Fabric.objects.create(name="off", tool_env={"SIM_HOST": "x"}, discovery_enabled=False)
    assert discover_all_task() == []
    assert Discovery.objects.count() == 0


@pytest.mark.django_db
def test_discover_fabric_task_does_not_overlap(committed_signals):
    f = Fabric.objects.create(name="busy", tool_env={"SIM_HOST": "x"})
    with single_instance(f"fabric.discover.{f.pk}", 60) as mine:
        assert mine
        result = discover_fabric_task(f.pk)
    assert "already running" in result["skipped"]
    assert Discovery.objects.count() == 0
    with single_instance("fabric.discover_all", 60):
        assert "already running" in discover_all_task()[0]["skipped"]


@pytest.mark.lab
@pytest.mark.django_db(transaction=True)
def test_tasks_and_discover_command_against_the_lab(small_lab, committed_signals, caplog):
    live = Fabric.objects.create(name="lab", tool_env=dict(small_lab.tool_env))
    Fabric.objects.create(name="imported")
    results = discover_all_task()
    assert [r["fabric"] for r in results] == ["lab"]
    assert results[0]["status"] == "ok" and results[0]["switches"] == len(small_lab.net.switches)
    assert Node.objects.filter(fabric=live).count() == len(small_lab.net.nodes)
    out = io.StringIO()
    caplog.clear()
    caplog.set_level(logging.INFO)
    call_command("discover", "--fabric", "lab", stdout=out)
    # the JSON summary alone: no log line before it (issue 14: scripts parse the output)
    assert out.getvalue().count("\n") == 1
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO] == []
    s = _last_json(out.getvalue())
    assert (s["switches"], s["cas"], s["added"], s["removed"], s["changed"], s["rows_written"]) == (
        len(small_lab.net.switches),
        len(small_lab.net.cas),
        0,
        0,
        0,
        0,
    )
    # a failing fabric: the task reports the reason, the command exits non-zero after its JSON line
    Fabric.objects.filter(pk=live.pk).update(ca_name="mlx5_97")
    assert "exit" in discover_fabric_task(live.pk)["error"]
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("discover", "--fabric", "lab", stdout=out, stderr=io.StringIO())
    assert _last_json(out.getvalue())["status"] == "failed"
