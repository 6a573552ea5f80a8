"""The placement engine: where a job's GPUs go (pure Python, no Django).

Input: a :class:`~scheduler.locality.Locality` (``scheduler.topology.build_locality``), the free
state (:class:`FreeState`: whole GPUs per host, MIG slices per profile, shared-GPU headroom, and
the hosts the caller cannot use — links down), a :class:`Request` and optional congestion marks
(:class:`Congestion`: a score and a reason per domain key from recent sweeps, and a threshold).
Output: a :class:`Decision` — placed (host → GPUs) or pending, with a machine code and the
reasons a person reads.

The objective, lexicographic (issue 12, "Placement engine"):

1. the highest tier the job spans (0 one host, 1 one unit, 2 one block, 3 one spine group, 4 one
   fabric), never above a *required* tier; with none the job is placed as compact as possible;
2. the number of units (tier-1 domains: leaves or collapsed rail pods) — always exactly the
   **lower bound** ``k`` of the chosen tier: the fewest units of one tier-T domain whose free
   capacity covers the request, minimised over the tier-T domains that can hold it (no placement
   inside one tier-T domain can use fewer units, because the top-``k`` units of a domain are the
   largest ``k`` it has). Gang segments are placed one by one, each with the fewest units inside
   its own domain, so a gang may use more units than the bound (the decision says how many);
3. congestion: units marked congested (score above the threshold), and units under a marked
   block or spine group whose uplinks the job would cross, are used only when no placement equal in
   1-2 avoids them (``Congestion.avoid`` makes them unusable instead); on a fabric whose routes
   are read (``Congestion.paths``) hosts are scored instead by the hot ports on the routes toward
   them (path-aware: a spine port carrying a candidate's routes counts, an idle parallel one does
   not; see :func:`place`);
4. the fewest hosts (the tier below units: a one-unit job goes where it needs the fewest hosts;
   a multi-unit job takes every free GPU of its units but one, and that partly used unit is the
   one where the rest needs the fewest hosts), then best fit: the smallest host that holds a
   one-host job (in the fullest unit), and among the ``k``-unit choices the one whose free
   capacity exceeds the request least (the leftover stays together in one unit; larger free units
   stay whole). Best fit among units is a local search (swap a chosen unit for a smaller one
   while the request stays covered), not an exact subset sum: steps 1-3 are exact, step 4 is a
   heuristic.

Pruning: a domain whose free capacity is below the request is never tried (per tier the domain
capacities are sums of unit capacities, computed once per call).

A job that does not place is pending with one code (:data:`PENDING_CODES`): ``capacity`` (no
eligible fabric has enough free GPUs, or the request exceeds every fabric), ``constraint`` (the
required tier can never hold it: every domain of that tier is smaller than the request),
``congestion`` (it would place if congested units were not avoided), or ``fragmentation`` (enough
free GPUs, but not in the shape asked for: no domain of the allowed tiers has enough, too few
hosts with ``gpus_per_host`` free, or segments that do not fit — defragmentation or waiting for
releases would place it). Fragmentation is not quota: quota is the pools' business and is checked
before the engine is asked.

Requests come in three kinds: whole GPUs (optionally whole hosts: ``gpus_per_host`` each, and
optionally gang *segments* of hosts each inside one domain of a tier), MIG slices of one profile,
or one shared-GPU fraction. Internally everything is counted in *slots*: a GPU, a host with
``gpus_per_host`` free GPUs, a MIG slice, or a GPU with room for the fraction.

The package, one concern per module: :mod:`.shapes` (input and output shapes), :mod:`.select`
(the locality index and the shared selection routines), :mod:`.engine` (:func:`place`,
:func:`place_rescanning`, and :func:`first_fit`, the naive baseline of ``bench/placement.py``) and
:mod:`.preemption` (:func:`select_victims`: which preemptible jobs to preempt so that a request
places). Import from ``scheduler.placement``.
"""

from ..locality import UnknownTier
from .engine import first_fit, place, place_rescanning
from .preemption import Preemption, RunningJob, select_victims
from .shapes import (
    PENDING_CAPACITY,
    PENDING_CODES,
    PENDING_CONGESTION,
    PENDING_CONSTRAINT,
    PENDING_FRAGMENTATION,
    PLACED,
    Congestion,
    Decision,
    Fraction,
    FreeState,
    HotPort,
    Mark,
    PathCosts,
    Request,
    RequestError,
    Segments,
)

__all__ = [
    "PENDING_CAPACITY",
    "PENDING_CODES",
    "PENDING_CONGESTION",
    "PENDING_CONSTRAINT",
    "PENDING_FRAGMENTATION",
    "PLACED",
    "Congestion",
    "Decision",
    "Fraction",
    "FreeState",
    "HotPort",
    "Mark",
    "PathCosts",
    "Preemption",
    "Request",
    "RequestError",
    "RunningJob",
    "Segments",
    "UnknownTier",
    "first_fit",
    "place",
    "place_rescanning",
    "select_victims",
]
