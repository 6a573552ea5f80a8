"""Imports that cannot cut a fabric in half (issue 9): a file cut short is refused with a located
error, and an import that would remove more than ``WEFT_IMPORT_MAX_REMOVE_SHARE`` of the stored
fabric needs ``replace``. Real files from ``$WEFT_REALDATA``."""

from __future__ import annotations

import gzip
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from events.models import Event
from fabric.models import Fabric, Link, Node
from fabric.parsers import detect_and_parse
from fabric.parsers.records import TopologyParseError
from fabric.services.ingest import ImportWouldRemove, import_topology_text

HK3 = "ibnetdiscover/hk_topo3_quantum_hdr_2019.ibnetdiscover.txt"
UFM = "ibnetdiscover/ufm_small_topo_file.ibnetdiscover.txt"


def _read(path) -> str:
    return gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text(errors="replace")


def _complete_files(realdata):
    for folder in ("ibnetdiscover", "ibsim_net", "ibnetdiscover_ports", "opensm_subnet_lst"):
        for path in sorted((realdata / folder).glob("*")):
            try:
                yield path, detect_and_parse(_read(path), path.name)
            except TopologyParseError:
                continue  # not a topology (guid maps, READMEs)


def test_no_complete_real_file_looks_truncated(realdata):
    seen = 0
    for path, topo in _complete_files(realdata):
        assert topo.truncated is None, (path.name, topo.truncated)
        seen += 1
    assert seen >= 25


@pytest.mark.parametrize("share", [0.1, 0.3, 0.45, 0.6, 0.8, 0.95])
def test_cut_real_files_are_refused_with_a_line(realdata, share):
    for name in (HK3, UFM, "ibnetdiscover/selene_storage.ibnetdiscover.txt"):
        text = (realdata / name).read_text()
        mid = text[: int(len(text) * share)]
        at_line = mid[: mid.rfind("\n") + 1]
        at_block = mid[: mid.rfind("\n\n") + 2]
        for cut in {mid, at_line, at_block}:
            if not cut.strip():
                continue
            try:
                topo = detect_and_parse(cut, name)
            except TopologyParseError as exc:  # no node record left at all: refused as well
                assert exc.line >= 1
                continue
            assert topo.truncated is not None, (name, share, cut[-120:])
            line, reason = topo.truncated
            assert 1 <= line <= cut.count("\n") + 1 and "cut short" in reason


def test_mid_line_cut_points_at_the_last_line(realdata):
    text = (realdata / HK3).read_text()
    cut = text[: text.index("4xHDR", len(text) // 2) + 3]  # "...lid 12 4xH"
    line, reason = detect_and_parse(cut, "hk3").truncated
    assert line == len(cut.splitlines()) and "ends mid-line" in reason


@pytest.mark.django_db
def test_import_of_a_cut_file_is_refused_and_nothing_changes(realdata):
    text = (realdata / HK3).read_text()
    import_topology_text("hk", text, filename="hk3.txt")
    fabric = Fabric.objects.get(name="hk")
    before = (Node.objects.filter(fabric=fabric).count(), Link.objects.filter(fabric=fabric).count())
    events = Event.objects.filter(fabric=fabric).count()
    cut = text[: int(len(text) * 0.45)]
    cut = cut[: cut.rfind("\n\n") + 2]  # at a block boundary: links point at nodes the file lost
    with pytest.raises(TopologyParseError) as info:
        import_topology_text("hk", cut, filename="hk3-cut.txt")
    assert info.value.source == "hk3-cut.txt" and info.value.line > 0 and "cut short" in info.value.message
    after = (Node.objects.filter(fabric=fabric).count(), Link.objects.filter(fabric=fabric).count())
    assert after == before and Event.objects.filter(fabric=fabric).count() == events


@pytest.mark.django_db
def test_import_removing_too_much_needs_replace(realdata):
    import_topology_text("hk", (realdata / HK3).read_text(), filename="hk3.txt")
    fabric = Fabric.objects.get(name="hk")
    stored = (Node.objects.filter(fabric=fabric).count(), Link.objects.filter(fabric=fabric).count())
    other = (realdata / UFM).read_text()  # another, complete fabric: every stored node would go
    with pytest.raises(ImportWouldRemove) as info:
        import_topology_text("hk", other, filename="ufm.txt")
    err = info.value
    assert (err.nodes, err.stored_nodes, err.links, err.stored_links) == (
        stored[0],
        stored[0],
        stored[1],
        stored[1],
    )
    assert err.share == 1.0 and err.limit == 0.10 and len(err.examples) == 20
    assert err.as_dict()["would_remove"]["nodes"] == stored[0] and "replace" in str(err)
    assert (Node.objects.filter(fabric=fabric).count(), Link.objects.filter(fabric=fabric).count()) == stored
    done = import_topology_text("hk", other, filename="ufm.txt", replace=True)
    assert done.removed >= stored[0] and Node.objects.filter(fabric=fabric).count() == len(
        detect_and_parse(other).nodes
    )


@pytest.mark.django_db
def test_small_removal_below_the_share_needs_no_flag(realdata, settings):
    text = (realdata / HK3).read_text()
    import_topology_text("hk", text, filename="hk3.txt")
    settings.WEFT_IMPORT_MAX_REMOVE_SHARE = 0.5
    topo = detect_and_parse(text)
    # drop one CA record (header to the next blank line) and the switch lines pointing at it
    ca = next(n for n in topo.nodes.values() if n.node_type == "ca")
    lines = text.splitlines(keepends=True)
    start = ca.line - 1
    while start > 0 and lines[start - 1].strip():
        start -= 1
    end = ca.line
    while end < len(lines) and lines[end].strip():
        end += 1
    kept = [ln for i, ln in enumerate(lines) if not (start <= i < end) and f'"{ca.name}"' not in ln]
    d = import_topology_text("hk", "".join(kept), filename="hk3-minus-one.txt")
    assert d.removed >= 1 and not Node.objects.filter(fabric__name="hk", node_guid=ca.guid).exists()


@pytest.mark.django_db
def test_command_says_what_would_go_and_takes_replace(realdata, tmp_path):
    import_topology_text("hk", (realdata / HK3).read_text(), filename="hk3.txt")
    other = tmp_path / "ufm.txt"
    other.write_text((realdata / UFM).read_text())
    with pytest.raises(CommandError, match=r"would remove .* nodes .*--replace"):
        call_command("import_topology", str(other), "--fabric", "hk", stdout=StringIO(), stderr=StringIO())
    out = StringIO()
    call_command("import_topology", str(other), "--fabric", "hk", "--replace", stdout=out, stderr=StringIO())
    assert json.loads(out.getvalue().splitlines()[-1])["status"] == "ok"
