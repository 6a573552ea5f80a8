"""Topology compare (``fabric.compare``, ``fabric.services.reference``, the page and the JSON):
edited copies of a real ``ibnetdiscover`` dump (in tmp_path) against the original as reference.

The dump (``$WEFT_REALDATA/ibnetdiscover/hk_topo3_quantum_hdr_2019.ibnetdiscover.txt``): 40-port
Quantum switches, two CAs. Edits: a cable moved to a free port of the same switch (same node
pair, other ports), two cables swapped between spines at a switch (a cable on the wrong switch),
a cable pulled, a cable trained at EDR, a CA gone.
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from pathlib import Path

import pytest

from fabric.compare import compare, snapshot_from_topology
from fabric.parsers import detect_and_parse

REALDATA = Path(os.environ.get("WEFT_REALDATA", "/nonexistent"))
DUMP = REALDATA / "ibnetdiscover" / "hk_topo3_quantum_hdr_2019.ibnetdiscover.txt"
pytestmark = pytest.mark.skipif(
    not DUMP.exists(), reason=f"realdata not available ({DUMP}; set WEFT_REALDATA)"
)

A = "S-98039b030096aa24"  # a switch with ports 19-40 cabled but 33
B, C = "S-98039b030087668e", "S-0003c90300123459"  # at A[21] and A[22], each on its port 39
CA = "H-98039b030067261c"  # "fit101 HCA-1"
CA2 = "H-98039b0300672824"  # "fit26 HCA-3", on S-98039b03008668b0[1]
_NODE = re.compile(r'^(Switch|Ca|Hca|Router)\s+\d+\s+"([^"]+)"')
_LINK = re.compile(r'^\[(\d+)\](\S*)(\s+)"([^"]+)"\[(\d+)\]')


def edit(text: str, fn) -> str:
    """Rewrite the cable lines of an ibnetdiscover text: ``fn(node, port, remote, remote_port)``
    returns None (keep), ``"drop"``, or a new ``(port, remote, remote_port)`` or a callable on the line."""
    out, node = [], None
    for line in text.splitlines():
        if m := _NODE.match(line):
            node = m.group(2)
        elif (m := _LINK.match(line)) and node is not None:
            change = fn(node, int(m.group(1)), m.group(4), int(m.group(5)))
            if change == "drop":
                continue
            if callable(change):
                line = change(line)
            elif change is not None:
                port, remote, rport = change
                line = f'[{port}]{m.group(2)}{m.group(3)}"{remote}"[{rport}]' + line[m.end() :]
        out.append(line)
    return "\n".join(out) + "\n"


def drop_node(text: str, name: str) -> str:
    """Drop a node's record (from its ``vendid=`` header to the blank line) and cables to it."""
    blocks = re.split(r"\n\s*\n", text)
    kept = [b for b in blocks if f'"{name}"' not in b.split("\n[", 1)[0]]
    return edit("\n\n".join(kept), lambda n, p, r, rp: "drop" if r == name else None)


@pytest.fixture
def original() -> str:
    return DUMP.read_text()


def snap(text: str, tmp_path: Path, name: str) -> dict:
    path = tmp_path / name
    path.write_text(text)
    return snapshot_from_topology(detect_and_parse(path.read_text(), path.name))


def guid(file_id: str) -> str:
    return "0x" + file_id[2:]


def test_same_file_matches(original, tmp_path):
    ref = snap(original, tmp_path, "ref.txt")
    report = compare(ref, snap(original, tmp_path, "same.txt"))
    assert report["matches"] and set(report["counts"].values()) == {0}
    assert len(ref["links"]) > 700 and len(ref["nodes"]) > 40


def test_edited_copy_classifies_each_difference_once(original, tmp_path):
    def cables(node, port, remote, rport):
        # A[21]-B[39] moved to A's free port 33 (same node pair, other ports)
        if (node, port) == (A, 21):
            return (33, B, 39)
        if (node, port, remote) == (B, 39, A):
            return (39, A, 33)
        # the cable from A[23] trained at EDR (both ends' lines)
        if (node, port) == (A, 23) or (remote, rport) == (A, 23):
            return lambda line: line.replace("4xHDR", "4xEDR")
        # A[24]'s cable pulled
        if (node, port) == (A, 24) or (remote, rport) == (A, 24):
            return "drop"
        return None

    edited = edit(original, cables)
    # two cables swapped at switch A: A[25] and A[26] each land on the other's spine
    lines = {p: (r, rp) for p, r, rp in _cables(original, A) if p in (25, 26)}
    (s25, p25), (s26, p26) = lines[25], lines[26]
    edited = edit(
        edited,
        lambda n, p, r, rp: (25, s26, p26) if (n, p) == (A, 25) else (26, s25, p25) if (n, p) == (A, 26)
        else (p, A, 25) if (n, p) == (s26, p26) else (p, A, 26) if (n, p) == (s25, p25) else None,
    )  # fmt: skip
    edited = drop_node(edited, CA)
    # the other CA's cable lands on A's free port 1 instead of its leaf (a cable on the wrong switch)
    leaf = "S-98039b03008668b0"
    edited = edit(
        edited,
        lambda n, p, r, rp: (1, A, 1) if n == CA2 else "drop" if (n, p) == (leaf, 1)
        else (lambda line: f'[1]\t"{CA2}"[1]\t\t# "fit26 HCA-3" lid 1 4xSDR\n' + line) if (n, p) == (A, 19)
        else None,
    )  # fmt: skip
    report = compare(snap(original, tmp_path, "plan.txt"), snap(edited, tmp_path, "now.txt"))

    assert report["counts"] == {
        "missing_links": 2,  # A[24]'s cable, and the CA's
        "extra_links": 0,
        "miswired": 4,
        "missing_nodes": 1,
        "extra_nodes": 0,
        "below_reference": 1,
    }, json.dumps(report, indent=1)[:3000]
    ends = lambda link: {tuple(link["a"]), tuple(link["b"])}  # noqa: E731
    found = sorted((m["kind"], sorted(ends(m["found"]))) for m in report["miswired"])
    assert found == sorted([
        ("ports", sorted({(guid(A), 33), (guid(B), 39)})),  # moved to a free port of the same switch
        ("ports", sorted({(guid(A), 25), (guid(s26), p26)})),  # the two swapped cables
        ("ports", sorted({(guid(A), 26), (guid(s25), p25)})),
        ("remote", sorted({(guid(A), 1), (guid(CA2), 1)})),  # the CA on another switch
    ])  # fmt: skip
    (wrong,) = [m for m in report["miswired"] if m["kind"] == "remote"]
    assert ends(wrong["expected"]) == {(guid(CA2), 1), (guid(leaf), 1)}
    (slow,) = report["below_reference"]
    assert slow["what"] == ["speed HDR → EDR"] and guid(A) in (slow["link"]["a"][0], slow["link"]["b"][0])
    (gone,) = report["missing_nodes"]
    assert gone["guid"] == guid(CA) and gone["name"] == "fit101 HCA-1" and gone["type"] == "ca"
    assert any(guid(CA) in (m["a"][0], m["b"][0]) for m in report["missing_links"])

    # the other way round: what was missing is extra
    back = compare(snap(edited, tmp_path, "a.txt"), snap(original, tmp_path, "b.txt"))
    assert back["counts"]["extra_links"] == 2 and back["counts"]["extra_nodes"] == 1
    assert back["counts"]["miswired"] == 4 and back["counts"]["below_reference"] == 0


def _cables(text: str, node: str) -> list[tuple[int, str, int]]:
    out, current = [], None
    for line in text.splitlines():
        if m := _NODE.match(line):
            current = m.group(2)
        elif (m := _LINK.match(line)) and current == node:
            out.append((int(m.group(1)), m.group(4), int(m.group(5))))
    return out


@pytest.mark.django_db
def test_reference_page_json_and_events(original, tmp_path, client_for):
    from accounts.models import AuditEntry
    from events.models import Event
    from fabric.models import Fabric
    from fabric.services.ingest import import_topology_text
    from fabric.services.reference import compare_after_discovery

    admin, viewer = client_for("admin"), client_for("viewer")
    discovery = import_topology_text("plan", original, filename="plan.txt")
    fabric = Fabric.objects.get(pk=discovery.fabric_id)
    url = f"/fabric/{fabric.pk}/compare/"
    assert "No reference" in viewer.get(url).content.decode()
    # nothing to replace yet: the Admin's forms have no "replace the reference" box
    assert "replace the reference" not in admin.get(url).content.decode()
    # a Viewer cannot set it; an Admin sets the latest discovery, the first one needing no confirm
    assert viewer.post(url, {"op": "discovery", "confirm": "1"}).status_code == 403
    assert admin.post(url, {"op": "discovery"}).status_code == 302
    assert AuditEntry.objects.filter(action="topology.reference_set").count() == 1
    # replacing it does: the page now has the box, and without it nothing changes (400, the reason)
    assert admin.get(url).content.decode().count("replace the reference") == 2
    refused = admin.post(url, {"op": "discovery"})
    assert refused.status_code == 400
    assert "Confirm replacing the reference (tick the box)." in refused.content.decode()
    refused = admin.post(url, {"op": "file", "file": _upload(tmp_path, "plan2.txt", original)})
    assert refused.status_code == 400 and "Confirm replacing" in refused.content.decode()
    assert AuditEntry.objects.filter(action="topology.reference_set").count() == 1
    assert "plan2.txt" not in viewer.get(url).content.decode()
    assert admin.post(url, {"op": "discovery", "confirm": "1"}).status_code == 302
    assert AuditEntry.objects.filter(action="topology.reference_set").count() == 2
    # turning the events on or off still needs the box (a change to a reference in force)
    assert admin.post(url, {"op": "events", "raise_events": "1"}).status_code == 400
    data = viewer.get(f"/api/fabric/fabrics/{fabric.pk}/compare/").json()
    assert data["matches"] and data["reference"]["links"] > 700
    # the time it was set as the other pages show times: "Y-m-d H:i:s" and the zone (TIME_ZONE UTC)
    from django.utils import timezone

    set_at = timezone.localtime(datetime.fromisoformat(data["reference"]["set"]))
    page = viewer.get(url).content.decode()
    assert (
        f'set <time datetime="{set_at.isoformat()}" id="compare-set-at">{set_at:%Y-%m-%d %H:%M:%S} UTC</time>'
        in page
    )

    # the fabric is rediscovered with a cable pulled: the page, the JSON and (events on) an event
    edited = edit(original, lambda n, p, r, rp: "drop" if (n, p) == (A, 24) or (r, rp) == (A, 24) else None)
    assert admin.post(url, {"op": "events", "raise_events": "1", "confirm": "1"}).status_code == 302
    import_topology_text("plan", edited, filename="now.txt")
    assert compare_after_discovery(fabric.pk)["missing_links"] == 1
    event = Event.objects.get(code="topology.mismatch")
    assert "1 missing links" in event.message
    assert compare_after_discovery(fabric.pk)["missing_links"] == 1
    assert Event.objects.filter(code="topology.mismatch").count() == 1  # same differences: no new event
    html = viewer.get(url).content.decode()
    assert 'id="compare-missing_links"' in html and "[24]" in html
    data = viewer.get(f"/api/fabric/fabrics/{fabric.pk}/compare/").json()
    assert data["counts"]["missing_links"] == 1 and not data["matches"]

    # a file as the reference: a bad file is a located 400, nothing changed
    bad = admin.post(
        url, {"op": "file", "confirm": "1", "file": _upload(tmp_path, "bad.txt", "not a topology\n")}
    )
    assert bad.status_code == 400 and "bad.txt" in bad.content.decode()
    assert (
        admin.post(
            url, {"op": "file", "confirm": "1", "file": _upload(tmp_path, "now.txt", edited)}
        ).status_code
        == 302
    )
    assert viewer.get(f"/api/fabric/fabrics/{fabric.pk}/compare/").json()["matches"]


def _upload(tmp_path: Path, name: str, text: str):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, text.encode(), content_type="text/plain")


@pytest.mark.django_db(transaction=True)
def test_a_committed_discovery_queues_the_compare_when_events_are_on(original, monkeypatch):
    """``fabric.receivers.compare_with_reference``: after a discovery commits, the compare task runs
    (eagerly here) and raises ``topology.mismatch``; with events off nothing is compared."""
    from events.models import Event
    from fabric.models import Fabric
    from fabric.services.ingest import import_topology_text
    from fabric.services.reference import set_raise_events, set_reference_from_text
    from weft.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", True)
    fabric = Fabric.objects.get(pk=import_topology_text("f", original, filename="f.txt").fabric_id)
    set_reference_from_text(fabric, original, "plan.txt")
    pulled = edit(original, lambda n, p, r, rp: "drop" if (n, p) == (A, 24) or (r, rp) == (A, 24) else None)
    import_topology_text("f", pulled, filename="now.txt")
    assert not Event.objects.filter(code__startswith="topology.m").exists()  # events off
    set_raise_events(fabric, True)
    import_topology_text("f", original, filename="back.txt")  # matches: nothing to say yet
    import_topology_text("f", pulled, filename="again.txt")
    (event,) = Event.objects.filter(code="topology.mismatch")
    assert event.details["missing_links"] == 1 and "plan.txt" in event.message
    import_topology_text("f", original, filename="fixed.txt")
    assert Event.objects.filter(code="topology.matches").count() == 1


@pytest.mark.django_db
def test_compare_index_lists_fabrics_or_goes_to_the_only_one(original, viewer):
    from fabric.services.ingest import import_topology_text
    from fabric.services.reference import set_reference_from_text

    one = import_topology_text("one", original, filename="one.txt").fabric
    response = viewer.get("/fabric/compare/")
    assert response.status_code == 302 and response["Location"] == f"/fabric/{one.pk}/compare/"
    import_topology_text("two", original, filename="two.txt")
    set_reference_from_text(one, original, "plan.txt")
    html = viewer.get("/fabric/compare/").content.decode()
    assert "reference: file plan.txt" in html and "no reference yet" in html
