"""The same-source shortcut (issue 16): a topology text equal to the last complete discovery's
(comment lines aside) is recorded without parsing or diffing, unless another writer touched the
stored rows since. Unit tests on SQLite through the import service (``import_topology_text``)."""

from __future__ import annotations

from unittest import mock

import pytest

from fabric.choices import DiscoveryStatus
from fabric.models import Discovery, Fabric, Link, Node
from fabric.parsers import parse_ibnetdiscover
from fabric.services import ingest
from fabric.services.ingest import import_topology_text, importing, ingest_topology, samesource, source_digest
from fabric.services.requests import set_node_name_map
from tests.support.ingest_rows import CABLE_DOWN, snapshot
from tests.support.topologies import BASE

HEADER = "#\n# Topology file: generated on {when}\n#\n# Initiated from node 0002c903000a1234 port 0002c903000a1235\n\n"
pytestmark = pytest.mark.django_db


def _import(text: str, **kw) -> Discovery:
    return import_topology_text("lab", text, filename="topo.txt", **kw)


def _parse_calls():
    return mock.patch.object(importing, "detect_and_parse", wraps=importing.detect_and_parse)


def test_digest_ignores_comment_lines_only():
    a = source_digest(HEADER.format(when="Tue Dec  1 10:00:00 2026") + BASE)
    b = source_digest(HEADER.format(when="Wed Dec  2 11:30:00 2026") + BASE)
    assert a == b and len(a) == 32
    assert source_digest(BASE) != source_digest(CABLE_DOWN)
    # a changed inline comment (a LID, a description) is topology, not a comment line
    assert source_digest(BASE) != source_digest(
        BASE.replace('"leaf-1" enhanced port 0 lid 2', '"leaf-1" enhanced port 0 lid 9')
    )


def test_same_text_is_recorded_without_parsing():
    first = _import(HEADER.format(when="Tue Dec  1 10:00:00 2026") + BASE)
    before = snapshot(first.fabric)
    with _parse_calls() as parse:
        again = _import(HEADER.format(when="Wed Dec  2 11:30:00 2026") + BASE)
    assert parse.call_count == 0
    assert again.pk != first.pk and again.status == DiscoveryStatus.OK
    assert again.diff["same_source"] is True
    assert again.rows_written == 0 and again.added == again.removed == again.changed == 0
    assert again.counts == first.counts and again.digest == first.digest
    assert again.source_digest == first.source_digest
    assert Fabric.objects.get(pk=first.fabric_id).last_discovery_id == again.pk
    assert snapshot(first.fabric) == before


def test_changed_text_takes_the_full_path_and_the_next_same_text_the_shortcut():
    first = _import(BASE)
    with _parse_calls() as parse:
        down = _import(CABLE_DOWN, replace=True)
    assert parse.call_count == 1
    assert "same_source" not in down.diff and down.removed == 1
    assert Link.objects.filter(fabric=first.fabric).count() == first.counts["links"] - 1
    with _parse_calls() as parse:
        still = _import(CABLE_DOWN)
    assert parse.call_count == 0 and still.diff["same_source"] is True


def test_a_cleared_node_digest_forces_the_full_path():
    first = _import(BASE)
    Node.objects.filter(
        fabric=first.fabric, node_guid=Node.objects.filter(fabric=first.fabric).first().node_guid
    ).update(digest=None)
    with _parse_calls() as parse:
        again = _import(BASE)
    assert parse.call_count == 1 and "same_source" not in again.diff
    assert not Node.objects.filter(
        fabric=first.fabric, digest__isnull=True
    ).exists()  # the full path restored it
    assert _import(BASE).diff.get("same_source") is True


def test_an_unreachable_node_forces_the_full_path():
    first = _import(BASE)
    node = Node.objects.filter(fabric=first.fabric).first()
    Node.objects.filter(pk=node.pk).update(unreachable_since=first.started)
    again = _import(BASE)
    assert "same_source" not in again.diff
    assert Node.objects.get(pk=node.pk).unreachable_since is None


def test_a_node_name_map_change_forces_the_full_path():
    first = _import(BASE)
    node = Node.objects.filter(fabric=first.fabric, node_type="switch").first()
    set_node_name_map(first.fabric, text=f'{node.node_guid} "renamed-switch"\n')
    again = _import(BASE)
    assert "same_source" not in again.diff
    assert Node.objects.get(pk=node.pk).name == "renamed-switch"


def test_partial_discoveries_never_match():
    fabric = Fabric.objects.create(name="lab")
    digest = source_digest(BASE)
    d = ingest_topology(
        fabric, parse_ibnetdiscover(BASE, "t"), source="live", partial=True, source_digest=digest
    )
    assert d.status == DiscoveryStatus.PARTIAL and d.source_digest == ""
    assert ingest.ingest_unchanged(fabric, digest, source="live") is None
    ok = ingest_topology(fabric, parse_ibnetdiscover(BASE, "t"), source="live", source_digest=digest)
    assert ok.source_digest == digest
    assert ingest.ingest_unchanged(fabric, digest, source="live").diff["same_source"] is True


def test_the_pipeline_code_salts_the_digest():
    digest = source_digest(BASE)
    samesource._pipeline_salt.cache_clear()
    try:
        with mock.patch.object(
            samesource, "_PIPELINE_MODULES", (*samesource._PIPELINE_MODULES, "fabric.keys")
        ):
            assert source_digest(BASE) != digest
    finally:
        samesource._pipeline_salt.cache_clear()
    assert source_digest(BASE) == digest


def test_a_changed_map_file_forces_the_full_path(tmp_path, settings):
    settings.WEFT_NODE_NAME_MAP_DIRS = [str(tmp_path)]
    first = _import(BASE)
    node = Node.objects.filter(fabric=first.fabric, node_type="switch").first()
    path = tmp_path / "node-name-map"
    path.write_text(f'{node.node_guid} "core-a"\n')
    set_node_name_map(first.fabric, path=str(path))
    assert _import(BASE).diff.get("same_source") is None  # set_node_name_map renamed: full path once
    assert _import(BASE).diff.get("same_source") is True
    path.write_text(f'{node.node_guid} "core-b"\n')  # edited on disk: read again at the next import
    again = _import(BASE)
    assert "same_source" not in again.diff
    assert Node.objects.get(pk=node.pk).name == "core-b"
    path.unlink()  # unreadable: no shortcut, names kept, a warning
    gone = _import(BASE)
    assert "same_source" not in gone.diff and Node.objects.get(pk=node.pk).name == "core-b"
