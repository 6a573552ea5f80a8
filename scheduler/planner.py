"""One scheduling pass, planned in memory (pure Python, no Django).

``scheduler.services.queue.run_pass`` loads the queue and the free state from the database, calls
:func:`plan_pass`, then binds the plan job by job through the pools' allocation service. The plan
is what the issue's "Queue" section asks of a pass (issue 12):

1. **Order** (:func:`fair_order`): priority first (higher first); within one priority, tenants
   take turns by fair share — the tenant whose recent GPU usage divided by its weight is lowest
   goes next, and each job it is given is charged to it (GPU-equivalents × time limit) before the
   next turn; a tenant's own jobs in submission order. The order is fixed before placing (a job
   that does not place still takes its turn), so the queue page shows the order the pass uses.
2. **Quota**: a job whose pool would pass its quota (``quota_gpus``/``quota_slices``, counted as
   the pools' service counts them, plus what this pass placed) stays pending with code
   ``quota``; the engine is not asked and it gets no reservation.
3. **Placement** (``scheduler.placement.place``) on the free state as this pass left it: every
   placement takes its GPUs from the in-memory :class:`Inventory` at once, so two jobs of one
   pass never get the same GPU, slice or share (the plan counts GPUs per host; the binding picks
   which ones). The engine is not run when the counts already answer: no eligible fabric has
   that many free GPUs (``capacity``), or — for a whole-host shape the engine already judged
   ``capacity``/``fragmentation`` in this pass — too few hosts with ``gpus_per_host`` free
   (``fragmentation``); an identical request right after an identical failure reuses it.
4. **Preemption**: a whole-GPU job that does not place tries
   ``scheduler.placement.select_victims`` over the held jobs that are preemptible and of lower
   priority (fewest victims first); the victims' GPUs go back to the inventory and the job is
   placed on them in the same pass (the binding preempts and places in one transaction). Within
   a budget, so that a pass stays short: the :data:`PREEMPT_CANDIDATES` lowest-priority
   candidates holding the most matching GPUs, :data:`PREEMPT_CHECKS` engine checks, and a
   request whose search failed is not searched again until some GPUs were released in the pass
   (the fewest victims are then the fewest among those candidates; the decision says so).
5. **Reservation and backfill** (EASY backfill): the first job in order that is pending for
   capacity, fragmentation or congestion (a shape that could fit once GPUs are released) is the
   *head*: the pass finds the earliest time it fits — held jobs release their GPUs at their
   expected end (start + time limit), in that order — and reserves the hosts of that placement
   from then. Every later job is placed around the reserved hosts (they are unusable to it), or
   on them only when its own time limit ends before the reservation starts. Either way the head
   can start at its reserved time: no GPU of its reserved hosts is held past it.
6. **The head keeps its reservation** across passes (issue 24, §4): its quota is counted at its
   reserved start, not only now. A job the last pass reserved for (``QueuedJob.reserved_start``)
   that the quota refuses now, but that the quota lets in once its pool's jobs ending by that
   start have ended (typically a job of the same pool backfilled on its hosts), is not relabelled
   ``quota``: it stays the head, is not placed now, and is reserved from no earlier than the time
   its quota allows (:meth:`_Pass._quota_deferred`). And a later job of the head's pool that would
   run past the reserved start is refused (``quota``) when the pool's GPUs held then, plus the
   head's, plus its own would pass the quota (:meth:`_Pass._reserved_quota_short`): otherwise the
   next pass would find the head over its quota and drop its reservation.

The output is a :class:`Plan`: one :class:`Outcome` per queued job, in order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from heapq import heapify, heappop, heappush
from typing import Any

from .locality import TIER_NAMES, Locality
from .placement import (
    PENDING_CAPACITY,
    PENDING_CONGESTION,
    PENDING_CONSTRAINT,
    PENDING_FRAGMENTATION,
    PLACED,
    Congestion,
    Decision,
    Fraction,
    FreeState,
    Request,
    RequestError,
    RunningJob,
    Segments,
    UnknownTier,
    place,
    select_victims,
)

PENDING_QUOTA = "quota"
#: GPU-equivalents of one MIG slice in fair-share usage (a GPU has up to 7 compute slices)
MIG_SLICE_SHARE = 1 / 7
#: codes for which the head job gets a reservation (it may fit once GPUs are released)
RESERVABLE = (PENDING_CAPACITY, PENDING_FRAGMENTATION, PENDING_CONGESTION)
_LIST_MAX = 5
#: preemption budget per job: candidates handed to ``select_victims`` (lowest priority, most
#: GPUs first) and its engine checks (``max_checks``)
PREEMPT_CANDIDATES = 16
PREEMPT_CHECKS = 100


def gpu_equivalents(kind: str, count: int, compute_pct: int | None = None) -> float:
    """What a request weighs in fair-share usage: whole GPUs 1 each, a MIG slice
    :data:`MIG_SLICE_SHARE`, a fraction its compute share (``compute_pct`` / 100)."""
    if kind == "mig":
        return count * MIG_SLICE_SHARE
    if kind == "fraction":
        return (compute_pct or 0) / 100
    return float(count)


# --------------------------------------------------------------------------------------------
# Input shapes


@dataclass(frozen=True, slots=True)
class PoolInfo:
    """A pool as the pass sees it: its filters, quotas and what it holds now (the pools'
    ``pool_usage``: whole GPUs + distinct GPUs with fractions; slices). ``gpu_model`` lower case."""

    pool_id: int
    name: str
    gpu_model: str = ""
    fabric_id: int | None = None
    quota_gpus: int | None = None
    quota_slices: int | None = None
    used_gpus: int = 0
    used_slices: int = 0
    fraction_gpus: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class QueuedJob:
    """A pending job. ``kind`` gpu/mig/fraction; ``tier`` 0-4 or None with ``tier_required``;
    ``time_limit_s`` (the site default when the job has none); ``submitted`` epoch seconds;
    ``gpu_model`` lower case (the product name must contain it, on top of the pool's filter);
    ``reserved_start``: the start (epoch seconds) of the reservation the last pass gave it
    (``Job.reserved_start``), None when it had none."""

    job_id: int
    tenant_id: int
    pool_id: int
    priority: int
    kind: str = "gpu"
    count: int = 1
    gpu_model: str = ""
    mig_profile: str = ""
    memory_mib: int | None = None
    compute_pct: int | None = None
    gpus_per_host: int | None = None
    segments: tuple[int, int, int] | None = None  # (count, hosts, tier)
    tier: int | None = None
    tier_required: bool = False
    time_limit_s: float = 86400.0
    submitted: float = 0.0
    reserved_start: float | None = None

    @property
    def weight(self) -> float:
        return gpu_equivalents(self.kind, self.count, self.compute_pct)

    def request(self, fabric_id: int | None) -> Request:
        """The engine's request (raises RequestError/UnknownTier for an inconsistent job)."""
        seg = Segments(*self.segments) if self.segments else None
        frac = Fraction(self.memory_mib or 0, self.compute_pct or 0) if self.kind == "fraction" else None
        return Request(
            count=self.count, gpus_per_host=self.gpus_per_host, mig_profile=self.mig_profile if self.kind == "mig" else "",
            fraction=frac, segments=seg, tier=self.tier if self.tier_required else None, fabric_id=fabric_id,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class HeldJob:
    """A placed or running job: whole GPUs it holds as ``(host, model lower, count)``, when it is
    expected to end (epoch seconds: start + time limit), and whether it may be preempted."""

    job_id: int
    tenant_id: int
    pool_id: int
    priority: int
    preemptible: bool
    ends_at: float
    gpus: tuple[tuple[str, str, int], ...] = ()


@dataclass
class Inventory:
    """Free capacity by host name, taken from as the pass places (the pass's one copy).

    ``gpus``: free whole GPUs per host by model (lower case) ``{host: {model: n}}``; ``mig``: free
    MIG slices ``{host: {(profile, model): n}}``; ``shared``: GPUs open to a fraction
    ``{host: [[gpu_id, model, memory MiB free, compute % free, free whole]]}`` (free GPUs with a
    known memory size and GPUs already shared; loaded only when a fraction job waits). Which
    GPUs (slices) a placement gets is chosen when it is bound: the plan counts.
    """

    gpus: dict[str, dict[str, int]] = field(default_factory=dict)
    mig: dict[str, dict[tuple[str, str], int]] = field(default_factory=dict)
    shared: dict[str, list[list]] = field(default_factory=dict)
    version: int = 0
    released: int = 0
    fabric_of: dict[str, int] = field(default_factory=dict, repr=False)
    _views: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict, repr=False)
    _totals: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict, repr=False)
    _whole: dict[tuple[tuple[str, str], int], dict[int, int]] = field(default_factory=dict, repr=False)

    @staticmethod
    def matches(key: tuple[str, str], model: str) -> bool:
        """A model (lower case) passes ``key`` = (pool's filter, job's filter), both substrings."""
        return key[0] in model and key[1] in model

    def reset_views(self, fabric_of: Mapping[str, int]) -> None:
        """Start a pass: host → fabric id (for per-fabric totals), no cached view."""
        self.fabric_of = dict(fabric_of)
        self._views.clear()
        self._totals.clear()
        self._whole.clear()

    def gpu_view(self, key: tuple[str, str]) -> dict[str, int]:
        """host → free whole GPUs whose model matches ``key``; cached and kept current by the
        ``take_*``/``give_*`` methods. Do not modify."""
        view = self._views.get(key)
        if view is None:
            view = {}
            totals: dict[int, int] = defaultdict(int)
            for h, models in self.gpus.items():
                n = sum(k for m, k in models.items() if key[0] in m and key[1] in m)
                if n:
                    view[h] = n
                    totals[self.fabric_of.get(h, -1)] += n
            self._views[key] = view
            self._totals[key] = totals
        return view

    def gpu_totals(self, key: tuple[str, str]) -> dict[int, int]:
        """fabric id → free whole GPUs matching ``key`` (-1: hosts outside the tree)."""
        self.gpu_view(key)
        return self._totals[key]

    def whole_hosts(self, key: tuple[str, str], p: int) -> dict[int, int]:
        """fabric id → hosts with at least ``p`` free whole GPUs matching ``key`` (kept current)."""
        got = self._whole.get((key, p))
        if got is None:
            got = defaultdict(int)
            for h, n in self.gpu_view(key).items():
                if n >= p:
                    got[self.fabric_of.get(h, -1)] += 1
            self._whole[(key, p)] = got
        return got

    def _adjust(self, host: str, model: str, delta: int) -> None:
        models = self.gpus.setdefault(host, {})
        models[model] = models.get(model, 0) + delta
        if not models[model]:
            del models[model]
        fid = self.fabric_of.get(host, -1)
        for vkey, view in self._views.items():
            if vkey[0] in model and vkey[1] in model:
                before = view.get(host, 0)
                left = before + delta
                if left > 0:
                    view[host] = left
                else:
                    view.pop(host, None)
                self._totals[vkey][fid] += delta
                for (wkey, p), counts in self._whole.items():
                    if wkey == vkey:
                        counts[fid] += (left >= p) - (before >= p)
        self.version += 1

    def mig_view(self, key: tuple[str, str]) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for h, slices in self.mig.items():
            for (prof, m), n in slices.items():
                if n and key[0] in m and key[1] in m:
                    d = out.setdefault(h, {})
                    d[prof] = d.get(prof, 0) + n
        return out

    def shared_view(self, key: tuple[str, str]) -> dict[str, list[tuple[int, int]]]:
        return {
            h: [(g[2], g[3]) for g in lst if key[0] in g[1] and key[1] in g[1]]
            for h, lst in self.shared.items()
            if lst
        }

    def take_gpus(self, host: str, n: int, key: tuple[str, str]) -> list[tuple[str, int]]:
        """Take ``n`` free whole GPUs matching ``key`` on ``host`` (models in name order);
        returns ``[(model, count)]``."""
        took = []
        need = n
        for model in sorted(self.gpus.get(host, {})):
            if need and key[0] in model and key[1] in model:
                k = min(need, self.gpus[host][model])
                took.append((model, k))
                need -= k
        if need:
            raise ValueError(f"{host}: {n} GPUs asked, {n - need} free")  # the engine never does this
        for model, k in took:
            self._adjust(host, model, -k)
            gone = k  # these GPUs are no longer open to a fraction either (the lowest ids)
            for g in self.shared.get(host, []):
                if gone and g[4] and g[1] == model:
                    g[4], g[3], gone = False, 0, gone - 1
        return took

    def give_gpus(self, host: str, gpus: Iterable[tuple[str, int]]) -> None:
        """Put whole GPUs back (a preempted job's): ``[(model, count)]``."""
        for model, k in gpus:
            self._adjust(host, model, k)
        self.released += 1

    def take_slices(self, host: str, n: int, profile: str, key: tuple[str, str]) -> None:
        slices = self.mig.get(host, {})
        need = n
        for prof, model in sorted(slices):
            if need and prof == profile and key[0] in model and key[1] in model:
                k = min(need, slices[(prof, model)])
                slices[(prof, model)] -= k
                need -= k
        if need:
            raise ValueError(f"{host}: {n} {profile} slices asked, {n - need} free")
        self.version += 1

    def take_share(self, host: str, mem: int, pct: int, key: tuple[str, str]) -> int:
        """A GPU on ``host`` with room for the fraction: an already shared one first (packing),
        then a free one; its room shrinks (a free GPU stops being free whole). Its id."""
        cands = [
            g
            for g in self.shared.get(host, [])
            if key[0] in g[1] and key[1] in g[1] and g[2] >= mem and g[3] >= pct
        ]
        if not cands:
            raise ValueError(f"{host}: no GPU with {mem} MiB and {pct} % free")
        g = min(cands, key=lambda g: (g[4], g[0]))
        g[2] -= mem
        g[3] -= pct
        if g[4]:  # no longer free whole
            g[4] = False
            self._adjust(host, g[1], -1)
        self.version += 1
        return g[0]


@dataclass(frozen=True, slots=True)
class Reservation:
    """The head job's reservation: it starts by ``start`` (epoch seconds) on ``hosts``; the head's
    pool and whole GPUs (``pool_id``, ``count``: what its pool's quota keeps for it then)."""

    job_id: int
    start: float
    hosts: frozenset[str]
    waits_for: tuple[int, ...] = ()
    pool_id: int | None = None
    count: int = 0


@dataclass
class Outcome:
    """What the pass decided for one job, in pass order (``position`` 0 first).

    ``code``: ``placed`` or a pending code (``quota`` and the engine's). Placed: ``placed`` (host →
    GPUs, slices or shares; the binding picks the free GPUs of those hosts), ``gpu_ids`` (the
    GPU of a fraction), ``victims``
    (job ids preempted for it), ``backfilled`` (placed on reserved hosts because it ends first).
    ``decision``: the engine's decision as a dict (``Decision.as_dict``); ``reasons``: what people
    read; ``reservation``: set on the head job.
    """

    job_id: int
    position: int
    code: str
    reasons: list[str] = field(default_factory=list)
    decision: dict[str, Any] = field(default_factory=dict)
    placed: dict[str, int] = field(default_factory=dict)
    gpu_ids: list[int] = field(default_factory=list)
    victims: list[int] = field(default_factory=list)
    backfilled: bool = False
    reservation: Reservation | None = None

    @property
    def ok(self) -> bool:
        return self.code == PLACED


@dataclass
class Plan:
    """The pass's outcomes in order, the head job's reservation, and counters for the summary."""

    outcomes: list[Outcome]
    reservation: Reservation | None = None
    engine_calls: int = 0

    def summary(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for o in self.outcomes:
            out[o.code] += 1
        out["preempted"] = sum(len(o.victims) for o in self.outcomes)
        out["backfilled"] = sum(1 for o in self.outcomes if o.backfilled)
        return dict(out)


# --------------------------------------------------------------------------------------------
# Order


def fair_order(
    jobs: Iterable[QueuedJob], shares: Mapping[int, tuple[float, float]] | None = None
) -> list[QueuedJob]:
    """Jobs in pass order (module docstring, step 1). ``shares``: tenant id → ``(weight, recent
    usage in GPU-seconds)``; a tenant absent has weight 1 and no usage. Ties: lower tenant id."""
    shares = shares or {}
    by_prio: dict[int, dict[int, list[QueuedJob]]] = defaultdict(lambda: defaultdict(list))
    for j in jobs:
        by_prio[j.priority][j.tenant_id].append(j)
    out: list[QueuedJob] = []
    for prio in sorted(by_prio, reverse=True):
        tenants = by_prio[prio]
        heap = []
        for t, lst in tenants.items():
            lst.sort(key=lambda j: (j.submitted, j.job_id))
            weight, usage = shares.get(t, (1.0, 0.0))
            heap.append((usage / max(weight, 1e-9), t, 0))
        heapify(heap)
        while heap:
            score, t, i = heappop(heap)
            job = tenants[t][i]
            out.append(job)
            if i + 1 < len(tenants[t]):
                weight = max(shares.get(t, (1.0, 0.0))[0], 1e-9)
                heappush(heap, (score + job.weight * job.time_limit_s / weight, t, i + 1))
    return out


# --------------------------------------------------------------------------------------------
# The pass


class _Pass:
    def __init__(self, locality, inv, unusable, congestion, pools, held, now):
        self.loc = locality
        self.inv = inv
        self.unusable: dict[str, str] = dict(unusable)
        self.cong = congestion
        self.pools = pools
        self.used = {
            p: [info.used_gpus, info.used_slices, set(info.fraction_gpus)] for p, info in pools.items()
        }
        self.held: dict[int, HeldJob] = {h.job_id: h for h in held}
        self.now = now
        self.reservation: Reservation | None = None
        self.res_unusable: dict[str, str] = self.unusable
        self.engine_calls = 0
        self._failed: dict[tuple, tuple[int, Decision]] = {}
        self._pre_failed: dict[tuple, int] = {}
        self._judged: set[tuple] = set()  # (request, key): the engine said capacity/fragmentation

    # -- helpers

    def _place(self, free: FreeState, req: Request) -> Decision:
        self.engine_calls += 1
        return place(self.loc, free, req, self.cong)

    def _quota_short(self, job: QueuedJob, pool: PoolInfo) -> str | None:
        used_gpus, used_slices, frac = self.used[job.pool_id]
        if job.kind == "mig":
            if pool.quota_slices is not None and used_slices + job.count > pool.quota_slices:
                return f"pool {pool.name}: {used_slices} MIG slices held + {job.count} asked > quota {pool.quota_slices}"
            return None
        more = job.count if job.kind == "gpu" else (0 if frac else 1)
        if pool.quota_gpus is not None and used_gpus + more > pool.quota_gpus:
            return f"pool {pool.name}: {used_gpus} GPUs held + {more} asked > quota {pool.quota_gpus}"
        return None

    def _pool_used_at(self, pool_id: int, at: float) -> tuple[int, list[HeldJob]]:
        """The pool's whole GPUs still held at ``at`` (epoch s): what it holds now (as this pass
        left it) less the GPUs of its held jobs expected to end by then (start + time limit),
        and those jobs (by end). GPUs not held by a queue job (direct allocations, fractions)
        never end here."""
        ending = sorted(
            (h for h in self.held.values() if h.pool_id == pool_id and h.gpus and h.ends_at <= at),
            key=lambda h: (h.ends_at, h.job_id),
        )
        return self.used[pool_id][0] - sum(k for h in ending for _, _, k in h.gpus), ending

    def _quota_deferred(
        self, job: QueuedJob, pool: PoolInfo, short: str
    ) -> tuple[float, list[HeldJob]] | None:
        """For a whole-GPU job the quota refuses now (``short``) that held a reservation after the
        last pass (``reserved_start`` later than now) and may be the head (no reservation yet in
        this pass): when the pool's jobs ending by that start free enough of its quota, the
        earliest time the quota lets it in and the jobs that end by then; else None (module
        docstring, step 6)."""
        at = job.reserved_start
        if (
            job.kind != "gpu"
            or at is None
            or at <= self.now
            or self.reservation is not None
            or pool.quota_gpus is None
        ):
            return None
        used_then, ending = self._pool_used_at(job.pool_id, at)
        if used_then + job.count > pool.quota_gpus:
            return None
        used = self.used[job.pool_id][0]
        for i, h in enumerate(ending):  # the first end after which it fits
            used -= sum(k for _, _, k in h.gpus)
            if used + job.count <= pool.quota_gpus:
                return max(h.ends_at, self.now), ending[: i + 1]
        return None  # unreachable: it fits once all of them ended

    def _reserved_quota_short(self, job: QueuedJob, pool: PoolInfo) -> str | None:
        """Why a job of the head's pool that would still run at the head's reserved start may not
        be placed: the pool's whole GPUs held then, the head's and its own pass the quota (module
        docstring, step 6); None when it may."""
        res = self.reservation
        if (
            res is None
            or res.pool_id != job.pool_id
            or res.job_id == job.job_id
            or job.kind == "mig"
            or pool.quota_gpus is None
            or self.now + job.time_limit_s <= res.start
        ):
            return None
        more = job.count if job.kind == "gpu" else (0 if self.used[job.pool_id][2] else 1)
        used_then, _ = self._pool_used_at(job.pool_id, res.start)
        if used_then + res.count + more <= pool.quota_gpus:
            return None
        return (
            f"pool {pool.name}: {used_then} GPUs held at job {res.job_id}'s reserved start + {res.count} "
            f"reserved for it + {more} asked > quota {pool.quota_gpus}"
        )

    def _keep_reservation(
        self,
        job: QueuedJob,
        position: int,
        req: Request,
        key,
        short: str,
        deferred: tuple[float, list[HeldJob]],
    ) -> Outcome:
        """A head whose quota frees by its reserved start (:meth:`_quota_deferred`): not placed
        now; its pending code is the engine's when it does not fit now either (else ``quota``),
        and it is reserved for from no earlier than the time its quota allows."""
        at, ending = deferred
        free = self._free(job, key, False)
        d = self._short_capacity(job, req, free, key) or self._place(free, req)
        if not d.ok and d.code not in RESERVABLE:
            return Outcome(
                job.job_id, position, PENDING_QUOTA,
                [short, "pending for quota: the job holds no GPUs and gets no reservation"],
            )  # fmt: skip
        names = ", ".join(f"job {h.job_id}" for h in ending[:_LIST_MAX])
        more = f" and {len(ending) - _LIST_MAX} more" if len(ending) > _LIST_MAX else ""
        kept = (
            f"{short} now, but {names}{more} end{'s' if len(ending) == 1 else ''} before its reserved "
            f"start: the quota lets it in from then, so it keeps its reservation"
        )
        if d.ok:
            out = Outcome(job.job_id, position, PENDING_QUOTA, [kept], {"code": PENDING_QUOTA})
        else:
            out = Outcome(job.job_id, position, d.code, [*d.reasons, kept], d.as_dict())
        self._reserve(job, req, key, out, not_before=at)
        return out

    def _free(self, job: QueuedJob, key: tuple[str, str], reserved: bool) -> FreeState:
        unusable = self.res_unusable if reserved else self.unusable
        if job.kind == "gpu":
            return FreeState(gpus=self.inv.gpu_view(key), unusable=unusable)
        if job.kind == "mig":
            return FreeState(mig=self.inv.mig_view(key), unusable=unusable)
        return FreeState(shared=self.inv.shared_view(key), unusable=unusable)

    def _short_capacity(self, job: QueuedJob, req: Request, free: FreeState, key) -> Decision | None:
        """Pending without running the engine, for a plain or whole-host GPU request with no
        required tier: ``capacity`` when no eligible fabric has that many free GPUs on usable
        hosts; ``fragmentation`` for a whole-host request of a shape the engine already judged
        capacity/fragmentation in this pass (so not a constraint) when no eligible fabric has
        enough usable hosts with ``gpus_per_host`` free."""
        if job.kind != "gpu" or req.tier is not None or req.segments is not None:
            return None
        per_fabric = dict(self.inv.gpu_totals(key))
        per_fabric.pop(-1, None)  # hosts outside the tree
        unusable = free.unusable
        skipped = []
        for h in unusable:
            n = free.gpus.get(h, 0)
            if n and h in self.inv.fabric_of:
                skipped.append(h)
                per_fabric[self.inv.fabric_of[h]] -= n
        if req.fabric_id is not None:
            per_fabric = {req.fabric_id: per_fabric.get(req.fabric_id, 0)}
            skipped = [h for h in skipped if self.inv.fabric_of[h] == req.fabric_id]
        best = max(per_fabric.values(), default=0)
        reasons = [f"{req.count} GPUs asked, {best} free in the best eligible fabric"]
        code = PENDING_CAPACITY
        if best >= req.count:
            p = req.gpus_per_host
            if not p or (req, key) not in self._judged:
                return None
            # the engine judged this shape before in this pass (not a constraint): whole hosts too few
            hosts = dict(self.inv.whole_hosts(key, p))
            hosts.pop(-1, None)
            for h in skipped:
                if free.gpus.get(h, 0) >= p:
                    hosts[self.inv.fabric_of[h]] -= 1
            if req.fabric_id is not None:
                hosts = {req.fabric_id: hosts.get(req.fabric_id, 0)}
            ok = max(hosts.values(), default=0)
            if ok >= req.slots:
                return None
            code = PENDING_FRAGMENTATION
            reasons = [
                f"{req.count} GPUs asked and {best} free, but not in the shape asked for",
                f"{ok} hosts have ≥ {p} free GPUs ({req.slots} needed in one domain)",
            ]
        if skipped:
            skipped.sort()
            shown = ", ".join(f"{h} ({free.reason_unusable(h)})" for h in skipped[:_LIST_MAX])
            more = f" and {len(skipped) - _LIST_MAX} more" if len(skipped) > _LIST_MAX else ""
            reasons.append(
                f"not counted: {len(skipped)} unusable host{'s' if len(skipped) != 1 else ''}: {shown}{more}"
            )
        return Decision(code=code, reasons=reasons)

    # -- one job

    def consider(self, job: QueuedJob, position: int) -> Outcome:
        pool = self.pools.get(job.pool_id)
        if pool is None:
            return Outcome(job.job_id, position, PENDING_CONSTRAINT, [f"pool {job.pool_id} is gone"])
        short = self._quota_short(job, pool)
        deferred = self._quota_deferred(job, pool, short) if short else None
        if short and deferred is None:
            return Outcome(
                job.job_id, position, PENDING_QUOTA,
                [short, "pending for quota: the job holds no GPUs and gets no reservation"],
            )  # fmt: skip
        if not short:
            short = self._reserved_quota_short(job, pool)
            if short:
                return Outcome(
                    job.job_id, position, PENDING_QUOTA,
                    [short, "pending for quota: it would run past that start; the job holds no GPUs"],
                )  # fmt: skip
        try:
            req = job.request(pool.fabric_id)
        except (RequestError, UnknownTier) as exc:
            return Outcome(
                job.job_id, position, PENDING_CONSTRAINT, [f"request refused by the engine: {exc}"]
            )
        key = (pool.gpu_model, job.gpu_model)
        if deferred is not None:
            return self._keep_reservation(job, position, req, key, short, deferred)
        res = self.reservation
        use_res = res is not None and res.job_id != job.job_id
        free = self._free(job, key, use_res)
        notes: list[str] = []
        cache_key = (req, key, use_res, job.kind)
        cached = self._failed.get(cache_key)
        if cached is not None and cached[0] == self.inv.version:
            d = cached[1]
        else:
            d = self._short_capacity(job, req, free, key) or self._place(free, req)
        backfilled = False
        if not d.ok and use_res and self.now + job.time_limit_s <= res.start:
            d2 = self._place(self._free(job, key, False), req)
            if d2.ok:
                d, backfilled = d2, True
                notes.append(
                    f"backfilled on hosts reserved for job {res.job_id}: its time limit ends before that "
                    f"job's reserved start"
                )
        victims: list[int] = []
        if not d.ok and job.kind == "gpu" and d.code != PENDING_CONSTRAINT:
            pre = self._preempt(job, req, free, key)
            if pre is not None:
                d, victims = pre
        if not d.ok:
            self._failed[cache_key] = (self.inv.version, d)
            if d.code in (PENDING_CAPACITY, PENDING_FRAGMENTATION):
                self._judged.add((req, key))
            out = Outcome(job.job_id, position, d.code, list(d.reasons), d.as_dict())
            if self.reservation is None and d.code in RESERVABLE and job.kind == "gpu":
                self._reserve(job, req, key, out)
            elif use_res and d.code in RESERVABLE:
                n = len(res.hosts)
                out.reasons.append(
                    f"{n} host{'s' if n != 1 else ''} reserved for job {res.job_id} "
                    f"{'are' if n != 1 else 'is'} not counted (this job's time limit does not end before "
                    f"that job's reserved start)"
                )
            return out
        out = Outcome(job.job_id, position, PLACED, list(d.reasons) + notes, d.as_dict())
        out.victims = victims
        out.backfilled = backfilled
        if job.tier is not None and not job.tier_required:
            met = d.tier is not None and d.tier <= job.tier
            out.reasons.append(
                f"preferred: within one {TIER_NAMES[job.tier]} — "
                + ("met" if met else f"not met, spans a {TIER_NAMES[d.tier]}")
            )
        self._take(job, pool, key, d, out)
        return out

    def _take(self, job: QueuedJob, pool: PoolInfo, key, d: Decision, out: Outcome) -> None:
        used = self.used[job.pool_id]
        out.placed = dict(d.placed)
        gpus: list[tuple[str, str, int]] = []
        if job.kind == "gpu":
            for host, n in sorted(d.placed.items()):
                gpus.extend((host, m, k) for m, k in self.inv.take_gpus(host, n, key))
            used[0] += job.count
        elif job.kind == "mig":
            for host, n in sorted(d.placed.items()):
                self.inv.take_slices(host, n, job.mig_profile, key)
            used[1] += job.count
        else:
            (host,) = d.placed
            gpu = self.inv.take_share(host, job.memory_mib or 0, job.compute_pct or 0, key)
            out.gpu_ids.append(gpu)
            if gpu not in used[2]:
                used[2].add(gpu)
                used[0] += 1
        self.held[job.job_id] = HeldJob(
            job.job_id,
            job.tenant_id,
            job.pool_id,
            job.priority,
            False,
            self.now + job.time_limit_s,
            tuple(gpus),
        )

    # -- preemption

    def _preempt(
        self, job: QueuedJob, req: Request, free: FreeState, key
    ) -> tuple[Decision, list[int]] | None:
        """Victims for ``job`` among the held jobs (module docstring, step 4), within a budget:
        the :data:`PREEMPT_CANDIDATES` lowest-priority candidates holding the most matching GPUs
        on usable hosts, and :data:`PREEMPT_CHECKS` engine checks; a search that failed is not
        repeated for the same request until some GPUs are released in this pass."""
        fail_key = (req, key, free.unusable is self.res_unusable, job.priority)
        if self._pre_failed.get(fail_key) == self.inv.released:
            return None
        unusable = free.unusable
        sites = self.loc.hosts
        fid = req.fabric_id

        def usable(h: str) -> bool:
            site = sites.get(h)
            return site is not None and h not in unusable and (fid is None or site.fabric_id == fid)

        running = []
        for h in self.held.values():
            if not h.preemptible or h.priority >= job.priority or not h.gpus:
                continue
            placed: dict[str, int] = defaultdict(int)
            for host, model, k in h.gpus:
                if key[0] in model and key[1] in model and usable(host):
                    placed[host] += k
            if placed:
                running.append(RunningJob(h.job_id, h.priority, dict(placed), True))
        # necessary: the free GPUs and all candidates' together cover the request
        have = sum(n for h, n in free.gpus.items() if usable(h)) + sum(
            sum(r.placed.values()) for r in running
        )
        if not running or have < req.count:
            self._pre_failed[fail_key] = self.inv.released
            return None
        running.sort(key=lambda r: (r.priority, -sum(r.placed.values()), r.job_id))
        capped = len(running) > PREEMPT_CANDIDATES
        running = running[:PREEMPT_CANDIDATES]
        self.engine_calls += 1
        pre = select_victims(
            self.loc,
            free,
            req,
            running,
            priority=job.priority,
            congestion=self.cong,
            max_checks=PREEMPT_CHECKS,
        )
        if pre is None or not pre.decision.ok or not pre.victims:
            self._pre_failed[fail_key] = self.inv.released
            return None
        victims = sorted(pre.victims)
        for v in victims:
            held = self.held.pop(v)
            by_host: dict[str, list[tuple[str, int]]] = defaultdict(list)
            for host, model, k in held.gpus:
                by_host[host].append((model, k))
            for host, lst in by_host.items():
                self.inv.give_gpus(host, lst)
            used = self.used.get(held.pool_id)
            if used is not None:
                used[0] -= sum(k for _, _, k in held.gpus)
        d = pre.decision
        d.reasons.append(
            f"preempts {len(victims)} lower-priority preemptible job{'s' if len(victims) != 1 else ''}: "
            + ", ".join(f"job {v}" for v in victims)
            + (" (search stopped at its budget)" if pre.truncated else "")
            + (f" (among the {PREEMPT_CANDIDATES} lowest-priority candidates)" if capped else "")
        )
        return d, victims

    # -- reservation

    def _reserve(self, job: QueuedJob, req: Request, key, out: Outcome, not_before: float = 0.0) -> None:
        """The earliest time the head job fits as held jobs end (binary search over the end
        order: once it fits, more released GPUs keep it fitting), and that placement's hosts;
        never before ``not_before`` (epoch s: when its quota lets it in)."""
        base = self.inv.gpu_view(key)
        ending = sorted(self.held.values(), key=lambda h: (h.ends_at, h.job_id))
        releases = []
        for h in ending:
            per: dict[str, int] = defaultdict(int)
            for host, model, k in h.gpus:
                if key[0] in model and key[1] in model:
                    per[host] += k
            releases.append(per)

        def state(k: int) -> FreeState:
            g = dict(base)
            for per in releases[:k]:
                for host, n in per.items():
                    g[host] = g.get(host, 0) + n
            return FreeState(gpus=g, unusable=self.unusable)

        lo, hi = 1, len(ending)
        found: tuple[int, Decision] | None = None
        if hi:
            d = self._place(state(hi), req)
            if d.ok:
                found = (hi, d)
                while lo < hi:
                    mid = (lo + hi) // 2
                    d = self._place(state(mid), req)
                    if d.ok:
                        hi, found = mid, (mid, d)
                    else:
                        lo = mid + 1
        if found is None:
            out.reasons.append(
                "no reservation: it does not fit even when every placed and running job has ended"
            )
            return
        k, d = found
        start = max(ending[k - 1].ends_at, self.now, not_before)
        waits = tuple(h.job_id for i, h in enumerate(ending[:k]) if releases[i])
        res = Reservation(job.job_id, start, frozenset(d.placed), waits, job.pool_id, job.count)
        self.reservation = res
        self.res_unusable = dict(self.unusable)
        for h in res.hosts:
            self.res_unusable.setdefault(h, f"reserved for job {job.job_id}")
        out.reservation = res
        shown = ", ".join(f"job {j}" for j in waits[:_LIST_MAX])
        more = f" and {len(waits) - _LIST_MAX} more" if len(waits) > _LIST_MAX else ""
        n = len(res.hosts)
        out.reasons.append(
            f"reserved {n} host{'s' if n != 1 else ''} from when {shown}{more} end{'s' if len(waits) == 1 else ''} "
            f"(time limits): later jobs backfill only around {'them' if n != 1 else 'it'} or if they end first"
        )


def plan_pass(
    locality: Locality,
    inventory: Inventory,
    queued: Sequence[QueuedJob],
    *,
    pools: Mapping[int, PoolInfo],
    held: Iterable[HeldJob] = (),
    shares: Mapping[int, tuple[float, float]] | None = None,
    unusable: Mapping[str, str] | None = None,
    congestion: Congestion | None = None,
    now: float = 0.0,
) -> Plan:
    """Plan one pass (module docstring): ``queued`` in :func:`fair_order`, each placed on
    ``inventory`` as the pass leaves it (``inventory`` is modified: it ends as the free state
    after the plan). ``unusable``: host → reason (links down, unreachable). ``now``: epoch
    seconds (reservations and backfill compare time limits with it). Pure: no database."""
    inventory.reset_views({h: s.fabric_id for h, s in locality.hosts.items()})
    p = _Pass(locality, inventory, unusable or {}, congestion, pools, held, now)
    outcomes = [p.consider(job, i) for i, job in enumerate(fair_order(queued, shares))]
    return Plan(outcomes, p.reservation, p.engine_calls)
