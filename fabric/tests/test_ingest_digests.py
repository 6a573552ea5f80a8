"""Per-node digests in the ingest (issue 16): an unchanged rediscovery reads no port or link row, a
changed one reads and writes only the nodes whose digest differs, and both give exactly the events,
diffs and rows of a full diff. Unit tests on SQLite."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from events.models import Event
from fabric.models import Discovery, Fabric, Host, Link, Node, Port
from fabric.parsers import parse_ibnetdiscover
from fabric.parsers.ibnetdiscover import derived_guid
from fabric.services.ingest import PortObservation, apply_port_states, columns, ingest_topology
from fabric.services.ingest import hosts as ingest_hosts
from fabric.services.ingest import plan as ingest_plan
from fabric.services.names import label_topology
from tests.support.ingest_rows import CABLE_DOWN, snapshot
from tests.support.topologies import BASE

pytestmark = pytest.mark.backend  # ingest's raw SQL (digest UPDATEs, cursor fetches) and its query counts

G = derived_guid

CHANGED = (
    BASE.replace('"leaf-1" enhanced port 0 lid 2', '"leaf-1" enhanced port 0 lid 20')
    .replace("lid 11 lmc 0", "lid 31 lmc 0")
    .replace('"host002 mlx5_0" lid 12 4xHDR', '"host002 mlx5_0" lid 12 4xEDR')
    .replace('lid 12 lmc 0 "leaf-2" lid 3 4xHDR', 'lid 12 lmc 0 "leaf-2" lid 3 4xEDR')
    .replace('Switch 8 "spine" # "spine-1"', 'Switch 8 "spine" # "spine-A"')
)
MOVED = BASE.replace('[1] "h3"[1]', '[4] "h3"[1]').replace('"leaf2"[1] # lid 12', '"leaf2"[4] # lid 12')
WITHOUT_H3 = BASE.replace('[1] "h3"[1] # "host002 mlx5_0" lid 12 4xHDR\n', "")
WITHOUT_H3 = WITHOUT_H3[: WITHOUT_H3.index('Hca 1 "h3"')]
RENAMED_HOST = BASE.replace('"host002 mlx5_0"', '"host009 mlx5_0"')


def _ingest(fabric, text, **kw):
    return ingest_topology(fabric, parse_ibnetdiscover(text, "t"), source="file", **kw)


def _outcome(d: Discovery) -> tuple:
    """What a discovery did, with the fabric's own name blanked (the two fabrics differ by it)."""
    name = d.fabric.name
    events = sorted(
        tuple(v.replace(name, "F") for v in row)
        for row in Event.objects.filter(fabric=d.fabric, at__gte=d.started).values_list(
            "code", "object_key", "message"
        )
    )
    diff = {
        k: {kk: sorted(map(str, vv)) for kk, vv in v.items()} if isinstance(v, dict) else v
        for k, v in d.diff.items()
    }
    return d.status, d.rows_written, d.added, d.removed, d.changed, diff, events


@pytest.mark.parametrize(
    "steps",
    [
        [CHANGED, BASE],
        [CABLE_DOWN, BASE],
        [MOVED, BASE],
        [WITHOUT_H3, BASE],
        [RENAMED_HOST, BASE],
        [CABLE_DOWN, MOVED, WITHOUT_H3, CHANGED, BASE, BASE],
    ],
    ids=["changed", "cable-down", "moved", "node-gone", "host-renamed", "sequence"],
)
def test_scoped_diff_gives_the_full_diffs_events_and_rows(db, committed_signals, monkeypatch, steps):
    scoped, full = Fabric.objects.create(name="scoped"), Fabric.objects.create(name="full")
    for text in [BASE, *steps]:
        monkeypatch.setattr(ingest_plan, "FULL_DIFF_SHARE", 1.0)  # diff only the nodes whose digest differs
        a = _ingest(scoped, text)
        monkeypatch.setattr(ingest_plan, "FULL_DIFF_SHARE", -1.0)  # always read and diff everything
        b = _ingest(full, text)
        assert _outcome(a) == _outcome(b)
        assert re.fullmatch(r"[0-9a-f]{16}", a.digest)
        assert snapshot(scoped) == snapshot(full)
        # every node's stored digest is that of its rows as a complete ingest of the text leaves them
        for fabric in (scoped, full):
            assert _stored_digests(fabric) == _plan_digests(fabric, text)


def _stored_digests(fabric) -> dict:
    return dict(Node.objects.filter(fabric=fabric).values_list("node_guid", "digest"))


def _plan_digests(fabric, text) -> dict:
    topo = parse_ibnetdiscover(text, "t")
    label_topology(fabric, topo)
    host_ids = dict(Host.objects.filter(fabric=fabric).values_list("name", "id"))
    return ingest_plan.plan_topology(topo, ingest_hosts.host_names(topo), host_ids).digests


def test_unchanged_rediscovery_reads_no_port_or_link_row(db, committed_signals):
    fabric = Fabric.objects.create(name="t")
    first = _ingest(fabric, BASE)
    assert Node.objects.filter(fabric=fabric, digest__isnull=True).count() == 0
    with CaptureQueriesContext(connection) as ctx:
        again = _ingest(fabric, BASE)
    assert again.rows_written == 0 and again.digest == first.digest
    touched = [q["sql"] for q in ctx.captured_queries if re.search(r'"fabric_(port|link)"', q["sql"])]
    assert touched == []


def test_changed_rediscovery_reads_only_the_changed_nodes(db, committed_signals, monkeypatch):
    monkeypatch.setattr(ingest_plan, "FULL_DIFF_SHARE", 1.0)
    fabric = Fabric.objects.create(name="t")
    _ingest(fabric, BASE)
    ids = dict(Node.objects.values_list("node_guid", "id"))
    with CaptureQueriesContext(connection) as ctx:
        d = _ingest(fabric, CABLE_DOWN)  # spine[2] - leaf2[7]: those two nodes only
    assert d.rows_written == 6  # link deleted, two ports Down, link.down + two port.state_changed
    port_reads = [
        q["sql"] for q in ctx.captured_queries if re.match(r'SELECT .* FROM "fabric_port"', q["sql"])
    ]
    assert len(port_reads) == 1
    in_list = re.search(r'"node_id" IN \(([^)]*)\)', port_reads[0]).group(1)
    assert sorted(int(x) for x in in_list.split(",")) == sorted([ids[G("spine")], ids[G("leaf2")]])
    assert d.digest != Discovery.objects.filter(fabric=fabric).order_by("id").first().digest


def test_every_column_is_in_the_digest_and_a_new_column_joins_it(db, monkeypatch):
    topo = parse_ibnetdiscover(BASE, "t")
    hosts = ingest_hosts.host_names(topo)
    plan = ingest_plan.plan_topology(topo, hosts, {"host001": 1, "host002": 2})
    # each stored column of each table moves the digests of the nodes its rows belong to
    for table, owners in (
        (columns.NODE_COLUMNS, set(plan.nodes)),
        (columns.PORT_COLUMNS, {g for g, _ in plan.ports}),
        (columns.LINK_COLUMNS, {end[0] for key in plan.links for end in key}),
    ):
        for column in list(table):
            monkeypatch.setitem(table, column, lambda *args: "another value")
            moved = ingest_plan.plan_topology(topo, hosts, {"host001": 1, "host002": 2}).digests
            monkeypatch.undo()
            assert {g for g in moved if moved[g] != plan.digests[g]} == owners, column
    # a column added to a table (one line) changes every digest: the next discovery diffs everything
    monkeypatch.setitem(columns.NODE_COLUMNS, "display_name", lambda n, tier, host, an: n.description)
    added = ingest_plan.plan_topology(topo, hosts, {"host001": 1, "host002": 2})
    assert all(added.digests[g] != plan.digests[g] for g in plan.digests)
    assert added.nodes[G("leaf1")][-1] == "leaf-1"


def test_notice_refresh_clears_digests_so_the_next_discovery_restores(db, committed_signals):
    fabric = Fabric.objects.create(name="t")
    _ingest(fabric, BASE)
    down = apply_port_states(fabric, {(G("h3"), 1): PortObservation(state=1, phys_state=2)})
    assert down.discovery is not None
    stale = set(Node.objects.filter(fabric=fabric, digest__isnull=True).values_list("node_guid", flat=True))
    assert stale == {G("h3"), G("leaf2")}
    d = _ingest(fabric, BASE)  # the cable is back
    assert d.added == 1 and Link.objects.filter(fabric=fabric).count() == 5
    assert Port.objects.get(node__node_guid=G("h3"), port_num=1).state == 4
    assert not Node.objects.filter(fabric=fabric, digest__isnull=True).exists()


def test_partial_run_clears_the_digests_of_nodes_it_left_as_stored(db, committed_signals):
    fabric = Fabric.objects.create(name="t")
    _ingest(fabric, BASE)
    only_leaf1 = (
        BASE[: BASE.index('Switch 8 "leaf2"')] + BASE[BASE.index('Hca 1 "h1"') : BASE.index('Hca 1 "h3"')]
    )
    _ingest(fabric, only_leaf1, partial=True, unknown_ports={(G("spine"), 2)})
    digests = dict(Node.objects.filter(fabric=fabric).values_list("node_guid", "digest"))
    assert digests[G("spine")] is None  # its port 2 (to leaf2, not reached) was kept as stored
    assert digests[G("leaf1")] is not None
    d = _ingest(fabric, BASE)
    assert d.rows_written > 0 and not Node.objects.filter(fabric=fabric, digest__isnull=True).exists()
    assert _ingest(fabric, BASE).rows_written == 0
