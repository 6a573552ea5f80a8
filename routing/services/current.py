"""The latest routes of a fabric as :class:`~routing.tables.RouteTables`, cached.

``current_routes(fabric)`` is what every reader of routes calls (the API, the health check, the
jobs-on-links computation): it loads the latest snapshot's tables and the stored topology (switch
LIDs and names, CA ports' LIDs, links) and builds the arrays once per (snapshot, topology
discovery); later calls in this process return the same object until either changes (one query
to check). The report of a snapshot (:func:`routing_report_for`) is cached the same way.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from fabric.choices import NodeType
from fabric.models import Fabric, Link, Node, Port

from ..models import RoutingSnapshot
from ..report import routing_report
from ..tables import RouteTables, build_tables

#: Fabrics whose tables are kept in memory (most recently used).
CACHE_SIZE = 8


@dataclass(frozen=True)
class CurrentRoutes:
    """``snapshot`` (the ``RoutingSnapshot`` row), ``tables`` (:class:`RouteTables`), ``key``
    (``(snapshot id, topology discovery id)``: what the cache was built from)."""

    snapshot: RoutingSnapshot
    tables: RouteTables
    key: tuple[int, int | None]


_lock = threading.Lock()
_cache: dict[int, CurrentRoutes] = {}
_reports: dict[tuple[int, int | None], dict[str, Any]] = {}


def latest_snapshot(fabric: Fabric) -> RoutingSnapshot | None:
    """The fabric's latest snapshot row (its stored report not loaded), or None."""
    return RoutingSnapshot.objects.filter(fabric=fabric).defer("report").order_by("-taken", "-pk").first()


def load_tables(fabric: Fabric, snapshot: RoutingSnapshot) -> RouteTables:
    """Build the tables of ``snapshot`` over the fabric's stored topology (4 queries)."""
    lfts = {
        g: (lid, bytes(lft)) for g, lid, lft in snapshot.switch_routes.values_list("node_guid", "lid", "lft")
    }
    switches = []
    for g, name, lid, nports in Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH).values_list(
        "node_guid", "name", "lid", "num_ports"
    ):
        if g in lfts:
            switches.append((g, name, lid or lfts[g][0], lfts[g][1], nports))
    cas = list(
        Port.objects.filter(node__fabric=fabric, node__node_type=NodeType.CA, lid__gt=0)
        .order_by("lid")
        .values_list("node__node_guid", "port_num", "node__name", "lid", "lmc")
    )
    links = list(
        Link.objects.filter(fabric=fabric).values_list(
            "port_a__node__node_guid", "port_a__port_num", "port_b__node__node_guid", "port_b__port_num"
        )
    )
    return build_tables(switches, cas, links)


def current_routes(fabric: Fabric) -> CurrentRoutes | None:
    """The latest routes of ``fabric`` (None before its first snapshot), built once per
    (snapshot, topology discovery) and shared: treat the result as read-only."""
    snap = latest_snapshot(fabric)
    if snap is None:
        return None
    disc = Fabric.objects.filter(pk=fabric.pk).values_list("last_discovery_id", flat=True).first()
    key = (snap.pk, disc)
    with _lock:
        got = _cache.get(fabric.pk)
        if got is not None and got.key == key:
            return got
    built = CurrentRoutes(snap, load_tables(fabric, snap), key)
    with _lock:
        _cache[fabric.pk] = built
        while len(_cache) > CACHE_SIZE:
            _cache.pop(next(iter(_cache)))
    return built


def routing_report_for(fabric: Fabric) -> tuple[RoutingSnapshot, dict[str, Any]] | None:
    """``(latest snapshot, routing_report of its tables)`` for ``fabric``; None before the first
    snapshot. The report is computed once per (snapshot, topology discovery) and stored on the
    snapshot (``report``, ``report_topology``), so the API and the health report of another
    process read it instead of computing it (seconds on a Selene-size fabric); the routes task
    computes it right after a read that stored new tables."""
    snap = latest_snapshot(fabric)
    if snap is None:
        return None
    disc = Fabric.objects.filter(pk=fabric.pk).values_list("last_discovery_id", flat=True).first()
    key = (snap.pk, disc)
    with _lock:
        rep = _reports.get(key)
    if rep is None:
        stored = RoutingSnapshot.objects.filter(pk=snap.pk, report_topology=disc).values_list(
            "report", flat=True
        )
        rep = next(iter(stored), None) or None  # {}: not computed
        if rep is None:
            cur = current_routes(fabric)
            rep = routing_report(cur.tables)
            RoutingSnapshot.objects.filter(pk=snap.pk).update(report=rep, report_topology=disc)
        with _lock:
            _reports[key] = rep
            while len(_reports) > CACHE_SIZE:
                _reports.pop(next(iter(_reports)))
    return snap, rep


def clear_cache() -> None:
    """Forget every cached table and report (tests)."""
    with _lock:
        _cache.clear()
        _reports.clear()
