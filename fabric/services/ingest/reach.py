"""What a (partial) discovery reached, hence what it may remove, and the stored nodes' reachability
marks (``Node.unreachable_since``)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from ...choices import DiscoverySource, PortState
from ...keys import LinkKey, split_link_key
from ...models import Discovery, Fabric, Link, Node
from ...parsers.records import Topology
from .common import fetch_rows


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
        for ga, pa, gb, pb in fetch_rows(rows):
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


def read_stored_nodes(fabric: Fabric) -> dict[str, tuple[int, int | None, bool]]:
    """The fabric's stored nodes in one query: GUID → (id, digest, unreachable)."""
    rows = Node.objects.filter(fabric=fabric).values_list("node_guid", "id", "digest", "unreachable_since")
    return {guid: (node_id, digest, since is not None) for guid, node_id, digest, since in fetch_rows(rows)}


def mark_reachability(fabric: Fabric, topo: Topology, reach: Reach, marked: set[str]) -> int:
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
