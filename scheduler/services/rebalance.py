"""The rebalancing worker (issue 12, "Rebalancing worker"): reclaim borrowed GPUs for owners with
pending work, move preemptible jobs so that whole units (leaves, rail pods) come free, and report
jobs that run across persistently congested links when a better placement exists.

:func:`plan_rebalance` builds the list of :class:`Action` from the stored state, with the same
readers as a scheduling pass (``scheduler.services.state``) and the placement engine
(``scheduler.placement.place``/``select_victims``); it writes nothing. :func:`run_rebalance`
plans and, unless ``dry_run``, executes: a dry run lists exactly the actions the real run takes
on the same state (both call :func:`plan_rebalance`; the plan is deterministic).

Actions, planned in this order on one in-memory copy of the free GPUs (each sees the GPUs the
ones before it took or freed, as a pass does):

* ``reclaim`` (executed) — the pools' guarantee (``Pool.guaranteed_gpus``, issue 11): a pending
  whole-GPU job whose pool holds fewer GPUs than its guarantee (its own count included) and that
  does not place on the free GPUs, while other pools' *borrowed* allocations
  (``Allocation.borrowed``) of preemptible jobs hold GPUs it may use. Victims: the fewest such
  jobs whose GPUs let it place (``select_victims``; the guarantee is the pool's right whatever
  the priorities, as in ``pools.services.allocation``'s own reclaim; except that a preemptible
  job does not reclaim from a higher-priority one, which a pass would then preempt it for: the
  two would take the GPUs from each other on every run). Executed as a pass binds a
  preemption: one transaction preempts the victims (requeued when they asked:
  ``Job.requeue``) and places the job (``queue._bind``), with a ``job.reclaimed`` event and a
  ``job.reclaim`` audit entry. The gap this fills: a pass places on named GPUs, and the pools'
  allocation service reclaims only for requests by count, so no pass ever reclaimed; and a
  pass preempts only for a higher priority. A pass that leaves such a job pending ends with
  these reclaims itself (:func:`reclaim_for_guarantees`); the periodic run catches the rest.
* ``move`` — a unit that is partly used, only by placed/running whole-GPU jobs, whose jobs all
  place elsewhere (not on a whole free unit, not on hosts reserved for the queue's head, not on
  unusable hosts; never spanning a higher tier than now): moving them frees the unit whole.
  Executed (``job.moved`` event, ``job.move`` audit; the job is ``placed`` on its new hosts,
  its prolog starts it again) when every job of the set is preemptible and some whole-GPU job is
  pending for ``fragmentation`` (moving running work helps only a job that waits for a shape);
  otherwise proposed (listed, a ``job.move_proposed`` event once per target). At most
  :data:`MAX_MOVES` jobs moved, and as many in proposals, per run; the proposals of one run can
  all be made together (``_plan_moves``).
* ``congested`` (reported) — a placed/running job whose units' uplinks (or, when it spans
  above them, its blocks' or spine groups' uplinks) carry a port with an open congestion or error
  alarm (``state.congestion_marks``; the counter rules raise ``port.congestion`` only after
  ``consecutive`` sweeps over the threshold: persistent, not one bad sample) and for which the
  engine finds a placement, on the free GPUs plus its own, that uses no marked domain and spans no
  higher tier. A ``job.congested`` event once per job and target.

Every action carries its ``reason``. The real run holds the pass lock (``queue.PASS_LOCK``): never
at the same time as a pass; a repeated run finds nothing more to do once its actions are done
(reclaimed jobs are placed; moved units are whole; reports are recorded once).

Errors: none raised for a refused action (another writer changed the job in between): its
``outcome`` says why and the next run plans again.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from accounts import audit
from events.models import Event
from pools.models import Pool
from pools.services.allocation import AllocationError
from weft.locks import single_instance

from ..choices import HOLDING, JobKind, JobState, PendingCode
from ..locality import TIER_NAMES, UNIT_TIER, Locality
from ..models import Job
from ..placement import (
    PLACED,
    Congestion,
    FreeState,
    RequestError,
    RunningJob,
    UnknownTier,
    place,
    select_victims,
)
from ..planner import HeldJob, Inventory, Outcome, fair_order
from . import state
from .queue import (  # the queue stays the one writer of jobs: the rebalancer binds through it
    PASS_LIMIT_S,
    PASS_LOCK,
    JobError,
    _bind,
    _event,
    move,
    queued_job,
)

log = logging.getLogger(__name__)

RECLAIM, MOVE, CONGESTED = "reclaim", "move", "congested"
#: jobs moved per run at most (each move restarts a job), and jobs in proposed moves at most
MAX_MOVES = 8
_SOURCE = "rebalance"


@dataclass
class Action:
    """One thing the rebalancer does or reports.

    ``kind``: ``reclaim`` / ``move`` / ``congested``; ``job_id`` the job it is about (reclaim:
    the pending job placed; move: the job moved; congested: the job reported); ``execute``:
    whether a real run carries it out (reports and proposals: False); ``reason``: what a person
    reads; ``placed``: host → GPUs where the job goes (or could go); ``before``: host → GPUs it
    holds now (``{}`` for a pending job); ``victims``: jobs preempted (reclaim); ``frees``:
    units a move set frees whole (names); ``details``: the engine's decision dict, the
    allocation the job holds when planned (``allocation``), the pools involved.
    """

    kind: str
    job_id: int
    reason: str
    execute: bool
    placed: dict[str, int] = field(default_factory=dict)
    before: dict[str, int] = field(default_factory=dict)
    victims: list[int] = field(default_factory=list)
    frees: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (the API's action list)."""
        return {
            "kind": self.kind,
            "job": self.job_id,
            "execute": self.execute,
            "reason": self.reason,
            "placed": dict(sorted(self.placed.items())),
            "before": dict(sorted(self.before.items())),
            "victims": list(self.victims),
            "frees": list(self.frees),
            "details": self.details,
        }


# --- the stored state, as plain shapes ------------------------------------------------------------


@dataclass
class _State:
    loc: Locality
    inv: Inventory
    unusable: dict[str, str]
    reserved: dict[str, str]  # host → reserved for the queue's head (job id)
    head: int | None
    cong: Congestion
    held: dict[int, HeldJob]
    jobs: dict[int, Job]
    pools: dict[int, Pool]
    used: dict[int, int]  # pool → GPUs held (pools' count)
    borrowed: set[int]  # jobs whose allocation holds borrowed GPUs
    fragmented: bool  # some whole-GPU job is pending for fragmentation
    now: datetime
    touched: set[int] = field(default_factory=set)

    def key(self, job: Job) -> tuple[str, str]:
        return ((self.pools[job.pool_id].gpu_model or "").lower(), (job.gpu_model or "").lower())

    def blocked(self, *, head_ok: int | None = None) -> dict[str, str]:
        """Unusable hosts plus the head's reserved ones (not for the head itself)."""
        if head_ok is not None and head_ok == self.head:
            return self.unusable
        return {**self.reserved, **self.unusable}


def _load(now: datetime) -> _State:
    loc = state.current_locality()
    inv = state.load_inventory(loc, {"gpu"})
    inv.reset_views({h: s.fabric_id for h, s in loc.hosts.items()})
    held = {h.job_id: h for h in state.held_jobs(loc)}
    jobs = {
        j.pk: j
        for j in Job.objects.filter(state__in=[*HOLDING, JobState.PENDING]).select_related("pool", "tenant")
    }
    pools = {
        p.pk: p
        for p in Pool.objects.select_related("tenant").filter(pk__in={j.pool_id for j in jobs.values()})
    }
    # a pool deleted between the two reads (its jobs go with it): leave its jobs out of this pass
    jobs = {pk: j for pk, j in jobs.items() if j.pool_id in pools}
    used = {pk: info.used_gpus for pk, info in state.pool_infos(pools).items()}
    borrowed = set(
        Job.objects.filter(
            state__in=HOLDING, allocation__borrowed=True, allocation__state="active"
        ).values_list("pk", flat=True)
    )
    reserved: dict[str, str] = {}
    head = None
    for pk, hosts in Job.objects.filter(state=JobState.PENDING, reserved_start__isnull=False).values_list(
        "pk", "reserved_hosts"
    ):
        head = pk
        for h in hosts or ():
            reserved.setdefault(h, f"reserved for job {pk}")
    fragmented = any(
        j.state == JobState.PENDING and j.kind == JobKind.GPU and j.pending_code == PendingCode.FRAGMENTATION
        for j in jobs.values()
    )
    return _State(
        loc, inv, state.unusable_hosts(loc), reserved, head, state.congestion_marks(loc), held, jobs, pools,
        used, borrowed, fragmented, now,
    )  # fmt: skip


def _label(job: Job) -> str:
    return f"{job} ({job.tenant.name})"


def _hosts_text(placed: dict[str, int]) -> str:
    return ", ".join(f"{h} ×{n}" for h, n in sorted(placed.items()))


def _per_host(held: HeldJob) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for host, _, k in held.gpus:
        out[host] += k
    return dict(out)


def _give(inv: Inventory, held: HeldJob) -> None:
    by_host: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for host, model, k in held.gpus:
        by_host[host].append((model, k))
    for host, lst in by_host.items():
        inv.give_gpus(host, lst)


def _take_back(inv: Inventory, held: HeldJob) -> None:
    """Undo :func:`_give` (the same models on the same hosts)."""
    for host, model, k in held.gpus:
        inv.take_gpus(host, k, (model, ""))


def _take(inv: Inventory, placed: dict[str, int], key) -> tuple[tuple[str, str, int], ...]:
    gpus = []
    for host, n in sorted(placed.items()):
        gpus.extend((host, m, k) for m, k in inv.take_gpus(host, n, key))
    return tuple(gpus)


# --- planning -------------------------------------------------------------------------------------


def plan_rebalance(now: datetime | None = None) -> list[Action]:
    """The actions a rebalancing run takes now (module docstring), in execution order. Reads the
    database, writes nothing; the same stored state gives the same list."""
    st = _load(now or timezone.now())
    return [*_plan_reclaims(st), *_plan_moves(st), *_plan_congested(st)]


def _plan_reclaims(st: _State) -> list[Action]:
    out: list[Action] = []
    pending = [j for j in st.jobs.values() if j.state == JobState.PENDING and j.kind == JobKind.GPU]
    if not pending or not st.borrowed:
        return out
    for q in fair_order([queued_job(j) for j in pending], state.fair_shares(st.now)):
        job = st.jobs[q.job_id]
        pool = st.pools[job.pool_id]
        used = st.used.get(pool.pk, 0)
        if not pool.guaranteed_gpus or used + job.count > pool.guaranteed_gpus:
            continue
        try:
            req = q.request(pool.fabric_id)
        except (RequestError, UnknownTier):
            continue
        key = st.key(job)
        blocked = st.blocked(head_ok=job.pk)
        free = FreeState(gpus=st.inv.gpu_view(key), unusable=blocked)
        if place(st.loc, free, req, st.cong).ok:
            continue  # the next pass places it without taking anything back
        cands = []
        for h in st.held.values():
            if (
                not h.preemptible
                or h.pool_id == pool.pk
                or h.job_id not in st.borrowed
                or h.job_id in st.touched
            ):
                continue
            if job.preemptible and h.priority > job.priority:
                continue  # the next pass would preempt the job for it again: no ping-pong
            placed: dict[str, int] = defaultdict(int)
            for host, model, k in h.gpus:
                if Inventory.matches(key, model) and host in st.loc.hosts and host not in blocked:
                    placed[host] += k
            if placed:
                cands.append(RunningJob(h.job_id, h.priority, dict(placed), True))
        if not cands:
            continue
        cands.sort(key=lambda r: r.job_id)
        pre = select_victims(
            st.loc, free, req, cands, priority=max(c.priority for c in cands) + 1, congestion=st.cong
        )
        if pre is None or not pre.decision.ok or not pre.victims:
            continue
        victims = sorted(pre.victims)
        taken = 0
        names = []
        for v in victims:
            h = st.held.pop(v)
            _give(st.inv, h)
            n = sum(k for _, _, k in h.gpus)
            st.used[h.pool_id] = st.used.get(h.pool_id, 0) - n
            taken += n
            vj = st.jobs[v]
            names.append(f"{_label(vj)} in pool {vj.pool.name}")
        d = pre.decision
        gpus = _take(st.inv, d.placed, key)
        st.used[pool.pk] = used + job.count
        st.held[job.pk] = HeldJob(job.pk, job.tenant_id, pool.pk, job.priority, job.preemptible, 0.0, gpus)
        st.touched.update([job.pk, *victims])
        reason = (
            f"pool {pool.name} holds {used} of the {pool.guaranteed_gpus} GPUs guaranteed to it and {_label(job)} "
            f"waits for {job.count}: reclaim {taken} borrowed GPU{'s' if taken != 1 else ''} from "
            f"{len(victims)} preemptible job{'s' if len(victims) != 1 else ''} (the fewest): {'; '.join(names)}"
        )
        out.append(
            Action(
                RECLAIM, job.pk, reason, True, placed=dict(d.placed), victims=victims,
                details={"decision": d.as_dict(), "pool": pool.pk, "guaranteed_gpus": pool.guaranteed_gpus,
                         "held_gpus": used, "victim_pools": sorted({st.jobs[v].pool_id for v in victims})},
            )
        )  # fmt: skip
    return out


def _unit_free(st: _State, key: str) -> int:
    return sum(sum(st.inv.gpus.get(h, {}).values()) for h in st.loc.domains[key].hosts)


def _whole_free(st: _State, key: str) -> bool:
    dom = st.loc.domains[key]
    cap = st.loc.capacity(key)
    return cap > 0 and not any(h in st.unusable for h in dom.hosts) and _unit_free(st, key) == cap


def _plan_moves(st: _State) -> list[Action]:
    """Move sets, least used units first (the cheapest to empty), each planned on the GPUs free
    after the sets before it (never on the set's own GPUs: a job spanning two units does not
    consolidate into the other one): an executed set's jobs are on their new hosts and their old
    GPUs free; a proposed set keeps its old GPUs *and* holds its targets (nothing later is
    planned on either, so the listed proposals can all be made together), and its unit is not a
    target of later sets."""
    out: list[Action] = []
    moved = proposed = 0
    kept: set[str] = set()  # units that proposals would free
    units = st.loc.units()
    start_used = {u.key: st.loc.capacity(u.key) - _unit_free(st, u.key) for u in units}
    for unit in sorted(units, key=lambda u: (start_used[u.key], u.key)):
        if moved >= MAX_MOVES and proposed >= MAX_MOVES:
            break
        cap = st.loc.capacity(unit.key)
        used = cap - _unit_free(st, unit.key)
        if used <= 0 or any(h in st.unusable for h in unit.hosts):
            continue
        hosts = set(unit.hosts)
        movers: dict[int, int] = defaultdict(int)
        for h in st.held.values():
            for host, _, k in h.gpus:
                if host in hosts:
                    movers[h.job_id] += k
        if sum(movers.values()) != used:  # something else holds GPUs here (not a job, not whole GPUs)
            continue
        jobs = [st.jobs.get(pk) for pk in movers]
        if any(j is None or j.kind != JobKind.GPU or j.pk in st.touched for j in jobs):
            continue
        if any(not all(host in st.loc.hosts for host, _, _ in st.held[j.pk].gpus) for j in jobs):
            continue
        execute = st.fragmented and all(j.preemptible for j in jobs)
        if (moved if execute else proposed) + len(jobs) > MAX_MOVES:
            continue
        jobs.sort(key=lambda j: (-sum(k for _, _, k in st.held[j.pk].gpus), j.pk))
        whole_before = [u.key for u in units if _whole_free(st, u.key)]
        blocked = dict(st.blocked())
        for key in [unit.key, *whole_before, *kept]:
            for h in st.loc.domains[key].hosts:
                blocked.setdefault(h, "rebalance: kept whole")
        olds = [st.held[j.pk] for j in jobs]  # planned on GPUs free now: their own stay theirs until moved
        plans: list[tuple[Job, Any, tuple]] = []
        ok = True
        for j in jobs:
            try:
                req = queued_job(j).request(st.pools[j.pool_id].fabric_id)
            except (RequestError, UnknownTier):
                ok = False
                break
            key = st.key(j)
            d = place(st.loc, FreeState(gpus=st.inv.gpu_view(key), unusable=blocked), req, st.cong)
            old_tier = st.loc.span(_per_host(st.held[j.pk]))[0]
            if not d.ok or d.tier is None or d.tier > old_tier:
                ok = False
                break
            plans.append((j, d, _take(st.inv, d.placed, key)))
        if not ok:
            for _, _, gpus in plans:
                _give(st.inv, HeldJob(0, 0, 0, 0, False, 0.0, gpus))
            continue
        if execute:  # moved: their old GPUs are free (a proposal keeps them, and holds its targets)
            for h in olds:
                _give(st.inv, h)
        why = (
            f"frees {unit.name} whole ({cap} GPUs): whole free units {len(whole_before)} → {len(whole_before) + 1}"
            + ("" if execute else " (proposed: " + (
                "a job of the set is not preemptible" if not all(j.preemptible for j in jobs)
                else "no job is pending for fragmentation") + ")")
        )  # fmt: skip
        for j, d, gpus in plans:
            before = _per_host(st.held[j.pk])
            out.append(
                Action(
                    MOVE, j.pk, f"{_label(j)} moves from {_hosts_text(before)} to {_hosts_text(d.placed)}: {why}",
                    execute, placed=dict(d.placed), before=before, frees=[unit.name],
                    details={"decision": d.as_dict(), "allocation": j.allocation_id, "unit": unit.key},
                )
            )  # fmt: skip
            st.touched.add(j.pk)
            if execute:
                old = st.held[j.pk]
                st.held[j.pk] = HeldJob(
                    j.pk, old.tenant_id, old.pool_id, old.priority, old.preemptible, old.ends_at, gpus
                )
        if execute:
            moved += len(plans)
        else:
            proposed += len(plans)
            kept.add(unit.key)
    return out


def _crossed(loc: Locality, hosts: list[str], tier: int) -> list[str]:
    """Domain keys whose marks count for a job on ``hosts`` spanning ``tier`` (as the engine
    counts them: its units always, a block or spine group when the job spans above it)."""
    keys = set()
    for h in hosts:
        site = loc.hosts[h]
        keys.add(site.unit)
        for t in range(UNIT_TIER + 1, tier):
            keys.add(site.domain(t))
    return sorted(keys)


def _plan_congested(st: _State) -> list[Action]:
    out: list[Action] = []
    if not st.cong.marks:
        return out
    for pk in sorted(st.held):
        job = st.jobs.get(pk)
        if job is None or job.kind != JobKind.GPU or pk in st.touched:
            continue
        h = st.held[pk]
        before = _per_host(h)
        if not before or any(host not in st.loc.hosts for host in before):
            continue
        tier = st.loc.span(before)[0]
        hot = [(k, st.cong.hot(k)) for k in _crossed(st.loc, list(before), tier)]
        hot = [(k, m) for k, m in hot if m is not None]
        if not hot:
            continue
        try:
            req = queued_job(job).request(st.pools[job.pool_id].fabric_id)
        except (RequestError, UnknownTier):
            continue
        key = st.key(job)
        _give(st.inv, h)
        try:
            d = place(st.loc, FreeState(gpus=st.inv.gpu_view(key), unusable=st.blocked()), req, st.cong)
        finally:
            _take_back(st.inv, h)
        if not d.ok or d.congested or d.tier is None or d.tier > tier or set(d.placed) == set(before):
            continue
        # a mark's score is the alarm's value over its threshold (state.congestion_marks): a ratio
        marks = "; ".join(
            f"{st.loc.domains[k].name}: {m.reason} ({m.score:g}× the alarm's threshold)" for k, m in hot
        )
        reason = (
            f"{_label(job)} on {_hosts_text(before)} crosses congested uplinks ({marks}); a placement on "
            f"{_hosts_text(d.placed)} within one {TIER_NAMES[d.tier]} avoids them (reported, not moved)"
        )
        out.append(
            Action(
                CONGESTED, pk, reason, False, placed=dict(d.placed), before=before,
                details={"decision": d.as_dict(), "congested": [k for k, _ in hot], "allocation": job.allocation_id},
            )
        )  # fmt: skip
    return out


# --- running --------------------------------------------------------------------------------------


def run_rebalance(dry_run: bool = True, user=None, *, now: datetime | None = None) -> dict[str, Any]:
    """Plan (:func:`plan_rebalance`) and, unless ``dry_run``, execute. Returns ``{"dry_run",
    "actions": [Action.as_dict() + "outcome"], "counts": {kind: n}}``; ``outcome`` is ``would
    execute`` / ``proposed`` / ``reported`` in a dry run, and ``done`` / ``refused: …`` /
    ``proposed`` / ``reported`` in a real one. A real run holds the pass lock; when a pass (or
    another run) holds it, nothing is done and ``{"skipped": …}`` is returned. A dry run reads
    only and takes no lock."""
    now = now or timezone.now()
    if dry_run:
        actions = plan_rebalance(now)
        return _result(True, actions, ["would execute" if a.execute else _passive(a) for a in actions])
    with single_instance(PASS_LOCK, PASS_LIMIT_S) as mine:
        if not mine:
            return {
                "dry_run": False,
                "skipped": "a scheduling pass or rebalancing run is running",
                "actions": [],
            }
        actions = plan_rebalance(now)
        loc = state.current_locality()
        outcomes = [_execute(a, loc, now, user) for a in actions]
    return _result(False, actions, outcomes)


def reclaim_for_guarantees(now: datetime, user=None) -> list[dict[str, Any]]:
    """Plan and take only the ``reclaim`` actions (module docstring), for a caller that holds the
    pass lock: a scheduling pass, after binding its own plan, so that a pool's guarantee is
    served at once rather than at the next rebalancing run. Returns the actions' dicts with
    their ``outcome``."""
    st = _load(now)
    return [a.as_dict() | {"outcome": _execute(a, st.loc, now, user)} for a in _plan_reclaims(st)]


def _passive(a: Action) -> str:
    return "reported" if a.kind == CONGESTED else "proposed"


def _result(dry_run: bool, actions: list[Action], outcomes: list[str]) -> dict[str, Any]:
    counts: dict[str, int] = defaultdict(int)
    for a in actions:
        counts[a.kind] += 1
    return {
        "dry_run": dry_run,
        "actions": [a.as_dict() | {"outcome": o} for a, o in zip(actions, outcomes, strict=True)],
        "counts": dict(counts),
    }


def _execute(a: Action, loc, now: datetime, user) -> str:
    try:
        if not a.execute:
            _note(a, now)
            return _passive(a)
        if a.kind == RECLAIM:
            return _reclaim(a, loc, now, user)
        return _move(a, loc, now, user)
    except Exception:  # one action's failure must not stop the others; the next run plans again
        log.exception("rebalance action %s of job %s failed", a.kind, a.job_id)
        return "refused: internal error (logged)"


def _reclaim(a: Action, loc, now: datetime, user) -> str:
    decision = dict(a.details["decision"])
    out = Outcome(a.job_id, 0, PLACED, [a.reason, *decision.get("reasons", [])], decision)
    out.placed, out.victims = dict(a.placed), list(a.victims)

    def recorded(job: Job) -> None:
        _event(job, "job.reclaimed", f"{job}: placed on reclaimed GPUs ({a.reason})", now,
               {"victims": a.victims, "hosts": sorted(a.placed), "reason": a.reason})  # fmt: skip
        audit.record(
            "job.reclaim", job, {"victims": a.victims, "placement": a.placed, "reason": a.reason}, user=user
        )

    refused = _bind(
        out, loc, now,
        victim_reason=lambda job: f"reclaimed for {job}: pool {job.pool.name}'s guaranteed GPUs",
        source=_SOURCE, user=user, also=recorded,
    )  # fmt: skip
    return "done" if refused is None else f"refused: {' '.join(refused[1])}"


def _move(a: Action, loc, now: datetime, user) -> str:
    try:
        move(
            a.job_id, a.placed, loc, expected_allocation=a.details.get("allocation"), expected_placement=a.before,
            reason=a.reason, details={**a.details["decision"], "frees": a.frees}, user=user, now=now,
        )  # fmt: skip
    except JobError as exc:
        return f"refused: {exc}"
    except AllocationError as exc:
        return f"refused: the pools refused the move ({exc})"
    except Job.DoesNotExist:
        return "refused: the job is gone"
    return "done"


def _note(a: Action, now: datetime) -> None:
    """A proposal's or report's event, once per job and target since the job was placed."""
    code = "job.congested" if a.kind == CONGESTED else "job.move_proposed"
    with transaction.atomic():
        job = Job.objects.select_related("pool", "tenant").filter(pk=a.job_id, state__in=HOLDING).first()
        if job is None:
            return
        seen = Event.objects.filter(code=code, object_type="job", object_key=str(job.pk))
        if job.placed_at is not None:
            seen = seen.filter(at__gte=job.placed_at)
        if any((d or {}).get("to") == a.placed for d in seen.values_list("details", flat=True)):
            return
        _event(job, code, f"{job}: {a.reason}", now, {"from": a.before, "to": a.placed, "reason": a.reason})


__all__ = [
    "CONGESTED",
    "MOVE",
    "RECLAIM",
    "Action",
    "plan_rebalance",
    "reclaim_for_guarantees",
    "run_rebalance",
]
