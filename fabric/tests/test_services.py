"""Ingest service tests: diffs, events, no-write re-ingest, partial ingest, hosts and tiers, and
atomic rejection of bad input. Unit tests run on SQLite; the ``integration`` one on PostgreSQL."""

from __future__ import annotations

import gzip
import re

import pytest
from django.db import connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext

from events.models import Event
from fabric.choices import DiscoveryStatus, PortState, Tier
from fabric.models import Discovery, Fabric, Host, Link, Node, Port
from fabric.parsers import TopologyParseError, parse_ibnetdiscover
from fabric.parsers.ibnetdiscover import derived_guid
from fabric.services.ingest import import_topology_text, ingest_topology, summary
from tests.support.topologies import BASE

pytestmark = pytest.mark.backend  # ingest (synchronous_commit, raw SQL) and bulk writes (COPY, nextval ids)

G = derived_guid


def _ingest(fabric, text, **kw):
    return ingest_topology(fabric, parse_ibnetdiscover(text, "t"), source="file", **kw)


@pytest.fixture
def fabric(db):
    return Fabric.objects.create(name="t")


def test_first_ingest_stores_everything_with_tiers_hosts_and_rates(
    fabric, committed_signals, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        d = _ingest(fabric, BASE)
    assert d.status == DiscoveryStatus.OK
    assert d.counts == {"switches": 3, "cas": 3, "routers": 0, "links": 5, "ports": 10, "warnings": 0}
    assert (Node.objects.count(), Port.objects.count(), Link.objects.count()) == (6, 10, 5)
    assert committed_signals == [(fabric.pk, d.pk)]
    tiers = dict(Node.objects.values_list("description", "tier"))
    assert tiers == {
        "spine-1": Tier.SPINE,
        "leaf-1": Tier.LEAF,
        "leaf-2": Tier.LEAF,
        "host001 mlx5_0": Tier.HOST,
        "host001 mlx5_1": Tier.HOST,
        "host002 mlx5_0": Tier.HOST,
    }
    host = Host.objects.get(fabric=fabric, name="host001")
    assert set(host.nodes.values_list("description", flat=True)) == {"host001 mlx5_0", "host001 mlx5_1"}
    leaf1 = Node.objects.get(node_guid=G("leaf1"))
    assert (leaf1.lid, leaf1.enhanced_port0) == (2, True)
    p = Port.objects.get(node__node_guid=G("h1"), port_num=1)
    assert (p.lid, p.width, p.speed, p.rate_gbps, p.state) == (10, "4x", "HDR", 200.0, PortState.ACTIVE)
    link = Link.objects.get(Q(port_a__node__node_guid=G("h1")) | Q(port_b__node__node_guid=G("h1")))
    assert link.port_a_id < link.port_b_id and link.rate_gbps == 200.0
    # first discovery of an empty fabric: one summary event, not one per object
    assert list(Event.objects.filter(fabric=fabric).values_list("code", "category")) == [
        ("fabric.discovered", "topology")
    ]
    fabric.refresh_from_db()
    assert fabric.last_discovery_id == d.pk
    s = summary(d)
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


def test_unchanged_reingest_writes_no_rows(fabric, committed_signals):
    _ingest(fabric, BASE)
    with CaptureQueriesContext(connection) as ctx:
        d = _ingest(fabric, BASE)
    assert (d.rows_written, d.added, d.removed, d.changed) == (0, 0, 0, 0)
    writes = [q["sql"] for q in ctx.captured_queries if re.match(r"^\s*(INSERT|UPDATE|DELETE)", q["sql"])]
    tables = {re.search(r'(?:INTO|UPDATE|FROM)\s+"?(\w+)"?', sql).group(1) for sql in writes}
    assert tables <= {"fabric_discovery", "fabric_fabric"}, writes
    assert Event.objects.filter(fabric=fabric).count() == 1


def test_changes_become_events_and_diff(fabric, committed_signals):
    _ingest(fabric, BASE)
    changed = (
        BASE.replace('"leaf-1" enhanced port 0 lid 2', '"leaf-1" enhanced port 0 lid 20')
        .replace("lid 11 lmc 0", "lid 31 lmc 0")
        .replace('"host002 mlx5_0" lid 12 4xHDR', '"host002 mlx5_0" lid 12 4xEDR')
        .replace('lid 12 lmc 0 "leaf-2" lid 3 4xHDR', 'lid 12 lmc 0 "leaf-2" lid 3 4xEDR')
        .replace('Switch 8 "spine" # "spine-1"', 'Switch 8 "spine" # "spine-A"')
    )
    d = _ingest(fabric, changed)
    codes = sorted(
        Event.objects.filter(fabric=fabric)
        .exclude(code="fabric.discovered")
        .values_list("code", "object_key")
    )
    h3_link = f"{min(G('h3'), G('leaf2'))}/1-{max(G('h3'), G('leaf2'))}/1"
    assert codes == sorted(
        [
            ("node.lid_changed", G("leaf1")),
            ("node.description_changed", G("spine")),
            ("port.lid_changed", f"{G('h2')}/1"),
            ("link.degraded", h3_link),
        ]
    )
    assert Node.objects.get(node_guid=G("leaf1")).lid == 20
    assert set(Port.objects.filter(node__node_guid=G("leaf1")).values_list("lid", flat=True)) == {20}
    link = Link.objects.get(
        port_a__node__node_guid__in=[G("h3"), G("leaf2")], port_b__node__node_guid__in=[G("h3"), G("leaf2")]
    )
    assert (link.speed, link.rate_gbps) == ("EDR", 100.0)
    assert d.removed == 0 and d.added == 0
    assert {c["key"] for c in d.diff["changed"]["nodes"]} == {G("leaf1"), G("spine")}
    # back to HDR: link.up (clears the degraded alarm), not link.degraded
    d2 = _ingest(fabric, BASE)
    assert Event.objects.filter(fabric=fabric, code="link.up", object_key=h3_link).count() == 1
    assert d2.changed > 0


def test_removed_and_added_nodes_and_links(fabric, committed_signals):
    _ingest(fabric, BASE)
    without_h3 = BASE.replace('[1] "h3"[1] # "host002 mlx5_0" lid 12 4xHDR\n', "")
    without_h3 = without_h3[: without_h3.index('Hca 1 "h3"')]
    d = _ingest(fabric, without_h3)
    assert d.diff["removed"]["nodes"] == [G("h3")]
    assert len(d.diff["removed"]["links"]) == 1
    assert not Node.objects.filter(node_guid=G("h3")).exists()
    assert Link.objects.count() == 4
    assert set(Event.objects.filter(fabric=fabric).values_list("code", flat=True)) >= {
        "node.removed",
        "link.down",
    }
    # leaf2's port 1 lost its link: kept, Down
    assert Port.objects.get(node__node_guid=G("leaf2"), port_num=1).state == PortState.DOWN
    d = _ingest(fabric, BASE)
    assert d.diff["added"]["nodes"] == [G("h3")] and d.added == 2
    assert Event.objects.filter(fabric=fabric, code="node.added", object_key=G("h3")).exists()


def test_partial_ingest_never_deletes(fabric, committed_signals):
    _ingest(fabric, BASE)
    only_leaf1 = (
        BASE[: BASE.index('Switch 8 "leaf2"')] + BASE[BASE.index('Hca 1 "h1"') : BASE.index('Hca 1 "h3"')]
    )
    d = _ingest(fabric, only_leaf1, partial=True)
    assert d.status == DiscoveryStatus.PARTIAL and d.removed == 0
    assert Node.objects.count() == 6 and Link.objects.count() == 5
    d = _ingest(fabric, only_leaf1)
    assert d.removed > 0 and Node.objects.count() == 4


def test_cable_moved_to_another_port(fabric, committed_signals):
    _ingest(fabric, BASE)
    moved = BASE.replace('[1] "h3"[1]', '[4] "h3"[1]').replace('"leaf2"[1] # lid 12', '"leaf2"[4] # lid 12')
    d = _ingest(fabric, moved)
    assert d.added == 1 and d.removed == 1
    assert Link.objects.count() == 5


def test_import_rejects_junk_before_touching_the_database(fabric, committed_signals):
    _ingest(fabric, BASE)
    before = (Node.objects.count(), Link.objects.count(), Discovery.objects.count(), Event.objects.count())
    with pytest.raises(TopologyParseError) as info:
        import_topology_text("t", "\x89PNG\r\n\x1a\n\x00\x00binary junk", filename="x.png")
    assert str(info.value).startswith("x.png:1: ")
    with pytest.raises(TopologyParseError):
        import_topology_text("brand-new", "nothing here", filename="n.txt")
    assert not Fabric.objects.filter(name="brand-new").exists()
    assert (
        Node.objects.count(),
        Link.objects.count(),
        Discovery.objects.count(),
        Event.objects.count(),
    ) == before


def test_import_creates_a_fabric_not_live(db, committed_signals):
    d = import_topology_text("imp", BASE, filename="base.topo")
    f = Fabric.objects.get(name="imp")
    assert (f.discovery_enabled, f.polling_enabled) == (False, False)
    assert d.filename == "base.topo" and d.source == "file"
    with pytest.raises(Fabric.DoesNotExist):
        import_topology_text("nope", BASE, filename="b", create=False)


def test_warnings_are_stored_with_lines(db, committed_signals):
    text = BASE.replace("lid 11 lmc 0", "lid 65535 lmc 0") + "\nstray shell prompt $\n"
    d = import_topology_text("w", text, filename="w.topo")
    lines = text.splitlines()
    for w in d.warnings:
        assert 1 <= w["line"] <= len(lines)
    assert any("65535" in w["message"] for w in d.warnings)
    assert any("stray" in w["message"] for w in d.warnings)
    # one warning per defect, each at the line (1-based) that has it, found in the text itself
    permissive = next(n for n, line in enumerate(lines, 1) if "lid 65535" in line)
    stray = lines.index("stray shell prompt $") + 1
    by_line = {w["line"]: w["message"] for w in d.warnings}
    assert len(d.warnings) == 2 and set(by_line) == {permissive, stray}
    assert "65535" in by_line[permissive] and "stray shell prompt" in by_line[stray]
    assert d.counts["warnings"] == 2
    assert Port.objects.get(node__node_guid=G("h2"), port_num=1).lid is None


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_selene_ingest_and_noop_reingest_on_postgresql(realdata, committed_signals):
    text = gzip.decompress(
        (realdata / "ibnetdiscover" / "selene_compute.ibnetdiscover.txt.gz").read_bytes()
    ).decode()
    d = import_topology_text("selene", text, filename="selene")
    assert connection.vendor == "postgresql"
    f = Fabric.objects.get(name="selene")
    assert Node.objects.filter(fabric=f).count() == d.counts["switches"] + d.counts["cas"]
    assert Link.objects.filter(fabric=f).count() == d.counts["links"]
    assert d.counts["switches"] == len(re.findall(r"^Switch\s", text, re.M))
    again = import_topology_text("selene", text, filename="selene")
    assert again.rows_written == 0 and again.changed == 0


@pytest.mark.parametrize(
    "relpath",
    [
        "ibnetdiscover_ports/treydock_test.out",
        "opensm_subnet_lst/ibutils_subnet.lst",
        "ibsim_net/qnib_netlist.clos5",
    ],
)
def test_other_formats_import(realdata, relpath, db, committed_signals):
    from fabric.parsers import detect_and_parse

    text = (realdata / relpath).read_text()
    parsed = detect_and_parse(text, relpath)
    d = import_topology_text("fmt", text, filename=relpath)
    f = Fabric.objects.get(name="fmt")
    assert Node.objects.filter(fabric=f).count() == len(parsed.nodes) > 0
    assert Link.objects.filter(fabric=f).count() == len(parsed.links) == d.counts["links"]
    assert Port.objects.filter(node__fabric=f).count() == len(parsed.ports)
    again = import_topology_text("fmt", text, filename=relpath)
    assert again.rows_written == 0
