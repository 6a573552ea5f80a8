"""The rows a complete ingest of a topology leaves and their per-node digests; which nodes a
rediscovery must diff (the digest scope); storing the digests after a diff."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from operator import itemgetter

from django.db import connection

from ...keys import LinkKey
from ...models import Node
from ...parsers.records import Topology
from ..derive import aggregation_nodes, derive_tiers
from .changes import Changes
from .columns import LINK_COLUMNS, NODE_COLUMNS, PORT_COLUMNS, row_maker
from .reach import Reach


@dataclass
class Plan:
    """The rows a complete ingest of a topology leaves, from the parse (and the fabric's host ids).

    ``nodes``/``ports``/``links``: natural key → row values in the column order of
    ``NODE_COLUMNS``/``PORT_COLUMNS``/``LINK_COLUMNS``; ``digests``: node GUID → signed 64-bit
    digest of that node's rows (see :func:`plan_topology`); ``digest``: 16 hex digits over all of them.
    """

    nodes: dict[str, tuple]
    ports: dict[tuple[str, int], tuple]
    links: dict[LinkKey, tuple]
    digests: dict[str, int]
    digest: str


_first = itemgetter(0)


def plan_topology(
    topo: Topology, hosts: dict[str, str], host_ids: dict[str, int], aggregation: dict[str, str] | None = None
) -> Plan:
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
    node_fields, node_rows = row_maker(NODE_COLUMNS)
    port_fields, port_rows = row_maker(PORT_COLUMNS)
    link_fields, link_rows = row_maker(LINK_COLUMNS)
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
    return Plan(nodes, ports, links, digests, whole.hexdigest())


#: above this share of the nodes changed, a diff reads the whole fabric (one scan beats long IN lists)
FULL_DIFF_SHARE = 0.5


def diff_scope(
    stored: dict[str, tuple[int, int | None, bool]], plan: Plan, reach: Reach, partial: bool
) -> set[str] | None:
    """The nodes whose rows the diff must read: those whose stored digest differs from the plan's
    (new nodes, changed ones, digests cleared by another writer) and the stored nodes the run
    missed; None for all (a partial run, a first discovery, or most nodes changed).

    Sound because a stored digest is the plan digest of the rows as the ingest left them (cleared
    otherwise, see :func:`store_digests` and ``portstates.apply_port_states``): a node with an equal
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


def store_digests(
    plan: Plan,
    stored: dict[str, tuple[int, int | None, bool]],
    node_ids: dict[str, int],
    scope: set[str] | None,
    ch: Changes,
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
