"""What a sweep reads: the fabric's ports as read targets (LIDs and port numbers from the last
discovery, no rediscovery; the link data rate), cached per process while the fabric's identity
holds, and the poller's request list (the PerfMgt CapMasks of each LID cached for a while)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from fabric.choices import NodeType
from fabric.models import Fabric, Link, Port

from ... import semantics
from ...collectors import madpoll
from .. import history

EXT_BITS = madpoll.CAP_EXT_WIDTH | madpoll.CAP_EXT_WIDTH_NOIETF
_CAPMASK_TTL_S = 600.0


@dataclass
class Target:
    """A port to read: ids, address (``lid`` of the CA port or of the switch), link data rate."""

    port_id: int
    node_id: int
    port_num: int
    lid: int | None
    rate_gbps: float | None
    group_key: int
    #: the link data rate in bytes/s (``semantics.link_bytes_per_s``; None when unknown)
    cap: float | None = None

    def __post_init__(self) -> None:
        self.cap = semantics.link_bytes_per_s(self.rate_gbps)


@dataclass
class ReadPlan:
    """The cached read plan of a fabric: ``targets``, ``by_addr[(lid, port)]`` and the number of
    targets per history bucket; ``key`` is the fabric identity it was built for (:func:`identity`)."""

    key: tuple
    targets: list[Target]
    by_addr: dict[tuple[int, int], Target]
    bucket_sizes: dict[int, int]


# Per-process caches (a Celery worker sweeps the same fabric again and again). They are only
# trusted when the database agrees: the read plan by the fabric's identity (:func:`identity`:
# id, creation time, latest discovery id and start, read from the database at every sweep, so a
# deleted fabric whose id is reused, a stale ``Fabric`` object or a rediscovery never hit another
# topology), the CapMasks by the fabric's id and creation time. (The counter state: ``state``.)
_lock = threading.Lock()
_topology_cache: dict[int, ReadPlan] = {}
_capmasks: dict[tuple[tuple, int], tuple[int, float]] = {}


def identity(fabric: Fabric) -> tuple:
    """``(id, created, last discovery id, its start)`` of ``fabric`` as the database has it now.

    Every topology change goes through a discovery (``fabric.services.ingest``: a full or partial
    discovery, an import, a notice's port-state refresh), which becomes ``Fabric.last_discovery``;
    the creation time and the discovery's start tell a deleted fabric or discovery whose id was
    reused (SQLite after a rolled-back transaction) from the one cached."""
    row = (
        Fabric.objects.filter(pk=fabric.pk)
        .values_list("created", "last_discovery_id", "last_discovery__started")
        .first()
    )
    return (fabric.pk, *row) if row else (fabric.pk, None, None, None)


def read_plan(fabric: Fabric) -> ReadPlan:
    """The read plan of ``fabric`` (cached per process while :func:`identity` is unchanged; a
    fabric with no discovery yet, whose ports are written by hand, is read again every sweep)."""
    key = identity(fabric)
    with _lock:
        hit = _topology_cache.get(fabric.pk)
    if hit is not None and hit.key == key and key[2] is not None:
        return hit
    rows = list(
        Port.objects.filter(node__fabric_id=fabric.pk, port_num__gte=1).values_list(
            "id", "node_id", "port_num", "lid", "rate_gbps", "node__node_type", "node__lid"
        )
    )
    node_of = {r[0]: r[1] for r in rows}
    type_of = {r[1]: r[5] for r in rows}
    peer: dict[int, int] = {}
    link_rate: dict[int, float | None] = {}
    for a, b, rate in Link.objects.filter(fabric_id=fabric.pk).values_list(
        "port_a_id", "port_b_id", "rate_gbps"
    ):
        peer[a], peer[b] = b, a
        link_rate[a] = link_rate[b] = rate
    targets = []
    for pid, node_id, num, lid, rate, ntype, node_lid in rows:
        is_switch = ntype == NodeType.SWITCH
        group_key = node_id
        if not is_switch and pid in peer and type_of.get(node_of.get(peer[pid])) == NodeType.SWITCH:
            group_key = node_of[peer[pid]]
        targets.append(
            Target(
                port_id=pid,
                node_id=node_id,
                port_num=num,
                lid=(node_lid if is_switch else lid) or None,
                rate_gbps=rate or link_rate.get(pid),
                group_key=group_key,
            )
        )
    topo = ReadPlan(key, targets, index_by_addr(targets), bucket_sizes(targets))
    with _lock:
        if key[2] is not None:
            _topology_cache[fabric.pk] = topo
        else:
            _topology_cache.pop(fabric.pk, None)
    return topo


def index_by_addr(targets: list[Target]) -> dict[tuple[int, int], Target]:
    return {(t.lid, t.port_num): t for t in targets if t.lid}


def bucket_sizes(targets: list[Target]) -> dict[int, int]:
    sizes: dict[int, int] = {}
    for t in targets:
        b = t.port_id >> history.BUCKET_SHIFT
        sizes[b] = sizes.get(b, 0) + 1
    return sizes


def fabric_targets(fabric: Fabric) -> list[Target]:
    """The ports a sweep of ``fabric`` reads (see :class:`Target`)."""
    return read_plan(fabric).targets


def requests_for(
    fabric: Fabric, targets: list[Target], extended: str, ident: tuple | None = None
) -> list[tuple]:
    """The poller's requests: ClassPortInfo of every LID whose capabilities are not cached, then
    per port ``("Q", lid, port, mode)``: mode 2 where the node's CapMask2 has
    AddlPortCountersExtended (one PortCountersExtended MAD carries every counter), 1 where
    PortCountersExtended carries the 64-bit data only (ExtendedWidth/NoIETF, or not known yet:
    PortCounters + PortCountersExtended), 0 for 32-bit only (``extended="never"`` or no
    ExtendedWidth). IBTA 16.1.2 ClassPortInfo, 16.1.4.11 PortCountersExtended."""
    now = time.monotonic()
    owner = (ident or identity(fabric))[:2]
    lids = sorted({t.lid for t in targets if t.lid})
    reqs: list[tuple] = []
    known: dict[int, int] = {}
    with _lock:
        for lid in lids:
            hit = _capmasks.get((owner, lid))
            if hit and hit[1] > now:
                known[lid] = hit[0]
    reqs.extend(("N", lid) for lid in lids if lid not in known)
    never = extended == "never"
    for t in targets:
        if not t.lid:
            continue
        cap = known.get(t.lid)
        if never:
            mode = 0
        elif cap is None:
            mode = 1
        elif cap & EXT_BITS and cap & madpoll.CAP_ADDL_EXT:
            mode = 2
        else:
            mode = 1 if cap & EXT_BITS else 0
        reqs.append(("Q", t.lid, t.port_num, mode))
    return reqs


def remember_capmasks(key: tuple, capmasks: dict[int, int]) -> None:
    """Cache the PerfMgt ClassPortInfo CapMask (``{lid: capmask}``) a sweep read, for the fabric of
    identity ``key`` (:func:`identity`), for ``_CAPMASK_TTL_S`` seconds (:func:`requests_for`
    then asks each port in the mode its node supports without asking ClassPortInfo again)."""
    expires = time.monotonic() + _CAPMASK_TTL_S
    with _lock:
        for lid, cap in capmasks.items():
            _capmasks[(key[:2], lid)] = (cap, expires)
