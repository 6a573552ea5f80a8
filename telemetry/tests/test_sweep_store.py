"""The sweep's read plan cache and its row formatting (SQLite; collector replaced by known reads)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fabric.models import Fabric
from fabric.services.ingest import import_topology_text
from telemetry import semantics
from telemetry.collectors.counters import Collected, PortRead
from telemetry.models import PortCounters
from telemetry.services.sweep import run as sweep_mod
from telemetry.services.sweep import store, targets
from tests.support.topologies import BASE

pytestmark = pytest.mark.backend  # the sweep store: COPY into a staging table on PostgreSQL

# the same fabric after an SM restart handed out other LIDs (same nodes, ports, links)
RELIDDED = BASE.replace("lid 10 ", "lid 20 ").replace("lid 11 ", "lid 21 ").replace("lid 12 ", "lid 22 ")


def _collector(seen: list):
    def collect(reqs, **kw):
        seen.append(sorted({r[1] for r in reqs if r[0] == "Q"}))
        zero = (0,) * len(semantics.ALL_COUNTERS)
        return Collected(
            {(r[1], r[2]): PortRead(r[1], r[2], True, zero) for r in reqs if r[0] == "Q"}, {}, "mad", 0.01
        )

    return collect


@pytest.mark.django_db
def test_rediscovery_with_new_lids_is_read_at_the_new_lids_even_through_a_stale_fabric_object(monkeypatch):
    assert RELIDDED != BASE
    fabric = import_topology_text("f", BASE, filename="base.topo").fabric
    seen: list = []
    monkeypatch.setattr(sweep_mod, "run_madpoll", _collector(seen))
    sweep_mod.poll_fabric(fabric)
    assert seen[-1] == [2, 3, 10, 11, 12]
    # rediscovered: same ports and port count, other LIDs; ``fabric`` (as a long-lived caller or
    # a bench holds it) still names the old discovery
    import_topology_text("f", RELIDDED, filename="base.topo", replace=True)
    assert Fabric.objects.get(pk=fabric.pk).last_discovery_id != fabric.last_discovery_id
    sweep_mod.poll_fabric(fabric)
    assert seen[-1] == [2, 3, 20, 21, 22]
    fresh = PortCounters.objects.filter(port__node__fabric=fabric, port__lid__in=[20, 21, 22], stale=False)
    assert fresh.count() == 3


@pytest.mark.django_db
def test_a_fabric_without_discovery_is_planned_again_every_sweep(monkeypatch):
    """Ports written by hand (no discovery to key the cache by): the next sweep sees a new port."""
    from fabric.models import Node, Port

    fabric = Fabric.objects.create(name="hand")
    node = Node.objects.create(fabric=fabric, node_guid="0x0000000000000005", node_type="ca", description="h")
    Port.objects.create(node=node, port_num=1, lid=5, rate_gbps=32.0)
    seen: list = []
    monkeypatch.setattr(sweep_mod, "run_madpoll", _collector(seen))
    sweep_mod.poll_fabric(fabric)
    Port.objects.filter(node=node).update(lid=6)
    sweep_mod.poll_fabric(fabric)
    assert seen == [[5], [6]]


def test_binary_copy_of_the_fast_path_equals_that_of_derived():
    """A fast-path row (``semantics.derive_fast``'s tuple, one ``struct`` pack) is the binary COPY
    row of the same Derived (encoded field by field), and that row decodes to the values."""
    import struct

    at = datetime(2026, 1, 1, tzinfo=UTC)
    raw = tuple(range(16))
    for fast in ((1.5, 2.0, 3.0, 4.0, 5.0, None, 0.25), (0.1, 1e-07, 0.0, 3.0, 2.5, 0.000125, 1.0)):
        d = semantics.Derived(*fast, error_deltas={}, saturated=[], reset=False)
        a = store.copy_binary(7, [(1, raw, True, at, fast, [], False, False, "")])
        b = store.copy_binary(7, [(1, raw, True, at, d, [], False, False, "")])
        assert a == b
        assert a.startswith(b"PGCOPY\n\xff\r\n\x00") and a.endswith(b"\xff\xff")
        (by,) = _decode_copy(a)
        assert struct.unpack(">q", by["port_id"])[0] == 1 and struct.unpack(">q", by["sweep_id"])[0] == 7
        # 2026-01-01 is 9,497 days after PostgreSQL's epoch 2000-01-01
        assert struct.unpack(">q", by["sampled_at"])[0] == 9497 * 86400 * 10**6
        assert [struct.unpack(">q", by[c])[0] for c in semantics.ALL_COUNTERS] == list(raw)
        derived = [None if by[c] is None else struct.unpack(">d", by[c])[0] for c in semantics.DERIVED_FIELDS]
        assert derived == list(fast)
        assert (by["extended"], by["error_deltas"], by["saturated"]) == (b"\x01", b"\x01{}", b"\x01[]")
        assert (by["reset"], by["stale"], by["stale_reason"]) == (b"\x00", b"\x00", b"")


def test_binary_copy_of_a_stale_row_and_of_one_with_deltas():
    """The general rows: NULL derived values and counters of a never-read port, JSON deltas."""
    d = semantics.Derived(1.0, 2.0, None, None, None, None, None, error_deltas={"symbol_errors": 2})
    d.saturated = ["xmit_pkts"]
    rows = [
        (1, (None,) * 16, False, None, None, [], False, True, "LID 4 port 1: timeout"),
        (2, tuple(range(16)), False, datetime(2026, 1, 1, tzinfo=UTC), d, d.saturated, False, False, ""),
    ]
    stale, moved = _decode_copy(store.copy_binary(7, rows))
    assert [stale[c] for c in (*semantics.ALL_COUNTERS, "sampled_at", *semantics.DERIVED_FIELDS)] == [
        None
    ] * 24
    assert (stale["error_deltas"], stale["saturated"], stale["stale"]) == (None, b"\x01[]", b"\x01")
    assert stale["stale_reason"] == b"LID 4 port 1: timeout"
    assert moved["error_deltas"] == b'\x01{"symbol_errors": 2}' and moved["saturated"] == b'\x01["xmit_pkts"]'
    assert [moved[c] is None for c in semantics.DERIVED_FIELDS] == [False, False] + [True] * 5


def _decode_copy(data: bytes) -> list[dict]:
    """The rows of binary COPY data as ``{column: field bytes or None}``."""
    import struct

    assert data.startswith(b"PGCOPY\n\xff\r\n\x00" + bytes(8)) and data.endswith(b"\xff\xff")
    rows, pos, end = [], 19, len(data) - 2
    while pos < end:
        (count,) = struct.unpack_from(">h", data, pos)
        assert count == len(store.COLUMNS)
        pos += 2
        fields = []
        for _ in range(count):
            (size,) = struct.unpack_from(">i", data, pos)
            pos += 4
            fields.append(None if size < 0 else data[pos : pos + size])
            pos += max(size, 0)
        rows.append(dict(zip(store.COLUMNS, fields, strict=True)))
    assert pos == end
    return rows


@pytest.mark.django_db
def test_requests_ask_one_mad_per_port_only_where_capmask2_has_addl_port_counters_extended():
    import time

    from telemetry.collectors import madpoll

    fabric = import_topology_text("f", BASE, filename="base.topo").fabric
    key = targets.identity(fabric)
    later = time.monotonic() + 60
    targets._capmasks[(key[:2], 10)] = (0x1200 | madpoll.CAP_ADDL_EXT, later)  # ConnectX-like
    targets._capmasks[(key[:2], 11)] = (0x1200, later)  # ibsim 0.10: CapMask2 0
    targets._capmasks[(key[:2], 12)] = (0x1000, later)  # no ExtendedWidth: 32-bit only
    modes = {
        r[1]: r[3]
        for r in targets.requests_for(fabric, targets.fabric_targets(fabric), "auto")
        if r[0] == "Q"
    }
    assert (modes[10], modes[11], modes[12]) == (2, 1, 0)
    assert {
        r[1] for r in targets.requests_for(fabric, targets.fabric_targets(fabric), "auto") if r[0] == "N"
    } == {
        2,
        3,
    }
    never = targets.requests_for(fabric, targets.fabric_targets(fabric), "never")
    assert {r[3] for r in never if r[0] == "Q"} == {0}
