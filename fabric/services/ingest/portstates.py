"""Targeted refreshes of port states (an SM notice, the port-state fallback, a port action): store
what PortInfo said, drop the links whose ends went Down, record events and a Discovery."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.leases import Fence, check_fence
from events.services import record_events

from ...choices import DiscoverySource, DiscoveryStatus, NodeType, PhysState, PortState
from ...keys import LinkKey, link_ends, link_key_str, link_name, port_key, port_name
from ...models import Discovery, Fabric, Link, Node, Port
from ..isolation import isolated_keys
from .changes import Changes, change_event
from .common import became_latest

#: PortPhysicalState values under which the physical link is not up (Sleep, Polling, Disabled,
#: PortConfigurationTraining): the logical link is Down whatever PortState says
PHYS_NOT_UP = frozenset({PhysState.SLEEP, PhysState.POLLING, PhysState.DISABLED, PhysState.TRAINING})


@dataclass(frozen=True)
class PortObservation:
    """A port's state as read from the fabric (PortInfo, IBTA 14.2.5.6): ``state`` PortState
    (1 Down .. 4 Active), ``phys_state`` PortPhysicalState (2 Polling, 5 LinkUp...).

    ``state`` is stored Down when ``phys_state`` says the physical link is not up
    (:data:`PHYS_NOT_UP`): the logical link state machine (IBTA Vol 1 7.2) leaves Down only
    once the physical layer reports LinkUp. ibsim answers a disabled switch port with PortState
    Initialize (or its old Active) beside PhysState Disabled; stored as read, the port flapped
    Down ↔ Initialize at every read and discovery while it was disabled, each read asking for a
    discovery as if the port were coming up."""

    state: int
    phys_state: int

    def __post_init__(self) -> None:
        if self.phys_state in PHYS_NOT_UP and self.state != PortState.DOWN:
            object.__setattr__(self, "state", int(PortState.DOWN))


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
        ch = Changes()
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
                    change_event(
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
                change_event(
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
        became_latest(locked, discovery)
        out.discovery = discovery
    return out
