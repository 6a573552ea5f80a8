"""Ingest a parsed topology into the database: diff against what is stored, write in bulk, record
events and a :class:`~fabric.models.Discovery`, all in one transaction.

Rules (issue 3; event codes from docs/design.md):

* nodes, ports and links are matched by natural key (node GUID; node GUID + port number; the
  unordered pair of ports). New ones are created, changed ones updated (only the changed rows and
  only when a value differs), missing ones deleted.
* a *partial* discovery (some MADs failed) withholds removals only for what it did not reach
  (:class:`Reach`): a stored node it missed that lies behind a port where a MAD failed (through
  stored links) is *unreached*: kept, ``Node.unreachable_since`` set, no ``node.removed``; links
  and ports of unreached nodes and ports behind a failed MAD are left as they are. Everything
  else is applied as in a complete run: a link whose both ends answered and is gone is removed
  (``link.down``), a port that answered and is no longer linked goes Down, and a missed node that
  no failed MAD leads to (its neighbours answered, their ports to it are down) is removed. When
  the run's failures name no route (``unknown_ports`` None), every missed node is unreached.
* a port still on a node but no longer reported (ibnetdiscover lists only linked ports) is kept
  (its counter history hangs on it) with state Down.
* events: ``node.added``/``node.removed``, ``link.up``/``link.down``, ``node.lid_changed`` (switch),
  ``port.lid_changed`` (CA/router port), ``node.description_changed``, ``port.state_changed``,
  ``link.degraded`` (width/speed lower than before; a link whose rate goes back up gets ``link.up``,
  which clears the degraded alarm), ``sm.master_changed`` when the sources report SMs. The first
  discovery of an empty fabric writes one ``fabric.discovered`` event with the counts instead of
  one event per object.
* "An unchanged rediscovery writes no rows": ``Discovery.rows_written`` counts the rows created,
  updated or deleted in the topology tables (hosts, nodes, ports, links, subnet managers) and the
  events; an unchanged re-ingest has ``rows_written == 0``. The Discovery row itself (and
  ``Fabric.last_discovery``) is still recorded: it is the audit trail operators read ("last
  discovered at", duration, warnings) and what proves the periodic task ran.
* ``fabric.signals.discovery_committed(fabric_id, discovery_id)`` is sent on commit.

Digests (issue 16: most discoveries of a healthy fabric change nothing). The parse is turned into
the row values the ingest would write (``_NODE_COLUMNS``/``_PORT_COLUMNS``/``_LINK_COLUMNS``: one
line per stored column) and each node gets a 64-bit digest of its row, its ports' rows and the rows
of the links at its ports (:func:`_plan`), stored in ``Node.digest`` when its rows match; the whole
topology's digest is ``Discovery.digest``. A rediscovery reads the fabric's node digests (one query)
and diffs only the nodes whose digest differs, is missing (cleared by another writer, e.g. a
notice refresh), new or gone (:func:`_scope`): an unchanged one reads no port or link row and writes
no topology row; one switch port down reads and writes that switch's and its peer's rows. Partial
runs, first discoveries and changes to most nodes diff everything, as before. The events, diffs
and rows are those of a full diff (``fabric/tests/test_ingest_digests.py``). Because the digest
covers the written tuple and is salted with the column names, a column added to a table joins it
by construction, and every node is diffed (and the new column filled) on the next discovery.

Same source (issue 16: an unchanged rediscovery at a fraction of the tool's time). Before parsing,
the discovery and import services ask :func:`ingest_unchanged` with :func:`source_digest` of the
text (BLAKE2b of its lines, ``#`` comment lines left out: ibnetdiscover's header carries the date
and the initiating port). When the fabric's latest Discovery is a complete one of the same source
digest and no stored node has its digest cleared (another writer touched its rows since: a notice
refresh, a node-name map) or is marked unreachable, the stored topology is exactly what the text
would give, so a Discovery is recorded (counts and warnings of that earlier one, no rows, the SMs
handed to the SM service) without parsing. The digest is salted with the source of the modules
that turn text into rows (:data:`_PIPELINE_MODULES`), so an upgraded parser or a new column never
takes the shortcut with an old digest.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter, itemgetter
from typing import Any

from django.conf import settings
from django.core.exceptions import EmptyResultSet
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from core.bulk import insert_rows
from core.leases import Fence, check_fence
from events.services import EventSpec, record_events

from .. import rates
from ..choices import DiscoverySource, DiscoveryStatus, NodeType, PortState
from ..keys import LinkKey, link_ends, link_key_str, link_name, port_key, port_name, split_link_key
from ..models import Discovery, Fabric, Host, Link, Node, Port
from ..parsers import detect_and_parse
from ..parsers.records import (
    SWITCH,
    LinkRecord,
    NodeRecord,
    PortRecord,
    Topology,
    TopologyParseError,
    gc_paused,
)
from ..signals import discovery_committed
from . import sm as sm_service
from .derive import aggregation_nodes, derive_tiers, host_for
from .isolation import isolated_keys
from .names import MapUnreadable, label_topology, read_map_path

#: at most this many natural keys per list in ``Discovery.diff`` (the counts are always complete).
DIFF_LIST_LIMIT = 1000
#: at most this many parse warnings stored on the Discovery (the total is in ``counts``).
WARNINGS_LIMIT = 1000
BATCH = 2000
# The columns the ingest writes from a parse, one line each: ``column: how``, where ``how`` is the
# record attribute stored as is (a str) or a function of the record (nodes: of the record, its
# tier, its host id and, for a SHARP Aggregation Node, its switch's GUID, else None). The row tuples (the attribute columns first, then the computed ones, see
# :func:`_row_maker`), the diffs (and the events' field names) and the per-node digests all follow
# these tables, so a new stored column is one line here (plus its model field and migration) and
# joins the digest by construction (:func:`_plan`; the column names salt the digest, so every
# stored digest changes with a table and the first discovery after such a change diffs all).
_NODE_COLUMNS: dict[str, str | Callable[[NodeRecord, int, int | None, str | None], Any]] = {
    "node_type": "node_type",
    "system_image_guid": "system_image_guid",
    "vendor_id": "vendor_id",
    "device_id": "device_id",
    "num_ports": "num_ports",
    "enhanced_port0": "enhanced_port0",
    "description": lambda n, tier, host, an: n.description[:128],
    "name": lambda n, tier, host, an: n.label,
    "lid": lambda n, tier, host, an: n.lid if n.node_type == SWITCH else None,
    "lmc": lambda n, tier, host, an: n.lmc if n.node_type == SWITCH else 0,
    "tier": lambda n, tier, host, an: tier,
    "aggregation_node": lambda n, tier, host, an: an is not None,
    "aggregation_switch_guid": lambda n, tier, host, an: an or "",
    "host_id": lambda n, tier, host, an: host,
}
_PORT_COLUMNS: dict[str, str | Callable[[PortRecord], Any]] = {
    "port_guid": "port_guid",
    "lid": "lid",
    "lmc": "lmc",
    "state": "state",
    "phys_state": "phys_state",
    "width": "width",
    "speed": "speed",
    "rate_gbps": lambda p: _link_rate(p.width, p.speed),
    "label": lambda p: p.label[:32],
}
_LINK_COLUMNS: dict[str, str | Callable[[LinkRecord], Any]] = {
    "width": "width",
    "speed": "speed",
    "rate_gbps": lambda lk: _link_rate(lk.width, lk.speed),
}


def _row_maker(columns: dict[str, str | Callable]) -> tuple[tuple[str, ...], Callable[..., list[tuple]]]:
    """``(column names in row order, rows function)`` of a column table: the attribute columns
    first (one ``attrgetter`` call a record), then the computed ones. ``rows(records, *extra)``
    gives the row tuples of a list of records; ``extra`` are lists parallel to ``records`` (a
    node's tier and host id) passed to the computed columns. Column-wise (``map``) rather than
    a function call per row: this runs for every port of a 5,000-node fabric."""
    plain = [how for how in columns.values() if isinstance(how, str)]
    computed = [how for how in columns.values() if not isinstance(how, str)]
    names = (*(c for c, how in columns.items() if isinstance(how, str)),
             *(c for c, how in columns.items() if not isinstance(how, str)))  # fmt: skip
    get = attrgetter(*plain) if plain else None

    def rows(records: list, *extra: list) -> list[tuple]:
        if len(plain) > 1:
            head = map(get, records)
        else:
            head = ((get(r),) if get else () for r in records)
        if not computed:
            return list(head)
        tail = zip(*[map(f, records, *extra) for f in computed], strict=True)
        return [h + t for h, t in zip(head, tail, strict=True)]

    return names, rows


_NODE_FIELDS = _row_maker(_NODE_COLUMNS)[0]
_PORT_FIELDS = _row_maker(_PORT_COLUMNS)[0]
_LINK_FIELDS = _row_maker(_LINK_COLUMNS)[0]
_STATE = _PORT_FIELDS.index("state")
_PHYS_STATE = _PORT_FIELDS.index("phys_state")


@dataclass
class _Changes:
    events: list[EventSpec] = field(default_factory=list)
    added: dict[str, list] = field(default_factory=lambda: {"nodes": [], "links": []})
    removed: dict[str, list] = field(default_factory=lambda: {"nodes": [], "links": []})
    changed: dict[str, list] = field(default_factory=lambda: {"nodes": [], "ports": [], "links": []})
    rows: int = 0
    initial: bool = False  # first discovery of an empty fabric: no per-object events
    #: nodes whose rows this ingest left differing from the parse (a partial run kept a port or
    #: link, a notice was fresher): their digest is cleared, so the next discovery diffs them
    unsynced: set[str] = field(default_factory=set)
    #: names of the stored nodes this ingest removes (``{guid: Node.name}``): the removed end of a
    #: ``link.down`` is named as admins knew it, not by its GUID
    gone_names: dict[str, str] = field(default_factory=dict)


def _event(code: str, message: str, **kw: Any) -> EventSpec:
    # severity and category: the registered type's (fabric.event_types), set by record_events
    return EventSpec(code=code, message=message, **kw)


#: the modules whose code turns a topology text into stored rows: their source salts
#: :func:`source_digest`, so a changed parser, name rule or column table never matches an old digest
_PIPELINE_MODULES = (
    "fabric.parsers.ibnetdiscover",
    "fabric.parsers.subnet_lst",
    "fabric.parsers.records",
    "fabric.services.derive",
    "fabric.services.names",
    "fabric.services.ingest",
)


@functools.cache
def _pipeline_salt() -> bytes:
    import importlib
    import inspect

    h = hashlib.blake2b(digest_size=16)
    for name in _PIPELINE_MODULES:
        try:
            module = importlib.import_module(name)
            h.update(inspect.getsource(module).encode())
        except (ImportError, OSError, TypeError):  # no source on disk: never match an old digest
            h.update(repr((name, time.time_ns())).encode())
    return h.digest()


def source_digest(text: str, fabric: Fabric | None = None) -> str:
    """Digest (32 hex digits) of a topology text as the ingest sees it: BLAKE2b over every line
    that is not a ``#`` comment line (ibnetdiscover's header carries the date and the initiating
    node and port, neither of which is topology), salted with the ingest pipeline's own source and,
    when ``fabric`` names its nodes from a map file on this server (``node_name_map_path``, read
    at every discovery), that file's bytes; ``""`` (never matches) when that file cannot be read.

    Two texts with the same digest parse to the same rows with the same code and names, so a text
    whose digest equals the last complete discovery's changes nothing (see :func:`ingest_unchanged`).
    About 10 ms for the Selene file.
    """
    h = hashlib.blake2b(_pipeline_salt(), digest_size=16)
    if fabric is not None and fabric.node_name_map_path:
        try:
            h.update(read_map_path(fabric.node_name_map_path).encode())
        except MapUnreadable:
            return ""
    for line in text.splitlines():
        if not line.startswith("#"):
            h.update(line.encode())
            h.update(b"\n")
    return h.hexdigest()


def _became_latest(fabric: Fabric, discovery: Discovery) -> None:
    """Make ``discovery`` the fabric's ``last_discovery`` and send ``discovery_committed`` on
    commit (inside the writer's transaction; every Discovery the topology writers record)."""
    Fabric.objects.filter(pk=fabric.pk).update(last_discovery=discovery)
    transaction.on_commit(
        functools.partial(
            discovery_committed.send, sender=Discovery, fabric_id=fabric.pk, discovery_id=discovery.pk
        )
    )


def ingest_unchanged(
    fabric: Fabric,
    digest: str,
    *,
    source: str,
    filename: str = "",
    started: datetime | None = None,
    events: list[EventSpec] | None = None,
    sms: list | None = None,
) -> Discovery | None:
    """Record a Discovery for a text whose :func:`source_digest` shows nothing changed, without
    parsing it; None when that cannot be shown (then parse and :func:`ingest_topology`).

    The shortcut holds when the fabric's latest Discovery (any source: a notice refresh is one) is
    complete (``ok``) with ``source_digest == digest``, and no stored node has ``digest`` NULL
    (cleared by another writer of its rows since) or ``unreachable_since`` set (a complete run
    clears it). Then the new Discovery (``ok``, ``rows_written`` 0 unless the SMs or ``events``
    wrote, ``diff["same_source"]`` True) copies that one's counts, digest and warnings; ``sms``
    (``SMRecord``s from ``sminfo``) go to the SM service as in a full ingest; ``events`` are
    recorded in the same transaction. Takes the Fabric row lock like :func:`ingest_topology`.
    """
    if not digest:
        return None
    started = started or timezone.now()
    with transaction.atomic():
        locked = Fabric.objects.select_for_update().get(pk=fabric.pk)
        latest = Discovery.objects.filter(fabric=locked).exclude(status=DiscoveryStatus.FAILED).first()
        if latest is None or latest.status != DiscoveryStatus.OK or latest.source_digest != digest:
            return None
        if (
            Node.objects.filter(fabric=locked)
            .filter(Q(digest__isnull=True) | Q(unreachable_since__isnull=False))
            .exists()
        ):
            return None
        ch = _Changes()
        if sms:
            _sync_sms(locked, sms, ch)
        if ch.events or events:
            record_events(locked, [*ch.events, *(events or [])], at=timezone.now())
            ch.rows += len(ch.events)
        empty = {"added": {"nodes": [], "links": []}, "removed": {"nodes": [], "links": []},
                 "changed": {"nodes": [], "ports": [], "links": []}}  # fmt: skip
        discovery = Discovery.objects.create(
            fabric=locked,
            started=started,
            duration_s=round((timezone.now() - started).total_seconds(), 3),
            source=source,
            filename=filename[:255],
            status=DiscoveryStatus.OK,
            counts=latest.counts,
            diff={
                **empty,
                "truncated": False,
                "partial": False,
                "initial": False,
                "unreached": [],
                "same_source": True,
            },  # fmt: skip
            warnings=latest.warnings,
            rows_written=ch.rows,
            digest=latest.digest,
            source_digest=digest,
        )
        _became_latest(locked, discovery)
    return discovery


def ingest_topology(
    fabric: Fabric,
    topology: Topology,
    *,
    source: str,
    filename: str = "",
    partial: bool = False,
    started: datetime | None = None,
    events: list[EventSpec] | None = None,
    max_remove_share: float | None = None,
    unknown_ports: set[tuple[str, int]] | None = None,
    source_digest: str = "",
) -> Discovery:
    """Store ``topology`` as the current state of ``fabric`` and return the new Discovery.

    ``source_digest``: :func:`source_digest` of the text ``topology`` was parsed from, kept on a
    complete Discovery so the next run of the same text can take :func:`ingest_unchanged`.

    ``max_remove_share``: refuse (:class:`ImportWouldRemove`, nothing written) when more than this
    share of the stored nodes or links would be removed (:func:`check_removal`, under the lock).

    ``events``: further events to record in the same transaction (the discovery service's
    ``system.discovery_recovered``), so they commit with the topology they describe.

    ``source`` is a :class:`~fabric.choices.DiscoverySource` value; ``partial`` (or
    ``topology.partial``) marks a discovery that did not reach the whole fabric; ``unknown_ports``
    are the ``(node GUID, port)`` of reached nodes behind which its MADs failed
    (``fabric.collectors.ibnetdiscover.resolve_failed_ports``; None: unknown, every node the run
    missed is kept as unreached). See :class:`Reach` for what a partial run removes.
    ``started`` is when the discovery began (default now); ``duration_s`` runs from there.

    The Discovery carries ``counts`` (switches, cas, routers, links, ports, warnings), ``diff``
    (``{"added": {"nodes", "links"}, "removed": {...}, "changed": {"nodes", "ports", "links"}}``,
    lists of natural keys, each capped at :data:`DIFF_LIST_LIMIT`), ``added``/``removed`` (nodes +
    links) and ``changed`` (nodes + ports + links) totals, the parse ``warnings`` and
    ``rows_written`` (see the module docstring). Runs in one transaction with the Fabric row locked
    (``select_for_update``), so concurrent ingests of one fabric serialise.
    """
    t0 = time.perf_counter()
    started = started or timezone.now()
    partial = partial or topology.partial
    # tens of thousands of row tuples, none garbage: no cyclic GC passes over them (see gc_paused)
    with gc_paused(), transaction.atomic():
        locked = Fabric.objects.select_for_update().get(pk=fabric.pk)
        if max_remove_share is not None and not partial:
            check_removal(locked, topology, max_remove_share)
        if connection.vendor == "postgresql":
            # a discovery can be re-run: do not wait for the WAL flush of tens of thousands of rows
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit TO OFF")
        stored = _stored_nodes(locked)
        initial = not stored
        ch = _Changes(initial=initial)
        reach = Reach.of(locked, topology, partial, unknown_ports, started=started, stored=stored.keys())
        label_topology(locked, topology)  # node.label: the map's name or the trimmed description
        aggregation = aggregation_nodes(topology)
        hosts = _host_names(topology, aggregation)
        host_ids = _sync_hosts(locked, hosts, ch)
        plan = _plan(topology, hosts, host_ids, aggregation)
        scope = _scope(stored, plan, reach, partial)
        if scope is None or scope:
            node_ids = _sync_nodes(locked, topology, plan, stored, scope, reach, ch)
            port_ids = _sync_ports(locked, topology, plan, node_ids, scope, reach, ch)
            _sync_links(locked, topology, plan, port_ids, scope, reach, ch)
        else:  # every digest matches: an unchanged rediscovery reads and writes no topology row
            node_ids = {guid: v[0] for guid, v in stored.items()}
        gone = [guid for guid in node_ids if guid in reach.gone]
        if gone:
            # last, so the links of removed nodes were reported link.down above; cascades ports/links
            Node.objects.filter(fabric=locked, node_guid__in=gone).delete()
            ch.rows += len(gone)
        _store_digests(plan, stored, node_ids, scope, ch)
        ch.rows += _mark_reachability(locked, topology, reach, {g for g, v in stored.items() if v[2]})
        _sync_sms(locked, topology.sms, ch)
        if initial:
            ch.events = []
            counts = topology.counts()
            ch.events.append(
                _event(
                    "fabric.discovered",
                    f"first discovery of {locked.name}: {counts['switches']} switches, {counts['cas']} CAs, "
                    f"{counts['routers']} routers, {counts['links']} links",
                    object_type="fabric",
                    object_key=locked.name,
                    object_repr=locked.name,
                    details=counts,
                )
            )
        if ch.events or events:
            record_events(locked, [*ch.events, *(events or [])], at=timezone.now())
            ch.rows += len(ch.events)  # the topology's own events; the caller's are not topology rows
        counts = topology.counts()
        counts["warnings"] = len(topology.warnings)
        n_added = len(ch.added["nodes"]) + len(ch.added["links"])
        n_removed = len(ch.removed["nodes"]) + len(ch.removed["links"])
        n_changed = sum(len(v) for v in ch.changed.values())
        diff = {
            "added": {k: v[:DIFF_LIST_LIMIT] for k, v in ch.added.items()},
            "removed": {k: v[:DIFF_LIST_LIMIT] for k, v in ch.removed.items()},
            "changed": {k: v[:DIFF_LIST_LIMIT] for k, v in ch.changed.items()},
            "truncated": any(
                len(v) > DIFF_LIST_LIMIT for d in (ch.added, ch.removed, ch.changed) for v in d.values()
            ),
            "partial": partial,
            "initial": initial,
            "unreached": sorted(reach.unreached)[:DIFF_LIST_LIMIT],
        }
        discovery = Discovery.objects.create(
            fabric=locked,
            started=started,
            duration_s=round((timezone.now() - started).total_seconds(), 3)
            if started
            else round(time.perf_counter() - t0, 3),
            source=source,
            filename=filename[:255],
            status=DiscoveryStatus.PARTIAL if partial else DiscoveryStatus.OK,
            counts=counts,
            diff=diff,
            added=n_added,
            removed=n_removed,
            changed=n_changed,
            warnings=[w.as_dict() for w in topology.warnings[:WARNINGS_LIMIT]],
            rows_written=ch.rows,
            digest=plan.digest,
            source_digest="" if partial else source_digest,
        )
        _became_latest(locked, discovery)
    return discovery


@dataclass
class Reach:
    """What a discovery reached, for deciding what it may remove.

    ``gone``: stored nodes it missed that are really off the fabric (removed, ``node.removed``);
    ``unreached``: stored nodes it missed behind a failed MAD (kept, marked unreachable);
    ``unknown_ports``: ``(node GUID, port)`` of reached nodes behind which a MAD failed, None when
    the failures name no route. A complete run has every missed node ``gone``.
    """

    gone: set[str] = field(default_factory=set)
    unreached: set[str] = field(default_factory=set)
    unknown_ports: set[tuple[str, int]] | None = field(default_factory=set)
    #: stored link ends ``(guid, port) -> (peer guid, peer port)``, read for partial runs only
    peers: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    #: ports a targeted refresh (SM notice) saw go Down after this discovery started: newer than
    #: its snapshot, so their state and links stay as stored
    fresher: set[tuple[str, int]] = field(default_factory=set)

    @classmethod
    def of(
        cls,
        fabric: Fabric,
        topo: Topology,
        partial: bool,
        unknown_ports: set[tuple[str, int]] | None,
        started: datetime | None = None,
        stored: Collection[str] | None = None,
    ) -> Reach:
        """Compute the reach of ``topo`` against the stored fabric (one query per table).

        Complete run: every stored node not in ``topo`` is gone. Partial run: the stored nodes it
        missed that can be reached, through stored links over missed nodes only, from a port in
        ``unknown_ports`` are unreached, the other missed nodes gone (every way to them ends at
        a port that answered without a link); with ``unknown_ports`` None every missed node is
        unreached. ``started``: when the discovery's snapshot began; ports written by a notice
        refresh (Discovery of source ``notice``) since then are :attr:`fresher`. ``stored``: the
        stored node GUIDs when the caller has read them (else read here).
        """
        if stored is None:
            stored = Node.objects.filter(fabric=fabric).values_list("node_guid", flat=True)
        missed = set(stored) - topo.nodes.keys()
        fresher = _fresher_ports(fabric, started) if started is not None else set()
        if not partial:
            return cls(gone=missed, fresher=fresher)
        reach = cls(unknown_ports=None if unknown_ports is None else set(unknown_ports), fresher=fresher)
        rows = Link.objects.filter(fabric=fabric).values_list(
            "port_a__node__node_guid", "port_a__port_num", "port_b__node__node_guid", "port_b__port_num"
        )
        for ga, pa, gb, pb in _fetch(rows):
            reach.peers[(ga, pa)] = (gb, pb)
            reach.peers[(gb, pb)] = (ga, pa)
        if reach.unknown_ports is None:
            reach.unreached = missed
            return reach
        adjacent: dict[str, set[str]] = {}
        for (ga, _), (gb, _) in reach.peers.items():
            adjacent.setdefault(ga, set()).add(gb)
        todo = [reach.peers[p][0] for p in reach.unknown_ports if p in reach.peers]
        seen: set[str] = set()
        while todo:
            guid = todo.pop()
            if guid in seen or guid not in missed:
                continue
            seen.add(guid)
            todo.extend(adjacent.get(guid, ()))
        reach.unreached = seen
        reach.gone = missed - seen
        return reach

    def keeps_port(self, key: tuple[str, int]) -> bool:
        """True when a reached node's port missing from the run may still be linked (a MAD failed
        behind it, or its stored peer was not reached), or a notice refresh wrote it after the run
        began: its state is left as stored."""
        if key in self.fresher or (self.unknown_ports and key in self.unknown_ports):
            return True
        peer = self.peers.get(key)
        return peer is not None and peer[0] in self.unreached

    def keeps_link(self, key: LinkKey) -> bool:
        """True when a stored link missing from the run must be kept: an end is unreached, lies
        behind a failed MAD, or was refreshed after the run began. Links whose both ends answered
        are applied."""
        return any(
            end[0] in self.unreached
            or end in self.fresher
            or (self.unknown_ports is not None and end in self.unknown_ports)
            for end in key
        )


def _fresher_ports(fabric: Fabric, since: datetime) -> set[tuple[str, int]]:
    """``(node GUID, port)`` of the ports a notice refresh saw go Down (or lose their link) since
    ``since``, from the diffs of the Discoveries of source ``notice``. (A port it saw come up
    does not contradict an older snapshot that has its link: not included.)"""
    out: set[tuple[str, int]] = set()
    diffs = Discovery.objects.filter(fabric=fabric, source=DiscoverySource.NOTICE, started__gte=since)
    for diff in diffs.values_list("diff", flat=True):
        for change in (diff or {}).get("changed", {}).get("ports", []):
            if change.get("fields", {}).get("state", [None, None])[1] != PortState.DOWN:
                continue
            guid, _, num = change["key"].rpartition("/")
            out.add((guid, int(num)))
        for key in (diff or {}).get("removed", {}).get("links", []):
            out.update(split_link_key(key))
    return out


def _stored_nodes(fabric: Fabric) -> dict[str, tuple[int, int | None, bool]]:
    """The fabric's stored nodes in one query: GUID → (id, digest, unreachable)."""
    rows = Node.objects.filter(fabric=fabric).values_list("node_guid", "id", "digest", "unreachable_since")
    return {guid: (node_id, digest, since is not None) for guid, node_id, digest, since in _fetch(rows)}


def _mark_reachability(fabric: Fabric, topo: Topology, reach: Reach, marked: set[str]) -> int:
    """Set ``unreachable_since`` on the unreached nodes (kept if already set) and clear it on the
    nodes the run reached (``marked``: the stored nodes that had it set). Returns rows written
    (0 when nothing changed)."""
    rows = 0
    if reach.unreached:
        rows += Node.objects.filter(
            fabric=fabric, node_guid__in=reach.unreached, unreachable_since__isnull=True
        ).update(unreachable_since=timezone.now())
    back = [g for g in marked if g in topo.nodes]
    if back:
        rows += Node.objects.filter(fabric=fabric, node_guid__in=back).update(unreachable_since=None)
    return rows


def _host_names(topo: Topology, aggregation: dict[str, str] | None = None) -> dict[str, str]:
    """Node GUID → host name, for the CAs and routers whose NodeDescription names a host (never a
    SHARP Aggregation Node: ``aggregation``, :func:`~fabric.services.derive.aggregation_nodes`,
    computed when None)."""
    if aggregation is None:
        aggregation = aggregation_nodes(topo)
    out = {}
    for guid, node in topo.nodes.items():
        if node.node_type != SWITCH and guid not in aggregation:
            name = host_for(node.node_type, node.description, node.label)
            if name:
                out[guid] = name
    return out


def _sync_hosts(fabric: Fabric, hosts: dict[str, str], ch: _Changes) -> dict[str, int]:
    """Create the hosts named in ``hosts`` (values) that are not stored; returns name → id of all."""
    wanted = set(hosts.values())
    stored = dict(_fetch(Host.objects.filter(fabric=fabric).values_list("name", "id")))
    missing = [(fabric.pk, n) for n in sorted(wanted - stored.keys())]
    if missing:
        new_ids = insert_rows(Host, ["fabric_id", "name"], missing, with_ids=True)
        ch.rows += len(missing)
        if new_ids is not None:
            stored.update(zip((n for _, n in missing), new_ids, strict=True))
        else:
            stored = dict(_fetch(Host.objects.filter(fabric=fabric).values_list("name", "id")))
    return stored


@dataclass
class _Plan:
    """The rows a complete ingest of a topology leaves, from the parse (and the fabric's host ids).

    ``nodes``/``ports``/``links``: natural key → row values in the column order of
    ``_NODE_COLUMNS``/``_PORT_COLUMNS``/``_LINK_COLUMNS``; ``digests``: node GUID → signed 64-bit
    digest of that node's rows (see :func:`_plan`); ``digest``: 16 hex digits over all of them.
    """

    nodes: dict[str, tuple]
    ports: dict[tuple[str, int], tuple]
    links: dict[LinkKey, tuple]
    digests: dict[str, int]
    digest: str


_first = itemgetter(0)


def _plan(
    topo: Topology, hosts: dict[str, str], host_ids: dict[str, int], aggregation: dict[str, str] | None = None
) -> _Plan:
    """Row values of every node, port and link of ``topo``, and the per-node digests.

    A node's digest is BLAKE2b (8 bytes) of the ``repr`` of its row tuple, its ports' ``(port
    number, row tuple)`` and its links' ``(local port, remote (GUID, port), row tuple)``, each list
    sorted by port number, salted with the column names. The row tuples are exactly the values
    written (every column of the tables above, ``host_id`` included, so a host row re-created
    under a new id changes the digest), so a column added to a table joins the digest by
    construction. A link is in the digests of both its ends: a link that appears, goes or changes
    changes both. ``repr`` of ints, strs, bools, floats and None is stable across processes and
    versions, unlike ``hash()``.
    """
    node_fields, node_rows = _row_maker(_NODE_COLUMNS)
    port_fields, port_rows = _row_maker(_PORT_COLUMNS)
    link_fields, link_rows = _row_maker(_LINK_COLUMNS)
    # salt: the column names (a column added or renamed changes every digest)
    salt = repr((node_fields, port_fields, link_fields)).encode()
    if aggregation is None:
        aggregation = aggregation_nodes(topo)
    tiers = derive_tiers(topo, aggregation)
    guids = list(topo.nodes)
    nodes = dict(
        zip(guids, node_rows(list(topo.nodes.values()), [tiers[g] for g in guids],
                             [host_ids.get(hosts.get(g)) for g in guids],
                             [aggregation.get(g) for g in guids]), strict=True)
    )  # fmt: skip
    ports = dict(zip(topo.ports, port_rows(list(topo.ports.values())), strict=True))
    links = dict(zip(topo.links, link_rows(list(topo.links.values())), strict=True))
    own_ports: dict[str, list] = {g: [] for g in guids}
    own_links: dict[str, list] = {g: [] for g in guids}
    for (guid, num), row in ports.items():
        own_ports[guid].append((num, row))
    for (a, b), row in links.items():
        own_links[a[0]].append((a[1], b, row))
        own_links[b[0]].append((b[1], a, row))
    digests: dict[str, int] = {}
    blake2b = hashlib.blake2b
    for guid, row in nodes.items():
        mine_p = own_ports[guid]
        mine_p.sort(key=_first)  # port numbers are unique per node: later items never compared
        mine_l = own_links[guid]
        mine_l.sort(key=_first)  # a port has at most one link
        h = blake2b(salt, digest_size=8)
        h.update(repr((row, mine_p, mine_l)).encode())
        digests[guid] = int.from_bytes(h.digest(), "big", signed=True)
    whole = blake2b(salt, digest_size=8)
    whole.update(repr(sorted(digests.items())).encode())
    return _Plan(nodes, ports, links, digests, whole.hexdigest())


#: above this share of the nodes changed, a diff reads the whole fabric (one scan beats long IN lists)
FULL_DIFF_SHARE = 0.5


def _scope(
    stored: dict[str, tuple[int, int | None, bool]], plan: _Plan, reach: Reach, partial: bool
) -> set[str] | None:
    """The nodes whose rows the diff must read: those whose stored digest differs from the plan's
    (new nodes, changed ones, digests cleared by another writer) and the stored nodes the run
    missed; None for all (a partial run, a first discovery, or most nodes changed).

    Sound because a stored digest is the plan digest of the rows as the ingest left them (cleared
    otherwise, see :func:`_store_digests` and :func:`apply_port_states`): a node with an equal
    digest has the same row, ports and links, so a complete diff would change nothing of its.
    """
    if partial or not stored:
        return None
    digests = plan.digests
    scope = {guid for guid, digest in digests.items() if (stored.get(guid) or (0, None))[1] != digest}
    scope.update(g for g in stored if g not in digests)
    if len(scope) > FULL_DIFF_SHARE * max(len(stored), len(digests)):
        return None
    return scope


def _store_digests(
    plan: _Plan,
    stored: dict[str, tuple[int, int | None, bool]],
    node_ids: dict[str, int],
    scope: set[str] | None,
    ch: _Changes,
) -> None:
    """Store the plan's digest on every diffed node whose rows now match the plan, clear it on
    those left different (``ch.unsynced``). New nodes were inserted with it. Bookkeeping, not a
    change: not counted in ``rows_written``."""
    writes = []
    for guid, digest in plan.digests.items():
        if scope is not None and guid not in scope:
            continue
        want = None if guid in ch.unsynced else digest
        old = stored.get(guid)
        have = old[1] if old is not None else digest  # inserted with the plan's digest
        if want != have:
            writes.append((want, node_ids[guid]))
    if writes:
        with connection.cursor() as cursor:
            cursor.executemany(f"UPDATE {Node._meta.db_table} SET digest = %s WHERE id = %s", writes)


def _sync_nodes(
    fabric: Fabric,
    topo: Topology,
    plan: _Plan,
    stored_nodes: dict[str, tuple[int, int | None, bool]],
    scope: set[str] | None,
    reach: Reach,
    ch: _Changes,
) -> dict[str, int]:
    """Diff and write the node rows of ``scope`` (None: all); returns GUID → id of every stored
    and new node."""
    qs = Node.objects.filter(fabric=fabric)
    if scope is not None:
        qs = qs.filter(id__in=[stored_nodes[g][0] for g in scope if g in stored_nodes])
    stored = (
        {}
        if ch.initial
        else {row[1]: (row[0], row[2:]) for row in _fetch(qs.values_list("id", "node_guid", *_NODE_FIELDS))}
    )
    now = timezone.now()
    new_rows: list[tuple] = []
    updates: list[Node] = []
    update_fields: set[str] = set()
    for guid, node in topo.nodes.items():
        if scope is not None and guid not in scope:
            continue
        values = plan.nodes[guid]
        old = stored.get(guid)
        if old is None:
            new_rows.append((fabric.pk, guid, *values, plan.digests[guid], now, now))
            ch.added["nodes"].append(guid)
            if not ch.initial:
                ch.events.append(
                    _event(
                        "node.added",
                        f"{_type_name(node.node_type)} {node.label or guid} ({guid}) appeared",
                        object_type="node",
                        object_key=guid,
                        object_repr=node.label or guid,
                        details={"node_type": node.node_type, "lid": node.lid},
                    )
                )
            continue
        node_id, old_values = old
        if old_values == values:
            continue
        diffs = {f: [o, n] for f, o, n in zip(_NODE_FIELDS, old_values, values, strict=False) if o != n}
        obj = Node(
            id=node_id,
            node_guid=guid,
            fabric=fabric,
            last_seen=now,
            **dict(zip(_NODE_FIELDS, values, strict=False)),
        )
        updates.append(obj)
        update_fields.update(diffs)
        ch.changed["nodes"].append(
            {"key": guid, "fields": {k: v for k, v in diffs.items() if k != "host_id"}}
        )
        label = node.label or guid
        if "lid" in diffs:
            ch.events.append(
                _event(
                    "node.lid_changed",
                    f"switch {label} LID {diffs['lid'][0]} → {diffs['lid'][1]}",
                    object_type="node",
                    object_key=guid,
                    object_repr=label,
                    node_id=node_id,
                    details={"old": diffs["lid"][0], "new": diffs["lid"][1]},
                )
            )
        if "description" in diffs and diffs["description"][0].strip() != diffs["description"][1].strip():
            # (a change of leading/trailing spaces only is stored, not reported: display trims)
            ch.events.append(
                _event(
                    "node.description_changed",
                    f"{guid} description {diffs['description'][0]!r} → {diffs['description'][1]!r}",
                    object_type="node",
                    object_key=guid,
                    object_repr=label,
                    node_id=node_id,
                    details={"old": diffs["description"][0], "new": diffs["description"][1]},
                )
            )
    if updates:
        Node.objects.bulk_update(updates, sorted(update_fields | {"last_seen"}), batch_size=BATCH)
        ch.rows += len(updates)
    new_ids = None
    if new_rows:
        cols = ["fabric_id", "node_guid", *_NODE_FIELDS, "digest", "first_seen", "last_seen"]
        new_ids = insert_rows(Node, cols, new_rows, with_ids=True)
        ch.rows += len(new_rows)
    if reach.gone:
        gone = [(guid, v[0]) for guid, v in stored.items() if guid in reach.gone]
        if gone:
            descs = dict(Node.objects.filter(id__in=[i for _, i in gone]).values_list("id", "name"))
            for guid, node_id in gone:
                ch.removed["nodes"].append(guid)
                ch.gone_names[guid] = descs.get(node_id) or ""
                ch.events.append(
                    _event(
                        "node.removed",
                        f"{descs.get(node_id) or guid} ({guid}) is no longer on the fabric",
                        object_type="node",
                        object_key=guid,
                        object_repr=descs.get(node_id) or guid,
                    )
                )
    ids = {guid: v[0] for guid, v in stored_nodes.items()}
    if new_ids:
        ids.update(zip((row[1] for row in new_rows), new_ids, strict=True))
    elif new_rows:
        ids = dict(_fetch(Node.objects.filter(fabric=fabric).values_list("node_guid", "id")))
    return ids


_TYPE_NAMES = dict(NodeType.choices)


def _type_name(node_type: str) -> str:
    return _TYPE_NAMES.get(node_type, node_type)


def _sync_ports(
    fabric: Fabric,
    topo: Topology,
    plan: _Plan,
    node_ids: dict[str, int],
    scope: set[str] | None,
    reach: Reach,
    ch: _Changes,
) -> dict[tuple[str, int], int]:
    """Diff and write the port rows of the nodes in ``scope`` (None: all); returns (GUID, port)
    → id of their ports."""
    guid_of = {v: k for k, v in node_ids.items()}
    stored: dict[tuple[str, int], tuple[int, tuple]] = {}
    if not ch.initial:
        if scope is None:
            qs = Port.objects.filter(node__fabric=fabric)
        else:
            qs = Port.objects.filter(node_id__in=[node_ids[g] for g in scope if g in node_ids])
        for row in _fetch(qs.values_list("id", "node_id", "port_num", *_PORT_FIELDS)):
            stored[(guid_of[row[1]], row[2])] = (row[0], row[3:])
    switch_guids = {g for g, n in topo.nodes.items() if n.node_type == SWITCH}
    new_rows: list[tuple] = []
    new_keys: list[tuple[str, int]] = []
    updates: list[Port] = []
    update_fields: set[str] = set()
    planned = plan.ports
    for key in topo.ports:
        if scope is not None and key[0] not in scope:
            continue
        values = planned[key]
        old = stored.get(key)
        if old is None:
            new_rows.append((node_ids[key[0]], key[1], *values))
            new_keys.append(key)
            continue
        port_id, old_values = old
        if old_values == values:
            continue
        if key in reach.fresher:
            ch.unsynced.add(key[0])
            continue
        _port_update(
            key,
            port_id,
            node_ids,
            old_values,
            values,
            key[0] in switch_guids,
            updates,
            update_fields,
            ch,
            name=_port_repr(topo, key),
        )
    # ports of nodes still present but no longer reported: their link is gone → Down (not a port
    # behind a failed MAD of a partial run, nor one leading to a node it did not reach)
    for key, (port_id, old_values) in stored.items():
        if key in topo.ports or key[0] not in topo.nodes:
            continue
        if old_values[_STATE] == PortState.DOWN:
            continue
        if reach.keeps_port(key):
            ch.unsynced.add(key[0])
            continue
        values = list(old_values)
        values[_STATE] = PortState.DOWN
        values[_PHYS_STATE] = 0
        _port_update(
            key,
            port_id,
            node_ids,
            old_values,
            tuple(values),
            key[0] in switch_guids,
            updates,
            update_fields,
            ch,
            name=_port_repr(topo, key),
        )
    if updates:
        Port.objects.bulk_update(updates, sorted(update_fields), batch_size=BATCH)
        ch.rows += len(updates)
    ids = {key: v[0] for key, v in stored.items()}
    if new_rows:
        new_ids = insert_rows(Port, ["node_id", "port_num", *_PORT_FIELDS], new_rows, with_ids=True)
        ch.rows += len(new_rows)
        if new_ids is not None:
            ids.update(zip(new_keys, new_ids, strict=True))
        else:
            wanted = {g for g, _ in new_keys}
            for port_id, node_id, num in _fetch(
                Port.objects.filter(node_id__in=[node_ids[g] for g in wanted]).values_list(
                    "id", "node_id", "port_num"
                )
            ):
                ids[(guid_of[node_id], num)] = port_id
    return ids


def _port_update(
    key, port_id, node_ids, old_values, values, is_switch, updates, update_fields, ch, *, name: str
) -> None:
    diffs = {f: [o, n] for f, o, n in zip(_PORT_FIELDS, old_values, values, strict=False) if o != n}
    obj = Port(
        id=port_id, node_id=node_ids[key[0]], port_num=key[1], **dict(zip(_PORT_FIELDS, values, strict=False))
    )
    updates.append(obj)
    update_fields.update(diffs)
    port_key_str = port_key(*key)
    ch.changed["ports"].append({"key": port_key_str, "fields": diffs})
    if "lid" in diffs and not is_switch:
        ch.events.append(
            _event(
                "port.lid_changed",
                f"port {name} LID {diffs['lid'][0]} → {diffs['lid'][1]}",
                object_type="port",
                object_key=port_key_str,
                object_repr=name,
                port_id=port_id,
                details={"old": diffs["lid"][0], "new": diffs["lid"][1]},
            )
        )
    if "state" in diffs:
        names = dict(PortState.choices)
        ch.events.append(
            _event(
                "port.state_changed",
                f"port {name} {names.get(diffs['state'][0], '?')} → {names.get(diffs['state'][1], '?')}",
                object_type="port",
                object_key=port_key_str,
                object_repr=name,
                port_id=port_id,
                details={"old": diffs["state"][0], "new": diffs["state"][1]},
            )
        )


@functools.lru_cache(maxsize=256)
def _link_rate(width: str, speed: str) -> float | None:
    return rates.data_rate_gbps(width, speed)


def _fetch(qs) -> list[tuple]:
    """Rows of a ``values_list`` queryset as plain tuples (no per-row ORM work: 30k+ rows here)."""
    try:
        sql, params = qs.query.sql_with_params()
    except EmptyResultSet:  # an empty ``__in`` list
        return []
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _sync_links(
    fabric: Fabric,
    topo: Topology,
    plan: _Plan,
    port_ids: dict[tuple[str, int], int],
    scope: set[str] | None,
    reach: Reach,
    ch: _Changes,
):
    """Diff and write the links with an end on a node of ``scope`` (None: all links)."""
    stored: dict[LinkKey, tuple[int, tuple]] = {}
    if not ch.initial and scope is None:
        port_key_of = {v: k for k, v in port_ids.items()}
        for link_id, a, b, *vals in _fetch(
            Link.objects.filter(fabric=fabric).values_list("id", "port_a_id", "port_b_id", *_LINK_FIELDS)
        ):
            stored[link_ends(*port_key_of[a], *port_key_of[b])] = (link_id, tuple(vals))
    elif not ch.initial:
        # the links at the scope's ports, with their far ends' natural keys (those may lie outside)
        mine = [pid for (g, _), pid in port_ids.items() if g in scope]
        qs = Link.objects.filter(fabric=fabric).filter(Q(port_a_id__in=mine) | Q(port_b_id__in=mine))
        for link_id, a, ga, pa, b, gb, pb, *vals in _fetch(
            qs.values_list("id", "port_a_id", "port_a__node__node_guid", "port_a__port_num",
                           "port_b_id", "port_b__node__node_guid", "port_b__port_num", *_LINK_FIELDS)
        ):  # fmt: skip
            stored[link_ends(ga, pa, gb, pb)] = (link_id, tuple(vals))
            port_ids.setdefault((ga, pa), a)
            port_ids.setdefault((gb, pb), b)
    wanted = {
        key: link
        for key, link in topo.links.items()
        if scope is None or key[0][0] in scope or key[1][0] in scope
    }
    used_ports = set()
    for key in topo.links:
        used_ports.update(key)
    to_delete: list[tuple[LinkKey, int]] = []
    for key, (link_id, _vals) in stored.items():
        if key in topo.links:
            continue
        if key[0] in used_ports or key[1] in used_ports or not reach.keeps_link(key):
            to_delete.append((key, link_id))
        else:
            ch.unsynced.update(end[0] for end in key)
    if to_delete:
        Link.objects.filter(id__in=[i for _, i in to_delete]).delete()
        ch.rows += len(to_delete)
        expected = isolated_keys(fabric)  # an isolated port's link is down on purpose: no link.down
        for key, _ in to_delete:
            skey = link_key_str(key)
            ch.removed["links"].append(skey)
            if key[0] in expected or key[1] in expected:
                continue
            ch.events.append(
                _event(
                    "link.down",
                    f"link {_link_repr(topo, key, ch.gone_names)} is down (no longer seen)",
                    object_type="link",
                    object_key=skey,
                    object_repr=_link_repr(topo, key, ch.gone_names),
                )
            )
    missing = {end for key in wanted if key not in stored for end in key if end not in port_ids}
    if missing:  # not expected (a new link changes the digests of both ends); read rather than fail
        rows = Port.objects.filter(node__fabric=fabric, node__node_guid__in={g for g, _ in missing})
        for guid, num, pid in _fetch(rows.values_list("node__node_guid", "port_num", "id")):
            port_ids.setdefault((guid, num), pid)
    new_rows: list[tuple] = []
    now = timezone.now()
    updates: list[Link] = []
    planned = plan.links
    for key, link in wanted.items():
        values = planned[key]
        old = stored.get(key)
        if old is None and (key[0] in reach.fresher or key[1] in reach.fresher):
            ch.unsynced.update(end[0] for end in key)
            continue  # a notice saw an end go down after this snapshot: the snapshot is older
        if old is None:
            pa, pb = port_ids[key[0]], port_ids[key[1]]
            if pa > pb:
                pa, pb = pb, pa
            new_rows.append((fabric.pk, pa, pb, *values, now))
            skey = link_key_str(key)
            ch.added["links"].append(skey)
            if not ch.initial:
                ch.events.append(
                    _event(
                        "link.up",
                        f"link {_link_repr(topo, key)} is up ({link.width}{link.speed})",
                        object_type="link",
                        object_key=skey,
                        object_repr=_link_repr(topo, key),
                        details={"width": link.width, "speed": link.speed},
                    )
                )
            continue
        link_id, old_values = old
        if old_values == values:
            continue
        skey = link_key_str(key)
        updates.append(Link(id=link_id, **dict(zip(_LINK_FIELDS, values, strict=True))))
        ch.changed["links"].append(
            {
                "key": skey,
                "fields": {"width": [old_values[0], values[0]], "speed": [old_values[1], values[1]]},
            }
        )
        old_rate, new_rate = old_values[2] or 0, values[2] or 0
        code = "link.up" if new_rate > old_rate else "link.degraded"
        ch.events.append(
            _event(
                code,
                f"link {_link_repr(topo, key)} {old_values[0]}{old_values[1]} → {link.width}{link.speed}",
                object_type="link",
                object_key=skey,
                object_repr=_link_repr(topo, key),
                details={
                    "old": f"{old_values[0]}{old_values[1]}",
                    "new": f"{link.width}{link.speed}",
                    "old_rate_gbps": old_values[2],
                    "new_rate_gbps": values[2],
                },
            )
        )
    if updates:
        Link.objects.bulk_update(updates, list(_LINK_FIELDS), batch_size=BATCH)
        ch.rows += len(updates)
    if new_rows:
        cols = ["fabric_id", "port_a_id", "port_b_id", *_LINK_FIELDS, "first_seen"]
        ch.rows += insert_rows(Link, cols, new_rows)


def _port_repr(topo: Topology, key: tuple[str, int]) -> str:
    """``port_name`` of a port of a parsed topology (its node's description, else the GUID)."""
    node = topo.nodes.get(key[0])
    return port_name((node.description if node else "") or key[0], key[1])


def _link_repr(topo: Topology, key: LinkKey, gone_names: dict[str, str] | None = None) -> str:
    """``link_name`` of a link of a parsed topology: each end by its node's display name in the
    topology, else (a node this ingest removes) by its stored name in ``gone_names``, else GUID."""
    parts = []
    for guid, port in key:
        node = topo.nodes.get(guid)
        name = node.label if node else (gone_names or {}).get(guid, "")
        parts.append((name or guid, port))
    return link_name(*parts)


def _sync_sms(fabric: Fabric, sms: list, ch: _Changes) -> None:
    """Hand the source's SMs (``SMRecord``s) to the SM service (the one writer of SM rows and
    ``sm.*`` events)."""
    if not sms:
        return
    master = next((s for s in sms if s.is_master), None)
    others = [s for s in sms if s is not master]
    if master is None:  # no master in this source: store the SMs it lists, say nothing about the master
        for rec in others:
            ch.rows += sm_service.store_sm(fabric, rec, timezone.now(), touch=False)
        return
    seen = sm_service.observe_sms(fabric, master, others=others, source=sm_service.DISCOVERY)
    ch.rows += seen.rows + len(seen.events)


@dataclass(frozen=True)
class PortObservation:
    """A port's state as read from the fabric (PortInfo, IBTA 14.2.5.6): ``state`` PortState
    (1 Down .. 4 Active), ``phys_state`` PortPhysicalState (2 Polling, 5 LinkUp...)."""

    state: int
    phys_state: int


@dataclass
class PortRefresh:
    """What :func:`apply_port_states` changed: the Discovery row written (None when nothing
    changed), natural keys of the ports changed and links removed, the ports that answered
    linked but have no stored link (``came_up``: a discovery learns the other end), and the nodes
    that lost their last link (``isolated``: a discovery tells whether they are gone)."""

    discovery: Discovery | None = None
    ports: list[str] = field(default_factory=list)
    links_down: list[str] = field(default_factory=list)
    came_up: list[tuple[str, int]] = field(default_factory=list)
    isolated: list[str] = field(default_factory=list)
    unknown: list[tuple[str, int]] = field(default_factory=list)

    @property
    def needs_discovery(self) -> bool:
        """True when only a discovery can finish the picture (a link appeared, a node may be gone,
        or a port is not stored yet)."""
        return bool(self.came_up or self.isolated or self.unknown)


def apply_port_states(
    fabric: Fabric,
    observed: dict[tuple[str, int], PortObservation],
    *,
    source: str = DiscoverySource.NOTICE,
    note: str = "",
    fence: Fence | None = None,
) -> PortRefresh:
    """Store the port states read by a targeted refresh (an SM notice, the port-state fallback)
    and write their events, in one transaction with the Fabric row locked (as :func:`ingest_topology`).

    ``observed`` maps ``(node GUID, port)`` to what PortInfo said. A port whose state changed is
    updated (``port.state_changed``); a port now Down that had a link loses it (``link.down``,
    the same event a discovery writes, both ends named; none when an end is isolated on purpose,
    ``fabric.services.isolation``) and the other end of that cable is set
    Down too (the link is physical: both ends lose it together; its own PortInfo may not have been
    read). Nothing is created here: a port that answered linked without a stored link, or one not
    stored, is reported for a discovery (:attr:`PortRefresh.needs_discovery`).

    When anything changed, a Discovery of ``source`` (default ``notice``; ``note`` says why, kept
    in ``diff["note"]``) records the diff and becomes ``Fabric.last_discovery``, and
    ``discovery_committed`` is sent on commit, so alarms, the map and the heatmap follow as after
    a discovery. Returns a :class:`PortRefresh`.

    ``fence``: the lease of the notice listener that read the states (``core.leases``): nothing is
    written when it was taken over since (raises :class:`core.leases.StaleLeader`).
    """
    out = PortRefresh()
    if not observed:
        return out
    started = timezone.now()
    with transaction.atomic():
        check_fence(fence)
        locked = Fabric.objects.select_for_update().get(pk=fabric.pk)
        guids = {g for g, _ in observed}
        ports = {
            (p.node.node_guid, p.port_num): p
            for p in Port.objects.filter(node__fabric=locked, node__node_guid__in=guids).select_related(
                "node", "link_as_a__port_b__node", "link_as_b__port_a__node"
            )
        }
        names: dict[str, str] = {}
        changed: dict[int, tuple[Port, int, int]] = {}  # port id -> (port, new state, new phys)
        gone_links: list[tuple[Link, LinkKey]] = []
        ch = _Changes()
        for key, obs in sorted(observed.items()):
            port = ports.get(key)
            if port is None:
                if obs.state != PortState.DOWN:
                    out.unknown.append(key)
                continue
            names[key[0]] = port.node.name or key[0]
            link = port.link
            if (port.state, port.phys_state) != (obs.state, obs.phys_state):
                changed[port.pk] = (port, obs.state, obs.phys_state)
            if obs.state == PortState.DOWN and link is not None:
                peer = link.port_b if link.port_a_id == port.pk else link.port_a
                names[peer.node.node_guid] = peer.node.name or peer.node.node_guid
                ends = link_ends(key[0], key[1], peer.node.node_guid, peer.port_num)
                if all(lk.pk != link.pk for lk, _ in gone_links):
                    gone_links.append((link, ends))
                peer_key = (peer.node.node_guid, peer.port_num)
                if peer_key not in observed and peer.state != PortState.DOWN:
                    changed[peer.pk] = (peer, PortState.DOWN, peer.phys_state)
            elif obs.state != PortState.DOWN and link is None:
                out.came_up.append(key)
        for port, state, phys in changed.values():
            key = (port.node.node_guid, port.port_num)
            old = (port.state, port.phys_state)
            values = {"state": state, "phys_state": phys}
            diffs = {
                f: [o, n]
                for f, o, n in zip(("state", "phys_state"), old, (state, phys), strict=True)
                if o != n
            }
            Port.objects.filter(pk=port.pk).update(**values)
            port_key_str = port_key(*key)
            out.ports.append(port_key_str)
            ch.changed["ports"].append({"key": port_key_str, "fields": diffs})
            if "state" in diffs:
                states = dict(PortState.choices)
                shown = port_name(names.get(key[0], key[0]), key[1])
                ch.events.append(
                    _event(
                        "port.state_changed",
                        f"port {shown} {states.get(old[0], '?')} → {states.get(state, '?')}"
                        + (f" ({note})" if note else ""),
                        object_type="port",
                        object_key=port_key_str,
                        object_repr=shown,
                        port_id=port.pk,
                        details={"old": old[0], "new": state, "source": source},
                    )
                )
        expected = isolated_keys(locked) if gone_links else set()
        for _link, ends in gone_links:
            skey = link_key_str(ends)
            shown = link_name(*((names.get(g, g), p) for g, p in ends))
            out.links_down.append(skey)
            ch.removed["links"].append(skey)
            if ends[0] in expected or ends[1] in expected:
                continue  # isolated on purpose (``fabric.services.isolation``): port.isolated says so
            ch.events.append(
                _event(
                    "link.down",
                    f"link {shown} is down" + (f" ({note})" if note else ""),
                    object_type="link",
                    object_key=skey,
                    object_repr=shown,
                    details={"source": source},
                )
            )
        if gone_links:
            Link.objects.filter(pk__in=[lk.pk for lk, _ in gone_links]).delete()
            ends_nodes = {g for _, ends in gone_links for g, _ in ends}
            linked = set(
                Link.objects.filter(fabric=locked)
                .filter(Q(port_a__node__node_guid__in=ends_nodes) | Q(port_b__node__node_guid__in=ends_nodes))
                .values_list("port_a__node__node_guid", "port_b__node__node_guid")
            )
            still = {g for pair in linked for g in pair}
            out.isolated = sorted(ends_nodes - still)
        if not (changed or gone_links):
            return out
        # these nodes' rows no longer match their digests (one writer of digests: the ingest, which
        # diffs nodes without one); bookkeeping, not counted in rows_written
        stale = {port.node.node_guid for port, _, _ in changed.values()}
        stale.update(g for _, ends in gone_links for g, _ in ends)
        Node.objects.filter(fabric=locked, node_guid__in=stale).update(digest=None)
        record_events(locked, ch.events, at=timezone.now())
        counts = {
            "switches": Node.objects.filter(fabric=locked, node_type=NodeType.SWITCH).count(),
            "cas": Node.objects.filter(fabric=locked, node_type=NodeType.CA).count(),
            "routers": Node.objects.filter(fabric=locked, node_type=NodeType.ROUTER).count(),
            "links": Link.objects.filter(fabric=locked).count(),
            "ports": Port.objects.filter(node__fabric=locked).count(),
            "warnings": 0,
        }
        discovery = Discovery.objects.create(
            fabric=locked,
            started=started,
            duration_s=round((timezone.now() - started).total_seconds(), 3),
            source=source,
            status=DiscoveryStatus.OK,
            counts=counts,
            diff={
                "added": ch.added,
                "removed": ch.removed,
                "changed": ch.changed,
                "truncated": False,
                "partial": False,
                "initial": False,
                "unreached": [],
                "note": note,
            },  # fmt: skip
            removed=len(gone_links),
            changed=len(changed),
            rows_written=len(changed) + len(gone_links) + len(ch.events),
        )
        _became_latest(locked, discovery)
        out.discovery = discovery
    return out


class ImportWouldRemove(ValueError):
    """An import would remove more than the allowed share of the stored fabric (``replace`` not set).

    Attributes: ``nodes``/``links`` (how many stored nodes and links the file lacks), ``stored_nodes``/
    ``stored_links``, ``share`` (the larger removed fraction, 0..1), ``limit`` (the allowed share),
    ``examples`` (up to 20 names of what would go, nodes first: ``"leaf-01 (0x…)"``,
    ``"spine-01 [1] <-> leaf-01 [7]"``).
    """

    def __init__(self, *, nodes: int, links: int, stored_nodes: int, stored_links: int, limit: float,
                 examples: list[str]):  # fmt: skip
        self.nodes, self.links = nodes, links
        self.stored_nodes, self.stored_links = stored_nodes, stored_links
        self.share = max(nodes / max(stored_nodes, 1), links / max(stored_links, 1))
        self.limit = limit
        self.examples = examples
        super().__init__(
            f"this import would remove {nodes} of {stored_nodes} nodes and {links} of {stored_links} links "
            f"({self.share:.0%}, more than the {limit:.0%} allowed); if the file is the whole fabric, "
            "import it again with replace"
        )

    def as_dict(self) -> dict[str, Any]:
        return {"error": str(self), "would_remove": {"nodes": self.nodes, "links": self.links,
                "share": round(self.share, 4), "limit": self.limit, "examples": self.examples}}  # fmt: skip


def check_removal(fabric: Fabric, topology: Topology, limit: float) -> None:
    """Refuse an ingest of ``topology`` into ``fabric`` that would remove more than ``limit`` (0..1)
    of its stored nodes or links (a file cut short, or of another fabric).

    Raises:
        ImportWouldRemove: with what would go.
    """
    stored_nodes = dict(Node.objects.filter(fabric=fabric).values_list("node_guid", "name"))
    if not stored_nodes:
        return
    gone_nodes = [g for g in stored_nodes if g not in topology.nodes]
    stored_links = 0
    gone_links: list[str] = []
    rows = Link.objects.filter(fabric=fabric).values_list(
        "port_a__node__node_guid", "port_a__port_num", "port_b__node__node_guid", "port_b__port_num"
    )
    for ga, pa, gb, pb in rows.iterator(chunk_size=5000):
        stored_links += 1
        key = link_ends(ga, pa, gb, pb)
        if key not in topology.links:
            gone_links.append(link_name((stored_nodes[ga] or ga, pa), (stored_nodes[gb] or gb, pb)))
    if max(len(gone_nodes) / len(stored_nodes), len(gone_links) / max(stored_links, 1)) > limit:
        examples = [f"{stored_nodes[g] or g} ({g})" for g in gone_nodes[:20]]
        examples += gone_links[: 20 - len(examples)]
        raise ImportWouldRemove(nodes=len(gone_nodes), links=len(gone_links), stored_nodes=len(stored_nodes),
                                stored_links=stored_links, limit=limit, examples=examples)  # fmt: skip


def import_topology_text(
    fabric_name: str,
    text: str,
    *,
    filename: str,
    source: str = DiscoverySource.FILE,
    create: bool = True,
    replace: bool = False,
) -> Discovery:
    """Parse ``text`` (any format :func:`fabric.parsers.detect_and_parse` reads) and ingest it into
    the fabric named ``fabric_name``.

    A fabric created here has no live access, so ``discovery_enabled``/``polling_enabled`` are off.
    A text that looks cut short (``Topology.truncated``) is refused; an import that would remove more
    than ``settings.WEFT_IMPORT_MAX_REMOVE_SHARE`` of the stored nodes or links needs ``replace``.

    Raises:
        TopologyParseError: the text is not a topology, or looks cut short (located); raised before
            the database is touched.
        ImportWouldRemove: too much would be removed and ``replace`` is False; nothing is written.
        Fabric.DoesNotExist: no such fabric and ``create`` is False.
    """
    started = timezone.now()
    source_name = filename or "<upload>"
    existing = Fabric.objects.filter(name=fabric_name).first()
    digest = source_digest(text, existing)
    if existing is not None:
        same = ingest_unchanged(existing, digest, source=source, filename=filename, started=started)
        if same is not None:
            return same
    topology = detect_and_parse(text, source_name)
    if topology.truncated:
        line, reason = topology.truncated
        raise TopologyParseError(reason, source_name, line)
    fabric = Fabric.objects.filter(name=fabric_name).first()
    if fabric is None:
        if not create:
            raise Fabric.DoesNotExist(f"no fabric named {fabric_name!r}")
        fabric, _ = Fabric.objects.get_or_create(
            name=fabric_name,
            defaults={
                "description": f"imported from {filename}"[:200],
                "discovery_enabled": False,
                "polling_enabled": False,
            },
        )
    return ingest_topology(
        fabric, topology, source=source, filename=filename, started=started,
        max_remove_share=None if replace else settings.WEFT_IMPORT_MAX_REMOVE_SHARE,
        source_digest=digest,
    )  # fmt: skip


def summary(discovery: Discovery) -> dict[str, Any]:
    """The JSON summary the commands print: counts of nodes and unique links, the diff totals, warnings,
    and the nodes a partial run kept as unreached."""
    counts = discovery.counts or {}
    return {
        "fabric": discovery.fabric.name,
        "discovery": discovery.pk,
        "status": discovery.status,
        "switches": counts.get("switches", 0),
        "cas": counts.get("cas", 0),
        "routers": counts.get("routers", 0),
        "links": counts.get("links", 0),
        "ports": counts.get("ports", 0),
        "added": discovery.added,
        "removed": discovery.removed,
        "changed": discovery.changed,
        "warnings": counts.get("warnings", len(discovery.warnings or [])),
        "unreached": len((discovery.diff or {}).get("unreached", [])),
        "rows_written": discovery.rows_written,
        "duration_s": discovery.duration_s,
    }
