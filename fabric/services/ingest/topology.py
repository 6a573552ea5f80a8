"""Store a parsed topology as the fabric's current state (:func:`ingest_topology`: diff, bulk
writes, events and a Discovery in one transaction) and the summary the commands print."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from events.services import EventSpec, record_events

from ...choices import DiscoveryStatus
from ...models import Discovery, Fabric, Node
from ...parsers.records import Topology, gc_paused
from ..derive import aggregation_nodes
from ..names import label_topology
from .changes import Changes, change_event
from .common import became_latest, sync_sms
from .guard import check_removal
from .hosts import host_names, sync_hosts
from .links import sync_links
from .nodes import sync_nodes
from .plan import diff_scope, plan_topology, store_digests
from .ports import sync_ports
from .reach import Reach, mark_reachability, read_stored_nodes

#: at most this many natural keys per list in ``Discovery.diff`` (the counts are always complete).
DIFF_LIST_LIMIT = 1000
#: at most this many parse warnings stored on the Discovery (the total is in ``counts``).
WARNINGS_LIMIT = 1000


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
        stored = read_stored_nodes(locked)
        initial = not stored
        ch = Changes(initial=initial)
        reach = Reach.of(locked, topology, partial, unknown_ports, started=started, stored=stored.keys())
        label_topology(locked, topology)  # node.label: the map's name or the trimmed description
        aggregation = aggregation_nodes(topology)
        hosts = host_names(topology, aggregation)
        host_ids = sync_hosts(locked, hosts, ch)
        plan = plan_topology(topology, hosts, host_ids, aggregation)
        scope = diff_scope(stored, plan, reach, partial)
        if scope is None or scope:
            node_ids = sync_nodes(locked, topology, plan, stored, scope, reach, ch)
            port_ids = sync_ports(locked, topology, plan, node_ids, scope, reach, ch)
            sync_links(locked, topology, plan, port_ids, scope, reach, ch)
        else:  # every digest matches: an unchanged rediscovery reads and writes no topology row
            node_ids = {guid: v[0] for guid, v in stored.items()}
        gone = [guid for guid in node_ids if guid in reach.gone]
        if gone:
            # last, so the links of removed nodes were reported link.down above; cascades ports/links
            Node.objects.filter(fabric=locked, node_guid__in=gone).delete()
            ch.rows += len(gone)
        store_digests(plan, stored, node_ids, scope, ch)
        ch.rows += mark_reachability(locked, topology, reach, {g for g, v in stored.items() if v[2]})
        sync_sms(locked, topology.sms, ch)
        if initial:
            ch.events = []
            counts = topology.counts()
            ch.events.append(
                change_event(
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
        became_latest(locked, discovery)
    return discovery


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
