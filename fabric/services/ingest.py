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
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from events.services import EventSpec, record_events

from .. import rates
from ..choices import DiscoverySource, DiscoveryStatus, NodeType, PortState
from ..keys import LinkKey, link_ends, link_key_str, link_name, port_key, port_name, split_link_key
from ..models import Discovery, Fabric, Host, Link, Node, Port
from ..parsers import detect_and_parse
from ..parsers.records import SWITCH, Topology, TopologyParseError
from ..signals import discovery_committed
from . import sm as sm_service
from .bulk import insert_rows
from .derive import derive_tiers, host_for
from .names import label_topology

#: at most this many natural keys per list in ``Discovery.diff`` (the counts are always complete).
DIFF_LIST_LIMIT = 1000
#: at most this many parse warnings stored on the Discovery (the total is in ``counts``).
WARNINGS_LIMIT = 1000
BATCH = 2000
#: after a PostgreSQL ingest writing more rows than this, refresh the planner statistics (the next
#: discovery reads the whole fabric back; stale stats after a bulk load make that 2-3x slower).
ANALYZE_ABOVE_ROWS = 10_000


def _analyze() -> None:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE fabric_node, fabric_port, fabric_link")


_NODE_FIELDS = (
    "node_type",
    "system_image_guid",
    "vendor_id",
    "device_id",
    "description",
    "name",
    "num_ports",
    "enhanced_port0",
    "lid",
    "lmc",
    "tier",
    "host_id",
)
_PORT_FIELDS = ("port_guid", "lid", "lmc", "state", "phys_state", "width", "speed", "rate_gbps", "label")
_LINK_FIELDS = ("width", "speed", "rate_gbps")


@dataclass
class _Changes:
    events: list[EventSpec] = field(default_factory=list)
    added: dict[str, list] = field(default_factory=lambda: {"nodes": [], "links": []})
    removed: dict[str, list] = field(default_factory=lambda: {"nodes": [], "links": []})
    changed: dict[str, list] = field(default_factory=lambda: {"nodes": [], "ports": [], "links": []})
    rows: int = 0
    initial: bool = False  # first discovery of an empty fabric: no per-object events


def _event(code: str, message: str, **kw: Any) -> EventSpec:
    # severity and category: the registered type's (fabric.event_types), set by record_events
    return EventSpec(code=code, message=message, **kw)


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
) -> Discovery:
    """Store ``topology`` as the current state of ``fabric`` and return the new Discovery.

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
    with transaction.atomic():
        locked = Fabric.objects.select_for_update().get(pk=fabric.pk)
        if max_remove_share is not None and not partial:
            check_removal(locked, topology, max_remove_share)
        if connection.vendor == "postgresql":
            # a discovery can be re-run: do not wait for the WAL flush of tens of thousands of rows
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit TO OFF")
        initial = not Node.objects.filter(fabric=locked).exists()
        ch = _Changes(initial=initial)
        reach = Reach.of(locked, topology, partial, unknown_ports, started=started)
        label_topology(locked, topology)  # node.label: the map's name or the trimmed description
        host_ids = _sync_hosts(locked, topology, partial, ch)
        node_ids = _sync_nodes(locked, topology, host_ids, reach, ch)
        port_ids = _sync_ports(locked, topology, node_ids, reach, ch)
        _sync_links(locked, topology, port_ids, reach, ch)
        gone = [guid for guid in node_ids if guid in reach.gone]
        if gone:
            # last, so the links of removed nodes were reported link.down above; cascades ports/links
            Node.objects.filter(fabric=locked, node_guid__in=gone).delete()
            ch.rows += len(gone)
        ch.rows += _mark_reachability(locked, topology, reach)
        _sync_sms(locked, topology, ch)
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
        )
        Fabric.objects.filter(pk=locked.pk).update(last_discovery=discovery)
        if connection.vendor == "postgresql" and ch.rows > ANALYZE_ABOVE_ROWS:
            transaction.on_commit(_analyze)
        transaction.on_commit(
            functools.partial(
                discovery_committed.send, sender=Discovery, fabric_id=locked.pk, discovery_id=discovery.pk
            )
        )
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
    ) -> Reach:
        """Compute the reach of ``topo`` against the stored fabric (one query per table).

        Complete run: every stored node not in ``topo`` is gone. Partial run: the stored nodes it
        missed that can be reached, through stored links over missed nodes only, from a port in
        ``unknown_ports`` are unreached, the other missed nodes gone (every way to them ends at
        a port that answered without a link); with ``unknown_ports`` None every missed node is
        unreached. ``started``: when the discovery's snapshot began; ports written by a notice
        refresh (Discovery of source ``notice``) since then are :attr:`fresher`.
        """
        stored = set(Node.objects.filter(fabric=fabric).values_list("node_guid", flat=True))
        missed = stored - topo.nodes.keys()
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


def _mark_reachability(fabric: Fabric, topo: Topology, reach: Reach) -> int:
    """Set ``unreachable_since`` on the unreached nodes (kept if already set) and clear it on the
    nodes the run reached. Returns rows written (0 when nothing changed)."""
    rows = 0
    if reach.unreached:
        rows += Node.objects.filter(
            fabric=fabric, node_guid__in=reach.unreached, unreachable_since__isnull=True
        ).update(unreachable_since=timezone.now())
    marked = Node.objects.filter(fabric=fabric, unreachable_since__isnull=False)
    back = [g for g in marked.values_list("node_guid", flat=True) if g in topo.nodes]
    if back:
        rows += Node.objects.filter(fabric=fabric, node_guid__in=back).update(unreachable_since=None)
    return rows


def _sync_hosts(fabric: Fabric, topo: Topology, partial: bool, ch: _Changes) -> dict[str, int]:
    wanted = set()
    for node in topo.nodes.values():
        if node.node_type != SWITCH:
            name = host_for(node.node_type, node.description, node.label)
            if name:
                wanted.add(name)
    stored = dict(Host.objects.filter(fabric=fabric).values_list("name", "id"))
    missing = [Host(fabric=fabric, name=n) for n in sorted(wanted - stored.keys())]
    if missing:
        Host.objects.bulk_create(missing, batch_size=BATCH)
        ch.rows += len(missing)
        stored = dict(Host.objects.filter(fabric=fabric).values_list("name", "id"))
    return stored


def _node_values(node, tier: int, host_id: int | None) -> tuple:
    return (
        node.node_type,
        node.system_image_guid,
        node.vendor_id,
        node.device_id,
        node.description[:128],
        node.label,
        node.num_ports,
        node.enhanced_port0,
        node.lid if node.node_type == SWITCH else None,
        node.lmc if node.node_type == SWITCH else 0,
        tier,
        host_id,
    )


def _sync_nodes(fabric: Fabric, topo: Topology, host_ids: dict[str, int], reach: Reach, ch: _Changes):
    tiers = derive_tiers(topo)
    stored = {
        row[1]: (row[0], row[2:])
        for row in _fetch(Node.objects.filter(fabric=fabric).values_list("id", "node_guid", *_NODE_FIELDS))
    }
    now = timezone.now()
    new_rows: list[tuple] = []
    updates: list[Node] = []
    update_fields: set[str] = set()
    for guid, node in topo.nodes.items():
        host = host_for(node.node_type, node.description, node.label)
        values = _node_values(node, tiers[guid], host_ids.get(host) if host else None)
        old = stored.get(guid)
        if old is None:
            new_rows.append((fabric.pk, guid, *values, now, now))
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
        cols = ["fabric_id", "node_guid", *_NODE_FIELDS, "first_seen", "last_seen"]
        new_ids = insert_rows(Node, cols, new_rows, with_ids=True)
        ch.rows += len(new_rows)
    if reach.gone:
        gone = [(guid, v[0]) for guid, v in stored.items() if guid in reach.gone]
        if gone:
            descs = dict(Node.objects.filter(id__in=[i for _, i in gone]).values_list("id", "name"))
            for guid, node_id in gone:
                ch.removed["nodes"].append(guid)
                ch.events.append(
                    _event(
                        "node.removed",
                        f"{descs.get(node_id) or guid} ({guid}) is no longer on the fabric",
                        object_type="node",
                        object_key=guid,
                        object_repr=descs.get(node_id) or guid,
                    )
                )
    ids = {guid: v[0] for guid, v in stored.items()}
    if new_ids:
        ids.update(zip((row[1] for row in new_rows), new_ids, strict=True))
    elif new_rows:
        ids = dict(_fetch(Node.objects.filter(fabric=fabric).values_list("node_guid", "id")))
    return ids


_TYPE_NAMES = dict(NodeType.choices)


def _type_name(node_type: str) -> str:
    return _TYPE_NAMES.get(node_type, node_type)


def _sync_ports(fabric: Fabric, topo: Topology, node_ids: dict[str, int], reach: Reach, ch: _Changes):
    guid_of = {v: k for k, v in node_ids.items()}
    stored: dict[tuple[str, int], tuple[int, tuple]] = {}
    for row in _fetch(
        Port.objects.filter(node__fabric=fabric).values_list("id", "node_id", "port_num", *_PORT_FIELDS)
    ):
        stored[(guid_of[row[1]], row[2])] = (row[0], row[3:])
    switch_guids = {g for g, n in topo.nodes.items() if n.node_type == SWITCH}
    new_rows: list[tuple] = []
    new_keys: list[tuple[str, int]] = []
    updates: list[Port] = []
    update_fields: set[str] = set()
    for key, port in topo.ports.items():
        values = (
            port.port_guid,
            port.lid,
            port.lmc,
            port.state,
            port.phys_state,
            port.width,
            port.speed,
            _link_rate(port.width, port.speed),
            port.label[:32],
        )
        old = stored.get(key)
        if old is None:
            new_rows.append((node_ids[key[0]], key[1], *values))
            new_keys.append(key)
            continue
        port_id, old_values = old
        if old_values != values and key not in reach.fresher:
            _port_update(
                key, port_id, node_ids, old_values, values, key[0] in switch_guids, updates, update_fields, ch,
                name=_port_repr(topo, key),
            )  # fmt: skip
    # ports of nodes still present but no longer reported: their link is gone → Down (not a port
    # behind a failed MAD of a partial run, nor one leading to a node it did not reach)
    for key, (port_id, old_values) in stored.items():
        if key in topo.ports or key[0] not in topo.nodes or reach.keeps_port(key):
            continue
        if old_values[3] == PortState.DOWN:
            continue
        values = list(old_values)
        values[3] = PortState.DOWN
        values[4] = 0
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
            ids = {}
            for port_id, node_id, num in _fetch(
                Port.objects.filter(node__fabric=fabric).values_list("id", "node_id", "port_num")
            ):
                guid = guid_of.get(node_id)
                if guid is not None:
                    ids[(guid, num)] = port_id
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
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _sync_links(
    fabric: Fabric, topo: Topology, port_ids: dict[tuple[str, int], int], reach: Reach, ch: _Changes
):
    port_key_of = {v: k for k, v in port_ids.items()}
    stored: dict[LinkKey, tuple[int, tuple]] = {}
    for link_id, a, b, *vals in _fetch(
        Link.objects.filter(fabric=fabric).values_list("id", "port_a_id", "port_b_id", *_LINK_FIELDS)
    ):
        stored[link_ends(*port_key_of[a], *port_key_of[b])] = (link_id, tuple(vals))
    used_ports = set()
    for key in topo.links:
        used_ports.update(key)
    to_delete: list[tuple[LinkKey, int]] = []
    for key, (link_id, _vals) in stored.items():
        if key in topo.links:
            continue
        if key[0] in used_ports or key[1] in used_ports or not reach.keeps_link(key):
            to_delete.append((key, link_id))
    if to_delete:
        Link.objects.filter(id__in=[i for _, i in to_delete]).delete()
        ch.rows += len(to_delete)
        for key, _ in to_delete:
            skey = link_key_str(key)
            ch.removed["links"].append(skey)
            ch.events.append(
                _event(
                    "link.down",
                    f"link {_link_repr(topo, key)} is down (no longer seen)",
                    object_type="link",
                    object_key=skey,
                    object_repr=_link_repr(topo, key),
                )
            )
    new_rows: list[tuple] = []
    now = timezone.now()
    updates: list[Link] = []
    for key, link in topo.links.items():
        values = (link.width, link.speed, _link_rate(link.width, link.speed))
        old = stored.get(key)
        skey = link_key_str(key)
        if old is None and (key[0] in reach.fresher or key[1] in reach.fresher):
            continue  # a notice saw an end go down after this snapshot: the snapshot is older
        if old is None:
            pa, pb = port_ids[key[0]], port_ids[key[1]]
            if pa > pb:
                pa, pb = pb, pa
            new_rows.append((fabric.pk, pa, pb, *values, now))
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
        updates.append(Link(id=link_id, width=values[0], speed=values[1], rate_gbps=values[2]))
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


def _link_repr(topo: Topology, key: LinkKey) -> str:
    """``link_name`` of a link of a parsed topology (node descriptions, else GUIDs)."""
    parts = []
    for guid, port in key:
        node = topo.nodes.get(guid)
        parts.append(((node.label if node else "") or guid, port))
    return link_name(*parts)


def _sync_sms(fabric: Fabric, topo: Topology, ch: _Changes) -> None:
    """Hand the topology's SMs to the SM service (the one writer of SM rows and ``sm.*`` events)."""
    if not topo.sms:
        return
    master = next((s for s in topo.sms if s.is_master), None)
    others = [s for s in topo.sms if s is not master]
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
) -> PortRefresh:
    """Store the port states read by a targeted refresh (an SM notice, the port-state fallback)
    and write their events, in one transaction with the Fabric row locked (as :func:`ingest_topology`).

    ``observed`` maps ``(node GUID, port)`` to what PortInfo said. A port whose state changed is
    updated (``port.state_changed``); a port now Down that had a link loses it (``link.down``,
    the same event a discovery writes, both ends named) and the other end of that cable is set
    Down too (the link is physical: both ends lose it together; its own PortInfo may not have been
    read). Nothing is created here: a port that answered linked without a stored link, or one not
    stored, is reported for a discovery (:attr:`PortRefresh.needs_discovery`).

    When anything changed, a Discovery of ``source`` (default ``notice``; ``note`` says why, kept
    in ``diff["note"]``) records the diff and becomes ``Fabric.last_discovery``, and
    ``discovery_committed`` is sent on commit, so alarms, the map and the heatmap follow as after
    a discovery. Returns a :class:`PortRefresh`.
    """
    out = PortRefresh()
    if not observed:
        return out
    started = timezone.now()
    with transaction.atomic():
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
        for _link, ends in gone_links:
            skey = link_key_str(ends)
            shown = link_name(*((names.get(g, g), p) for g, p in ends))
            out.links_down.append(skey)
            ch.removed["links"].append(skey)
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
        Fabric.objects.filter(pk=locked.pk).update(last_discovery=discovery)
        out.discovery = discovery
        transaction.on_commit(
            functools.partial(
                discovery_committed.send, sender=Discovery, fabric_id=locked.pk, discovery_id=discovery.pk
            )
        )
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
