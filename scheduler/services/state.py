"""What a scheduling pass reads from the other apps, as the planner's plain shapes
(``scheduler.planner``). Reads only: every fact here has its own writer elsewhere.

* the locality tree: ``scheduler.topology.build_locality`` (cached in this process while the
  stored topology, roles and GPU inventory are unchanged: :func:`current_locality`);
* free capacity (:func:`load_inventory`): what the pools' allocation service would hand out —
  present, not unhealthy GPUs of hosts in the tree: whole GPUs ``free`` with MIG off, MIG slices
  ``free`` (``MigSlice.objects.allocatable``), and GPUs open to a fraction (free or shared, with
  the memory and compute their active fractions leave);
* unusable hosts (:func:`unusable_hosts`): a host with an HCA the last discoveries could not
  reach (``fabric.Node.unreachable_since``), an HCA link with an open ``link.down`` alarm (the
  alarm engine's, as the map draws it), or an HCA gone from the fabric (open ``node.removed``:
  a host's only cable to that HCA pulled) is not placed on until that is over;
* congestion (:func:`congestion_marks`): open alarms of the counter rules
  (``events.rules.counters``: ``port.congestion`` after its consecutive sweeps over the threshold,
  error rates, link-downed bursts) on a port of a domain's uplinks mark that domain; the same
  alarms on either end of a host's HCA link (HCA port ↔ leaf port) mark that link
  (:func:`hca_link_marks`, with the ports' latest congestion index from telemetry);
* path-aware congestion (:func:`path_costs`): on a fabric whose routes are read
  (``routing.services.current.current_routes``), the hot ports of telemetry's latest sweep
  (``telemetry.PortCounters``: congestion index above the ``port.congestion`` policy's threshold,
  or utilisation above ``WEFT_PLACEMENT_HOT_UTILISATION``) on each host's routes
  (``scheduler.pathcost``); the engine then scores those fabrics by paths, not by the marks;
* pools (:func:`pool_infos`, ``pools.services.allocation.pool_usage``), held jobs
  (:func:`held_jobs`; their MIG slices :func:`held_slices` and fractions :func:`held_fractions`,
  with the room left on shared GPUs :func:`shared_room`, for the rebalancer's reclaim) and
  fair-share usage (:func:`fair_shares`).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace

from django.conf import settings
from django.db.models import Count, Max, Q, Sum

from events.models import Alarm
from events.policies import policy_for
from fabric.choices import NodeType
from fabric.keys import link_name, port_key, port_name
from fabric.models import Discovery, Fabric, Host, Link, Node, Port
from pools.choices import AllocationKind, GpuState
from pools.fabric_faults import host_fabric_faults
from pools.models import AllocationItem, Gpu, HostInventory, MigSlice, Pool
from pools.services.allocation import gpu_capacity, pool_usage
from routing.services.current import current_routes, latest_snapshot
from telemetry.models import PortCounters

from ..choices import HOLDING
from ..locality import Locality
from ..models import Job, TenantShare
from ..pathcost import Incidence, candidates, hot_ports_by_host, route_incidence
from ..placement import Congestion, HotPort, Mark, PathCosts
from ..planner import HeldJob, Inventory, PoolInfo, gpu_equivalents
from ..topology import build_locality

#: alarm codes (events.rules.counters) that mark the domains whose uplinks carry the port
CONGESTION_CODES = ("port.congestion", "port.symbol_errors", "port.rcv_errors", "port.link_downed")
#: what each of those alarms says of a link, in the words reports use (a link with symbol errors
#: is not "congested": issue 24)
ALARM_CAUSES = {
    "port.congestion": "congestion",
    "port.symbol_errors": "symbol errors",
    "port.rcv_errors": "receive errors",
    "port.link_downed": "link flaps",
}


def alarm_causes(codes) -> str:
    """The causes of ``codes`` (:data:`ALARM_CAUSES`), in that order, joined: ``"congestion and
    symbol errors"``; unknown codes by their own name."""
    names = [ALARM_CAUSES[c] for c in ALARM_CAUSES if c in set(codes)]
    names += sorted(c for c in set(codes) if c not in ALARM_CAUSES and c)
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + names[-1]


_NOT_MIG = ["disabled", "unsupported"]

_cache_lock = threading.Lock()
_cached: tuple[tuple, Locality] | None = None
_uplink_index: dict[int, dict[int, list[str]]] = {}
_incidence: dict[tuple, _HostIncidence] = {}


def topology_key() -> tuple:
    """What the locality tree depends on, in a few small aggregate queries: fabrics and their
    roles, the latest discovery (every topology change records one), switch roles, hosts, host
    reports and GPUs. Equal keys: the tree built from them is the same."""
    return (
        tuple(Fabric.objects.order_by("pk").values_list("pk", "role")),
        tuple(Discovery.objects.aggregate(m=Max("pk"), t=Max("started")).values()),
        tuple(Node.objects.exclude(role="compute").order_by("pk").values_list("pk", "role")),
        tuple(Host.objects.aggregate(n=Count("pk"), m=Max("pk")).values()),
        # GPUs appear, go missing or change rails only through a host's report (its time), or
        # are created (the highest id)
        tuple(HostInventory.objects.aggregate(n=Count("pk"), m=Max("reported_at")).values()),
        Gpu.objects.aggregate(m=Max("pk"))["m"],
    )


def current_locality() -> Locality:
    """The locality tree of every stored fabric, rebuilt only when :func:`topology_key` changed
    (a Locality is immutable once built: the placement engine caches its index by identity).
    The key is read on every call (a few aggregate queries): a tree kept for a while would
    outlive a fabric deleted, or a test database rolled back, in between."""
    global _cached
    key = topology_key()
    with _cache_lock:
        if _cached is not None and _cached[0] == key:
            return _cached[1]
    loc = build_locality()
    with _cache_lock:
        _cached = (key, loc)
    return loc


def forget_locality() -> None:
    """Drop the cached tree (a discovery committed: the next pass rebuilds it)."""
    global _cached
    with _cache_lock:
        _cached = None


def _host_names(loc: Locality) -> dict[int, str]:
    return {s.host_id: name for name, s in loc.hosts.items()}


def _fabric_ids(loc: Locality) -> list[int]:
    return sorted({d.fabric_id for d in loc.fabrics()})


def _eligible_gpus():
    """GPUs the allocation service may hand out whole or share (``pools.services.allocation``:
    present, not unhealthy, MIG off), any state. Not joined to hosts: callers keep the hosts of
    the tree (a join on the host's fabric made PostgreSQL pick a nested loop over every GPU)."""
    return Gpu.objects.present().exclude(health="unhealthy").filter(mig_mode_current__in=_NOT_MIG)


def load_inventory(
    loc: Locality, kinds: set[str] | frozenset[str] = frozenset({"gpu", "mig", "fraction"})
) -> Inventory:
    """Free whole GPUs (counted per host and model), MIG slices (per host, profile and model)
    and, for ``fraction`` in ``kinds``, the room of every GPU open to a fraction, on the hosts of
    ``loc`` (module docstring). Only the kinds asked for are read."""
    names = _host_names(loc)
    inv = Inventory()
    lower: dict[str, str] = {}

    def model_of(product: str | None) -> str:
        m = lower.get(product or "")
        if m is None:
            m = lower[product or ""] = (product or "").lower()
        return m

    if "gpu" in kinds or "fraction" in kinds:
        for host_id, product, n in (
            _eligible_gpus()
            .filter(state=GpuState.FREE)
            .values("host_id", "product_name")
            .annotate(n=Count("pk"))
            .order_by()
            .values_list("host_id", "product_name", "n")
        ):
            name = names.get(host_id)
            if name is not None:
                models = inv.gpus.setdefault(name, {})
                models[model_of(product)] = models.get(model_of(product), 0) + n
    if "fraction" in kinds:
        rows = list(
            _eligible_gpus()
            .filter(state__in=[GpuState.FREE, GpuState.SHARED])
            .order_by("pk")
            .values_list("pk", "host_id", "product_name", "state", "memory_total_mib", "memory_reserved_mib")
        )
        used: dict[int, tuple[int, int]] = dict(_fraction_use())
        for pk, host_id, product, gstate, mem, reserved in rows:
            name = names.get(host_id)
            cap = gpu_capacity(SimpleNamespace(memory_total_mib=mem, memory_reserved_mib=reserved))
            if name is None or cap is None:
                continue
            m, p = used.get(pk, (0, 0))
            if cap - m > 0 and p < 100:
                inv.shared.setdefault(name, []).append(
                    [pk, model_of(product), cap - m, 100 - p, gstate == GpuState.FREE]
                )
    if "mig" in kinds:
        for host_id, profile, product, n in (
            MigSlice.objects.allocatable()
            .values("gpu__host_id", "profile", "gpu__product_name")
            .annotate(n=Count("pk"))
            .order_by()
            .values_list("gpu__host_id", "profile", "gpu__product_name", "n")
        ):
            name = names.get(host_id)
            if name is not None:
                slices = inv.mig.setdefault(name, {})
                slices[(profile, model_of(product))] = slices.get((profile, model_of(product)), 0) + n
    return inv


def free_gpu_ids(host_ids, pool_model: str, job_model: str) -> dict[int, list[int]]:
    """host id → ids of its free whole GPUs matching both model filters (ascending): what a
    binding picks from, inside its transaction."""
    qs = _eligible_gpus().filter(state=GpuState.FREE, host_id__any=list(host_ids))
    for f in (pool_model, job_model):
        if f:
            qs = qs.filter(product_name__icontains=f)
    out: dict[int, list[int]] = defaultdict(list)
    for pk, host_id in qs.order_by("pk").values_list("pk", "host_id"):
        out[host_id].append(pk)
    return out


def unusable_hosts(loc: Locality) -> dict[str, str]:
    """Host name → why it is not placed on now (module docstring), the first reason of
    ``pools.fabric_faults.host_fabric_faults`` (shared with the host pages)."""
    names = _host_names(loc)
    faults = host_fabric_faults(fabric_ids=_fabric_ids(loc))
    return {names[h]: reasons[0] for h, reasons in faults.items() if h in names}


def _uplinks(loc: Locality) -> dict[int, list[str]]:
    """``fabric.Link`` id → keys of the domains whose uplinks it is (cached per tree)."""
    idx = _uplink_index.get(id(loc))
    if idx is None:
        idx = defaultdict(list)
        for key, dom in loc.domains.items():
            for link_id in dom.uplinks:
                idx[link_id].append(key)
        if len(_uplink_index) > 4:
            _uplink_index.clear()
        _uplink_index[id(loc)] = idx
    return idx


def _alarmed_links() -> dict[int, tuple[float, str, str]]:
    """``fabric.Link`` id → ``(score, reason, code)`` of the worst open congestion or error alarm
    (:data:`CONGESTION_CODES`) on one of its ports: ``score`` the alarm's value over its
    threshold (at least 1; 1 when the alarm does not say), ``reason`` its message, ``code`` its
    code. Empty when no such alarm is open."""
    alarms = list(
        Alarm.objects.open()
        .filter(code__in=CONGESTION_CODES, port_id__isnull=False)
        .values_list("code", "port_id", "message", "details")
    )
    if not alarms:
        return {}
    ports = {a[1] for a in alarms}
    links: dict[int, list[int]] = defaultdict(list)
    for pk, a, b in Link.objects.filter(Q(port_a_id__in=ports) | Q(port_b_id__in=ports)).values_list(
        "pk", "port_a_id", "port_b_id"
    ):
        links[a].append(pk)
        links[b].append(pk)
    out: dict[int, tuple[float, str, str]] = {}
    for code, port_id, message, details in alarms:
        value, threshold = (details or {}).get("value"), (details or {}).get("threshold")
        try:
            score = float(value) / float(threshold) if value is not None and threshold else 1.0
        except (TypeError, ValueError):
            score = 1.0
        score = round(max(score, 1.0), 3)
        for link_id in links.get(port_id, ()):
            if link_id not in out or out[link_id][0] < score:
                out[link_id] = (score, message or code, code)
    return out


def congestion_marks(loc: Locality) -> Congestion:
    """Marks on the domains whose uplinks carry a port with an open congestion or error alarm
    (module docstring). ``score``: the alarm's value over its threshold (1 when the alarm does not
    say); the mark's reason is the alarm's message. Any mark counts (threshold 0): the alarm
    engine's hysteresis already decided the port is over its policy's threshold."""
    paths = path_costs(loc)
    hot = _alarmed_links()
    if not hot:
        return Congestion({}, threshold=0.0, paths=paths)
    index = _uplinks(loc)
    marks: dict[str, Mark] = {}
    for link_id, (score, reason, code) in hot.items():
        for key in index.get(link_id, ()):
            if key not in marks or marks[key].score < score:
                marks[key] = Mark(score, reason, code)
    return Congestion(marks, threshold=0.0, paths=paths)


def incidence(loc: Locality, fabric_id: int, hot: Collection[tuple[str, int]]) -> Incidence | None:
    """The port → host → tier incidence over ``fabric_id``'s current routes
    (``scheduler.pathcost.route_incidence``) of the hosts of ``loc`` whose routes can cross one of
    the ``hot`` ports (``pathcost.candidates``: the others cannot, whatever the placement); None
    while the fabric's routes are not read. Each host's part is computed once per (routes
    snapshot, topology discovery, locality) and kept in this process: a whole hot spine needs
    every host (seconds on a 4,000-host fabric, ``bench/placement.py``), a few hot ports a few."""
    cur = current_routes(Fabric(pk=fabric_id))
    if cur is None:
        return None
    key = (fabric_id, cur.key, id(loc))
    with _cache_lock:
        got = _incidence.get(key)
    if got is None:
        names = _host_names(loc)
        host_lids: dict[str, list[int]] = defaultdict(list)
        for host_id, lid in (
            Port.objects.filter(node__fabric_id=fabric_id, node__node_type=NodeType.CA, lid__gt=0,
                                node__host_id__in=list(names))
            .order_by("lid").values_list("node__host_id", "lid")
        ):  # fmt: skip
            host_lids[names[host_id]].append(lid)
        got = _HostIncidence(dict(host_lids), {h: loc.hosts[h].path for h in host_lids}, set(), {})
        with _cache_lock:
            if len(_incidence) >= 8:
                _incidence.clear()
            _incidence[key] = got
    t = cur.tables
    with got.lock:
        todo = candidates(t, got.lids, hot) - got.done
        if todo:
            part = route_incidence(t, got.lids, got.paths, only=todo)
            for k, per in part.ports.items():
                got.ports.setdefault(k, {}).update(per)
            got.done.update(todo)
        return Incidence({k: dict(got.ports[k]) for k in hot if k in got.ports}, frozenset(got.done))


@dataclass
class _HostIncidence:
    """What :func:`incidence` keeps per (fabric, routes, locality): hosts' LIDs and paths, the
    hosts computed so far and their ports."""

    lids: dict[str, list[int]]
    paths: dict[str, tuple[str, ...]]
    done: set[str]
    ports: dict[tuple[str, int], dict[str, int]]
    lock: threading.Lock = field(default_factory=threading.Lock)


def hot_ports(fabric_id: int) -> dict[tuple[str, int], HotPort]:
    """``(node GUID, port number)`` → :class:`~scheduler.placement.HotPort` for the ports of
    ``fabric_id`` that telemetry's latest sweep measured hot (module docstring; stale rows are
    not counted)."""
    pol = policy_for("port.congestion")
    threshold = pol.threshold if pol.threshold is not None else 0.5
    util = settings.WEFT_PLACEMENT_HOT_UTILISATION
    out: dict[tuple[str, int], HotPort] = {}
    for guid, num, name, u, c in (
        PortCounters.objects.filter(port__node__fabric_id=fabric_id, stale=False)
        .filter(Q(congestion__gt=threshold) | Q(utilisation__gt=util))
        .values_list(
            "port__node__node_guid", "port__port_num", "port__node__name", "utilisation", "congestion"
        )
    ):
        out[guid, num] = HotPort(port_key(guid, num), port_name(name or guid, num), u, c)
    return out


def path_costs(loc: Locality) -> PathCosts:
    """The hot ports on every host's routes (:class:`~scheduler.placement.PathCosts`) for the
    fabrics of ``loc`` whose routes are read (``routed``); the others are left to the marks."""
    routed: set[int] = set()
    hosts: dict[str, list[tuple[int, HotPort]]] = {}
    for fid in _fabric_ids(loc):
        hot = hot_ports(fid)
        if not hot:  # nothing to avoid; still scored by paths when the routes are read
            if latest_snapshot(Fabric(pk=fid)) is not None:
                routed.add(fid)
            continue
        inc = incidence(loc, fid, hot)
        if inc is None:
            continue
        routed.add(fid)
        for h, ports in hot_ports_by_host(inc, hot).items():
            hosts.setdefault(h, []).extend(ports)
    return PathCosts(frozenset(routed), {h: tuple(v) for h, v in hosts.items()})


@dataclass(frozen=True, slots=True)
class HcaMark:
    """A host's HCA link (the cable between one of its HCAs' ports and a leaf switch's port)
    with an open congestion or error alarm on either end (:data:`CONGESTION_CODES`: persistent,
    the counter rules raise ``port.congestion`` only after ``consecutive`` sweeps).

    ``link``: ``fabric.Link`` id; ``name``: both ends, the HCA's first (``"host001 HCA-1 [1] <->
    leaf-01 [3]"``, ``fabric.keys.link_name``); ``score``: the alarm's value over its threshold
    (≥ 1); ``reason``: the alarm's message; ``index``: the latest congestion index (0..1) of
    the link's two ports from telemetry (``telemetry.PortCounters.congestion``, the higher of
    the two; None when neither has one)."""

    link: int
    name: str
    score: float
    reason: str
    index: float | None = None
    code: str = ""

    def text(self) -> str:
        """``<name>: <reason> (1.9× the alarm's threshold; congestion index now 0.95)``."""
        now = f"; congestion index now {self.index:.2f}" if self.index is not None else ""
        return f"{self.name}: {self.reason} ({self.score:g}× the alarm's threshold{now})"


def hca_link_marks(loc: Locality) -> dict[str, list[HcaMark]]:
    """Host name (hosts of ``loc``) → its HCA links with an open congestion or error alarm
    (:class:`HcaMark`, by link name). The uplinks' alarms mark domains
    (:func:`congestion_marks`); these are the links a host's own traffic crosses first."""
    hot = _alarmed_links()
    if not hot:
        return {}
    names = _host_names(loc)
    out: dict[str, list[HcaMark]] = defaultdict(list)
    rows = Link.objects.filter(pk__in=list(hot)).select_related(
        "port_a__node", "port_b__node", "port_a__counters", "port_b__counters"
    )
    for link in rows:
        ends = [link.port_a, link.port_b]
        cas = [p for p in ends if p.node.node_type != NodeType.SWITCH and p.node.host_id in names]
        switches = [p for p in ends if p.node.node_type == NodeType.SWITCH]
        if len(cas) != 1 or len(switches) != 1:
            continue  # not a host↔switch cable
        ca, sw = cas[0], switches[0]
        index = [
            c.congestion
            for p in ends
            if (c := getattr(p, "counters", None)) is not None and c.congestion is not None and not c.stale
        ]
        score, reason, code = hot[link.pk]
        name = link_name((str(ca.node), ca.port_num), (str(sw.node), sw.port_num))
        out[names[ca.node.host_id]].append(
            HcaMark(link.pk, name, score, reason, max(index) if index else None, code)
        )
    return {h: sorted(v, key=lambda m: m.name) for h, v in out.items()}


def pool_infos(pool_ids, fractions_for=()) -> dict[int, PoolInfo]:
    """The pools' filters, quotas and usage now (``pools.services.allocation.pool_usage``); for
    the pools in ``fractions_for`` (a fraction job waits there) also the GPUs they hold fractions
    on (a fraction on one of them does not count against the quota again)."""
    out = {}
    for pool in Pool.objects.filter(pk__in=set(pool_ids)):
        usage = pool_usage(pool.pk)
        frac = frozenset(
            AllocationItem.objects.filter(
                allocation__pool=pool, active=True, kind=AllocationKind.FRACTION
            ).values_list("gpu_id", flat=True)
            if pool.pk in fractions_for
            else ()
        )
        out[pool.pk] = PoolInfo(
            pool.pk, pool.name, (pool.gpu_model or "").lower(), pool.fabric_id, pool.quota_gpus,
            pool.quota_slices, usage["gpus"], usage["slices"], frac,
        )  # fmt: skip
    return out


def expected_end(placed_at: datetime | None, started_at: datetime | None, limit_s: float | None) -> float:
    """When a held job is expected to end (epoch seconds): its start (else placement) plus its
    time limit (else ``WEFT_SCHEDULER_DEFAULT_TIME_LIMIT_S``)."""
    start = started_at or placed_at
    return start.timestamp() + float(limit_s or settings.WEFT_SCHEDULER_DEFAULT_TIME_LIMIT_S)


def held_jobs(loc: Locality) -> list[HeldJob]:
    """Placed and running jobs with the whole GPUs they hold on hosts of ``loc`` (per host and
    model)."""
    names = _host_names(loc)
    gpus: dict[int, list[tuple[str, str, int]]] = defaultdict(list)
    for job_id, host_id, product, n in (
        AllocationItem.objects.filter(
            active=True, kind=AllocationKind.GPU, allocation__scheduler_job__state__in=HOLDING
        )
        .values("allocation__scheduler_job__id", "gpu__host_id", "gpu__product_name")
        .annotate(n=Count("pk"))
        .order_by()
        .values_list("allocation__scheduler_job__id", "gpu__host_id", "gpu__product_name", "n")
    ):
        if host_id in names:
            gpus[job_id].append((names[host_id], (product or "").lower(), n))
    out = []
    for pk, tenant, pool, prio, pre, placed_at, started_at, limit in Job.objects.filter(
        state__in=HOLDING
    ).values_list(
        "pk", "tenant_id", "pool_id", "priority", "preemptible", "placed_at", "started_at", "time_limit_s"
    ):
        out.append(
            HeldJob(
                pk,
                tenant,
                pool,
                prio,
                pre,
                expected_end(placed_at, started_at, limit),
                tuple(sorted(gpus.get(pk, ()))),
            )
        )
    return out


def held_slices(loc: Locality) -> dict[int, tuple[tuple[str, str, str, int], ...]]:
    """Placed and running jobs' MIG slices on hosts of ``loc``: job id → ``((host, profile,
    model lower, slices), ...)`` sorted (the active ``mig`` items of their allocations)."""
    names = _host_names(loc)
    out: dict[int, list[tuple[str, str, str, int]]] = defaultdict(list)
    for job_id, host_id, profile, product, n in (
        AllocationItem.objects.filter(
            active=True, kind=AllocationKind.MIG, allocation__scheduler_job__state__in=HOLDING
        )
        .values("allocation__scheduler_job__id", "gpu__host_id", "mig_slice__profile", "gpu__product_name")
        .annotate(n=Count("pk"))
        .order_by()
        .values_list(
            "allocation__scheduler_job__id", "gpu__host_id", "mig_slice__profile", "gpu__product_name", "n"
        )
    ):
        if host_id in names:
            out[job_id].append((names[host_id], profile or "", (product or "").lower(), n))
    return {k: tuple(sorted(v)) for k, v in out.items()}


def held_fractions(loc: Locality) -> dict[int, tuple[tuple[str, int, str, int, int], ...]]:
    """Placed and running jobs' shared-GPU fractions on hosts of ``loc``: job id → ``((host, GPU
    id, model lower, memory MiB, compute %), ...)`` (the active ``fraction`` items)."""
    names = _host_names(loc)
    out: dict[int, list[tuple[str, int, str, int, int]]] = defaultdict(list)
    for job_id, gpu_id, host_id, product, mem, pct in (
        AllocationItem.objects.filter(
            active=True, kind=AllocationKind.FRACTION, allocation__scheduler_job__state__in=HOLDING
        )
        .order_by("gpu_id", "pk")
        .values_list(
            "allocation__scheduler_job__id", "gpu_id", "gpu__host_id", "gpu__product_name", "memory_mib",
            "compute_pct",
        )
    ):  # fmt: skip
        if host_id in names:
            out[job_id].append((names[host_id], gpu_id, (product or "").lower(), mem or 0, pct or 0))
    return {k: tuple(v) for k, v in out.items()}


def shared_room(loc: Locality, gpu_ids) -> dict[int, list]:
    """The room the active fractions leave on the GPUs ``gpu_ids`` (any state, full ones
    included; eligible GPUs of hosts of ``loc`` with a known memory size): GPU id → ``[GPU id,
    model lower, memory MiB free, compute % free, free whole]``, the shape of
    ``Inventory.shared``'s entries. :func:`load_inventory` lists only GPUs with room left; a
    reclaim needs the full ones too (what ending a fraction there frees)."""
    names = _host_names(loc)
    rows = list(
        _eligible_gpus()
        .filter(pk__in=list(gpu_ids))
        .values_list("pk", "host_id", "product_name", "state", "memory_total_mib", "memory_reserved_mib")
    )
    used = dict(_fraction_use([r[0] for r in rows]))
    out = {}
    for pk, host_id, product, gstate, mem, reserved in rows:
        cap = gpu_capacity(SimpleNamespace(memory_total_mib=mem, memory_reserved_mib=reserved))
        if names.get(host_id) is None or cap is None:
            continue
        m, p = used.get(pk, (0, 0))
        out[pk] = [pk, (product or "").lower(), cap - m, 100 - p, gstate == GpuState.FREE]
    return out


def _fraction_use(gpu_ids=None):
    """``(GPU id, (memory MiB, compute %))`` the active fractions use on shared GPUs (all, or
    those of ``gpu_ids``)."""
    qs = AllocationItem.objects.filter(active=True, kind=AllocationKind.FRACTION, gpu__state=GpuState.SHARED)
    if gpu_ids is not None:
        qs = qs.filter(gpu_id__in=list(gpu_ids))
    for gpu_id, m, p in (
        qs.values("gpu_id")
        .annotate(m=Sum("memory_mib"), p=Sum("compute_pct"))
        .values_list("gpu_id", "m", "p")
    ):
        yield gpu_id, (m or 0, p or 0)


def fair_shares(now: datetime) -> dict[int, tuple[float, float]]:
    """Tenant id → ``(weight, GPU-equivalent seconds used in the last
    WEFT_SCHEDULER_FAIRSHARE_WINDOW_S)``: each job's GPUs from placement to its end (or now)."""
    start = now.timestamp() - settings.WEFT_SCHEDULER_FAIRSHARE_WINDOW_S
    usage: dict[int, float] = defaultdict(float)
    for tenant, kind, count, pct, placed_at, ended_at in (
        Job.objects.filter(placed_at__isnull=False)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=datetime.fromtimestamp(start, tz=now.tzinfo)))
        .values_list("tenant_id", "kind", "count", "compute_pct", "placed_at", "ended_at")
    ):
        t0 = max(placed_at.timestamp(), start)
        t1 = min((ended_at or now).timestamp(), now.timestamp())
        if t1 > t0:
            usage[tenant] += gpu_equivalents(kind, count, pct) * (t1 - t0)
    weights = dict(TenantShare.objects.values_list("tenant_id", "weight"))
    tenants = set(usage) | set(weights)
    return {t: (float(weights.get(t, 1)), usage.get(t, 0.0)) for t in tenants}
