"""The rebalancing worker (issue 12, "Rebalancing worker"): reclaim borrowed GPUs, MIG slices and
shared-GPU fractions for owners with pending work, move preemptible jobs so that whole units
(leaves, rail pods) come free, and report jobs that run across persistently congested links
(uplinks, or their hosts' own HCA links) when a better placement exists.

:func:`plan_rebalance` builds the list of :class:`Action` from the stored state, with the same
readers as a scheduling pass (``scheduler.services.state``) and the placement engine
(``scheduler.placement.place``/``select_victims``); it writes nothing. :func:`run_rebalance`
plans and, unless ``dry_run``, executes: a dry run lists exactly the actions the real run takes
on the same state (both call :func:`plan_rebalance`; the plan is deterministic).

Actions, planned in this order on one in-memory copy of the free GPUs (each sees the GPUs the
ones before it took or freed, as a pass does):

* ``replace`` / ``requeue`` — a ``degraded`` job one of whose hosts lost its fabric (a failing
  cause, ``faults.FAILING_CODES``: an HCA link down, an HCA or the host gone): what its
  ``on_fault`` does, by the scheduler's own rule (``faults.plan_replacement``). ``replace``: each
  failed host by a healthy host of the same placement unit with the GPUs (executed through
  ``faults.replace_hosts``, the pass's own writer), else ``requeue``; ``requeue``: executed
  (``faults.requeue_degraded``); ``notify``: the job keeps running degraded, and the replacement
  (or, without one, a requeue) is *proposed* as the admin's option — applied with ``POST
  /api/scheduler/jobs/{id}/replace/`` (``faults.replace_now``, the same writer). Planned first: a
  pass replaces before it places new jobs too.
* ``reclaim`` (executed) — the pools' guarantee (issue 11): a pending job that fits in its
  pool's guaranteed share on top of what the pool holds (the pools' own counting: whole GPUs
  and a fraction — one GPU more — against ``Pool.guaranteed_gpus``, MIG slices against
  ``guaranteed_slices``) and that does not place on what is free, while other pools'
  *borrowed* allocations (``Allocation.borrowed``) of preemptible jobs hold capacity of the
  same kind it may use (its model filters, usable hosts): whole GPUs for a whole-GPU job,
  slices of its profile for a MIG job, shares of one GPU for a fraction. Victims: the fewest
  such jobs whose release lets it place (whole GPUs: ``select_victims``; slices and shares:
  :func:`reclaims._fewest`, the same order — fewest victims, then the lowest highest priority, the most
  compact tier, the fewest units released; a fraction's victims are on one GPU, the one it is
  placed on). The guarantee is the pool's right whatever the priorities, as in
  ``pools.services.allocation``'s own reclaim; except that a preemptible job does not reclaim
  from a higher-priority one, which a pass would then preempt it for: the two would take the
  capacity from each other on every run. Executed as a pass binds a preemption: one
  transaction preempts the victims (requeued when they asked: ``Job.requeue``) and places the
  job (``queue.binder.bind_job``), with a ``job.reclaimed`` event carrying the reason and a
  ``job.reclaim`` audit entry (each victim its ``job.preempted`` event saying for whom). The gap
  this fills: a pass places on named GPUs (a fraction on a named GPU) and plans MIG jobs only
  on free slices, and the pools' allocation service reclaims only for requests by count, so no
  pass ever reclaimed; and a pass preempts only for a higher priority. A pass that leaves such
  a job pending ends with these reclaims itself (:func:`reclaim_for_guarantees`); the periodic
  run catches the rest.
* ``move`` — a unit that is partly used, only by placed/running whole-GPU jobs, whose jobs all
  place elsewhere (not on a whole free unit, not on hosts reserved for the queue's head, not on
  unusable hosts; never spanning a higher tier than now): moving them frees the unit whole.
  Executed (``job.moved`` event, ``job.move`` audit; the job is ``placed`` on its new hosts,
  its prolog starts it again) when every job of the set is preemptible and some whole-GPU job is
  pending for ``fragmentation`` (moving running work helps only a job that waits for a shape);
  otherwise proposed (listed, a ``job.move_proposed`` event once per target). At most
  :data:`MAX_MOVES` jobs moved, and as many in proposals, per run; the proposals of one run can
  all be made together (``moves.plan_moves``).
* ``congested`` (reported) — a placed/running job whose units' uplinks (or, when it spans
  above them, its blocks' or spine groups' uplinks) carry a port with an open congestion or error
  alarm (``state.congestion_marks``; the counter rules raise ``port.congestion`` only after
  ``consecutive`` sweeps over the threshold: persistent, not one bad sample), or one of whose
  hosts' own HCA links (HCA port ↔ leaf port) carries such an alarm (``state.hca_link_marks``:
  the report names the link by both ends, the alarm's figure and the ports' latest congestion
  index from telemetry), and for which the engine finds a placement, on the free GPUs plus its
  own, that uses no marked domain and no host with a congested HCA link and spans no higher
  tier. A ``job.congested`` event once per job and target.

Every action carries its ``reason``. The real run holds the pass lock (``queue.PASS_LOCK``): never
at the same time as a pass; a repeated run finds nothing more to do once its actions are done
(reclaimed jobs are placed; moved units are whole; reports are recorded once).

Modules (one concern each): ``common`` (:class:`Action`, the snapshot of the stored state the
planners share), ``faulted`` (replace / requeue), ``reclaims``, ``moves``, ``congestion`` (one
planner each: they read the snapshot and write nothing) and ``running`` (plan, run, execute). The
public names stay importable from ``scheduler.services.rebalance``.

Errors: none raised for a refused action (another writer changed the job in between): its
``outcome`` says why and the next run plans again.
"""

from __future__ import annotations

from .common import CONGESTED, MOVE, RECLAIM, REPLACE, REQUEUE, Action
from .running import plan_rebalance, reclaim_for_guarantees, run_rebalance

__all__ = [
    "CONGESTED", "MOVE", "RECLAIM", "REPLACE", "REQUEUE", "Action", "plan_rebalance", "reclaim_for_guarantees",
    "run_rebalance",
]  # fmt: skip
