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
the row values the ingest would write (``NODE_COLUMNS``/``PORT_COLUMNS``/``LINK_COLUMNS`` in ``columns``: one
line per stored column) and each node gets a 64-bit digest of its row, its ports' rows and the rows
of the links at its ports (``plan.plan_topology``), stored in ``Node.digest`` when its rows match; the whole
topology's digest is ``Discovery.digest``. A rediscovery reads the fabric's node digests (one query)
and diffs only the nodes whose digest differs, is missing (cleared by another writer, e.g. a
notice refresh), new or gone (``plan.diff_scope``): an unchanged one reads no port or link row and writes
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
that turn text into rows (``samesource``), so an upgraded parser or a new column never
takes the shortcut with an old digest.

Modules (one concern each; the public names stay importable from ``fabric.services.ingest``):
``columns`` (parse → row tuples), ``plan`` (the rows and node digests of a parse, the diff scope),
``changes`` (the change accumulator and its event wording), ``common`` (row reads, the latest
Discovery and its signal, SMs), ``reach`` (what a partial run reached), ``hosts``, ``nodes``,
``ports``, ``links`` (diff and bulk writes of each table with its events), ``topology``
(:func:`ingest_topology`, :func:`summary`), ``samesource`` (:func:`source_digest`,
:func:`ingest_unchanged`), ``portstates`` (:func:`apply_port_states`), ``guard``
(:func:`check_removal`) and ``importing`` (:func:`import_topology_text`).
"""

from __future__ import annotations

from .common import BATCH
from .guard import ImportWouldRemove, check_removal
from .importing import import_topology_text
from .plan import FULL_DIFF_SHARE
from .portstates import PortObservation, PortRefresh, apply_port_states
from .reach import Reach
from .samesource import ingest_unchanged, source_digest
from .topology import DIFF_LIST_LIMIT, WARNINGS_LIMIT, ingest_topology, summary

__all__ = [
    "BATCH", "DIFF_LIST_LIMIT", "FULL_DIFF_SHARE", "WARNINGS_LIMIT", "ImportWouldRemove", "PortObservation",
    "PortRefresh", "Reach", "apply_port_states", "check_removal", "import_topology_text", "ingest_topology",
    "ingest_unchanged", "source_digest", "summary",
]  # fmt: skip
