"""A job knows when its fabric fails (issue 24 §3-4): running jobs become ``degraded`` with the
causes, come back to ``running`` when every cause cleared, and are requeued or given a new host
per their ``on_fault``.

**Causes** (:class:`Reason`) come from *reason sources* (:class:`ReasonSource`), registered in
:data:`SOURCES` with :func:`register_source`. A source gets every running (or degraded) job's
:class:`JobScope` — its hosts, their HCAs (current ``fabric.Node`` rows and those gone with an
open ``node.removed``), its CA port GUIDs, its partition — and returns ``{job id: [Reason]}``.
Sources only read (alarms are the alarm engine's, partitions' drift the partitions service's);
this module decides. The built-in sources:

* ``hca`` — an HCA link of one of its hosts is down: an open ``link.down`` alarm on a link with
  an end on one of its HCAs (``hca_link_down``, per HCA: host, HCA name, rail (:func:`rails`:
  the HCA's index as the fabric names it, ``mlx5_3`` is rail 3), port), the switch port its
  cable is on isolated on purpose (``hca_link_down`` too, naming who isolated it: an isolation
  writes no ``link.down``, ``fabric.services.isolation``), an HCA gone from the fabric while its
  host has others (``hca_link_down`` too: its only cable pulled), an HCA the last discovery could
  not reach (``hca_unreachable``), or every HCA of a host gone (``host_removed``);
* ``pkey`` — partition drift: the job's own partition (job isolation), or its pool's, applied
  with ``drift`` on one of its ports (``pkey_drift``: the port GUID, what was expected and
  seen; ``fabric.services.partitions`` verifies after every apply);
* ``congestion`` — an open ``port.congestion`` alarm (the counter rule raises it after its
  policy's ``consecutive`` sweeps over its ``threshold``) on a port of the job's HCA links or of
  its leaves' uplinks (``path_congested``, with ``"approximation": "hca+leaf-uplinks"``), as the
  job page's congestion report reads them until routes exist.

**Path reasons plug in later**: the ``routes`` app registers one more source (codes
``path_link_down``, ``path_congested`` with ``"approximation": "routes"``) from its
``AppConfig.ready()``; ``register_source`` replaces a source of the same ``name`` (so it may
replace ``congestion``). Nothing else here changes::

    class PathSource:
        name = "paths"
        codes = ("path_link_down", "path_congested")
        def reasons(self, scopes: list[JobScope]) -> dict[int, list[Reason]]: ...

    register_source(PathSource())

and it names the alarm codes whose opening or clearing re-evaluates jobs in its ``triggers``
(:func:`trigger_codes`, read by ``scheduler.signals``).

**Evaluation** (:func:`evaluate`): on commit of the alarm engine's changes
(``events.signals.alarms_changed`` with a trigger code), of a discovery, of a partition apply,
and of a job starting (``scheduler.signals`` → ``scheduler.tasks.evaluate_faults_task``), never by
polling. Each job whose causes changed is written in its own transaction (its row locked and
re-read, so a job that ended meanwhile is left alone), through the queue's helpers (this module
is part of the queue writer, ``scheduler.services.queue``): ``running → degraded`` with
``Job.faults`` and ``degraded_at``, a ``job.degraded`` event (again when a new cause appears),
``degraded → running`` with ``job.recovered`` when none is left; decision history, audit
(``job.degrade``, ``job.recover``), ``job_changed`` on commit (source ``fault``).

**on_fault** (``Job.on_fault``, else ``Pool.on_fault``; only for the *failing* codes
:data:`FAILING_CODES` — a drifting PKey or a congested link degrades and notifies only):
``notify`` nothing more; ``requeue`` the job's allocation is released and it is pending again
with its submit time and priority (``queue.ends.requeue_job``: ``job.preempted`` + ``job.requeued``);
``replace`` a scheduling pass is queued, and that pass — before it plans the pending jobs, under
its lock, so a host goes to one of them only — swaps each failed host for a healthy one of the
same placement unit with as many free GPUs of the job's models (:func:`replace_faulted`:
``queue.move``, then ``job.replaced``); a job with no such host, or not whole GPUs, is requeued.

**Telling the tenant**: ``job.degraded``, ``job.requeued``, ``job.replaced`` and ``job.failed``
events carry the tenant's contacts (``Tenant.contacts``) in ``details["notify"]``; the alarm
engine queues them mail through the ``events.Notification`` outbox (``events.notify`` sends it).
Every state change of a job with a webhook (the job's, else its tenant's) is posted, signed, by
``outbound`` (:func:`announce`, from ``scheduler.signals``).
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts import audit
from core import enqueue
from core.locks import single_instance
from events.engine import process_pending_events
from events.models import Alarm
from fabric.choices import NodeType
from fabric.keys import port_name, split_link_key
from fabric.models import IsolatedPort, Link, Node, Partition, Port
from fabric.services.derive import host_for
from fabric.services.isolation import VIA
from outbound.services import queue_webhook
from pools.models import AllocationItem
from pools.services.allocation import AllocationError

from ..choices import RUNNING_STATES, JobKind, JobState, OnFault
from ..models import Job
from . import queue, state
from .queue import records
from .queue.ends import requeue_job

log = logging.getLogger(__name__)

#: every reason code a source may give (``Job.faults[*].code``)
REASON_CODES = (
    "hca_link_down", "hca_unreachable", "host_removed", "pkey_drift", "path_link_down", "path_congested",
)  # fmt: skip
#: causes that make a job's ``on_fault`` act (a host lost its fabric); the others degrade only
FAILING_CODES = frozenset({"hca_link_down", "hca_unreachable", "host_removed", "path_link_down"})
#: job event codes whose mail goes to the tenant's contacts too (``queue.records.event_spec``)
TENANT_MAIL_CODES = queue.TENANT_MAIL_CODES


@dataclass(frozen=True)
class Reason:
    """One cause of a job's degradation: ``code`` (:data:`REASON_CODES`), the object it is
    about (``object_type`` ``node``/``port``/``link``/``host``/``partition``, ``object_key`` its
    natural key, ``fabric.keys``'s forms), ``host`` (the job's host it hits, "" for a link
    shared by several), ``message`` (a sentence), ``details`` (JSON: ``hca``, ``rail``,
    ``port``, ``alarm`` id, ``pkey``…). Two reasons with the same ``(code, object_key)`` are
    the same cause (a later message may say more)."""

    code: str
    object_type: str
    object_key: str
    message: str
    host: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.code, self.object_key)

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "object_type": self.object_type, "object_key": self.object_key,
                "host": self.host, "message": self.message, **({"details": self.details} if self.details else {})}  # fmt: skip


@dataclass
class Hca:
    """One HCA of a job's host: ``guid`` (node GUID), ``name`` (``Node.name``, or the removed
    node's alarm text), ``node_id`` (None when gone from the fabric), ``rail`` (:func:`rails`:
    the HCA's own index, ``mlx5_3`` → 3), ``gone`` (open ``node.removed``),
    ``unreachable_since``."""

    guid: str
    name: str
    node_id: int | None
    fabric_id: int | None
    rail: int = 0
    gone: bool = False
    unreachable_since: datetime | None = None


@dataclass
class JobScope:
    """What a reason source needs of one running job: ``job_id``, ``pool_id``, ``placement``
    (host name → GPUs), ``hosts`` (host name → its :class:`Hca` list), ``port_guids`` (the
    port GUIDs of its HCAs' ports now), ``partition_ids`` (its own partition's and its pool's
    that hold its ports)."""

    job_id: int
    pool_id: int
    placement: dict[str, int]
    hosts: dict[str, list[Hca]] = field(default_factory=dict)
    port_guids: set[str] = field(default_factory=set)
    partition_ids: set[int] = field(default_factory=set)

    def hca_by_guid(self) -> dict[str, tuple[str, Hca]]:
        return {h.guid: (host, h) for host, hcas in self.hosts.items() for h in hcas}


class ReasonSource(Protocol):
    """A source of degradation causes (module docstring). ``name``: unique (registering the
    same name replaces); ``codes``: the reason codes it gives; ``triggers``: alarm codes whose
    opening or clearing may change its answer (``scheduler.signals`` re-evaluates on them);
    ``reasons(scopes)``: ``{job id: [Reason]}`` for the jobs it finds at fault (read only)."""

    name: str
    codes: tuple[str, ...]
    triggers: tuple[str, ...]

    def reasons(self, scopes: list[JobScope]) -> dict[int, list[Reason]]: ...


#: the registered sources, by name, in registration order
SOURCES: dict[str, ReasonSource] = {}


def register_source(source: ReasonSource) -> None:
    """Add ``source`` (or replace the one of the same name). Raises ``ValueError`` for a code
    not in :data:`REASON_CODES`."""
    bad = [c for c in source.codes if c not in REASON_CODES]
    if bad:
        raise ValueError(f"reason source {source.name}: unknown codes {bad} (see REASON_CODES)")
    SOURCES[source.name] = source


def trigger_codes() -> frozenset[str]:
    """The alarm codes whose opening or clearing re-evaluates running jobs."""
    return frozenset(c for s in SOURCES.values() for c in s.triggers)


# --- scopes --------------------------------------------------------------------------------------

_DEVICE_INDEX = re.compile(r"(\d+)\s*$")


def rails(names: list[str]) -> list[int]:
    """The rail of each of one host's HCAs (``names``: their node names, ``"host008 mlx5_3"``, in
    :func:`hca_order`): the index the fabric gives the HCA — the number its device name ends with
    (``mlx5_3`` is rail 3, as the rail leaves ``rail3-leaf-01``, the GPUs' ``rail_device`` and the
    demo name it; 0-based) — when every HCA of the host has a distinct one; else each HCA's
    0-based position in that order. One numbering for every message, page and API field (the
    faults' ``details["rail"]``, ``JobLink.rail``, the job page's HCA table)."""
    idx = [int(m.group(1)) if (m := _DEVICE_INDEX.search(n or "")) else None for n in names]
    if all(i is not None for i in idx) and len(set(idx)) == len(idx):
        return idx  # type: ignore[return-value]
    return list(range(len(names)))


def hca_order(h: Hca) -> tuple:
    """Sort key of a host's HCAs: their names in natural order (``mlx5_2`` before ``mlx5_10``),
    then the GUID."""
    return (tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", h.name or "")), h.guid)


def job_scopes(jobs) -> list[JobScope]:
    """:class:`JobScope` of each job of ``jobs`` (rows with ``allocation_id``, ``pool``)."""
    jobs = list(jobs)
    if not jobs:
        return []
    hosts: dict[int, dict[str, int]] = defaultdict(dict)  # job → host name → host id
    for job_id, host_id, name in (
        AllocationItem.objects.filter(allocation_id__in=[j.allocation_id for j in jobs], active=True)
        .values_list("allocation__scheduler_job__id", "gpu__host_id", "gpu__host__name")
        .distinct()
    ):
        hosts[job_id][name] = host_id
    all_ids = {hid for m in hosts.values() for hid in m.values()}
    all_names = {n for m in hosts.values() for n in m}
    cas: dict[int, list[Hca]] = defaultdict(list)
    node_ids = []
    for pk, host_id, guid, name, fabric_id, since in (
        Node.objects.filter(host_id__in=all_ids)
        .exclude(node_type=NodeType.SWITCH)
        .values_list("pk", "host_id", "node_guid", "name", "fabric_id", "unreachable_since")
    ):
        cas[host_id].append(Hca(guid, name, pk, fabric_id, unreachable_since=since))
        node_ids.append(pk)
    # HCAs gone from the fabric: their open node.removed alarm names them (the row is deleted)
    gone: dict[str, list[Hca]] = defaultdict(list)
    for key, text, fabric_id in (
        Alarm.objects.open().filter(code="node.removed").values_list("object_key", "object_repr", "fabric_id")
    ):
        host = host_for(NodeType.CA, text, text)
        if host in all_names:
            gone[host].append(Hca(key, text or key, None, fabric_id, gone=True))
    guids_by_node: dict[int, set[str]] = defaultdict(set)
    for node_id, pg in (
        Port.objects.filter(node_id__in=node_ids).exclude(port_guid="").values_list("node_id", "port_guid")
    ):
        guids_by_node[node_id].add(pg)
    out = []
    for job in jobs:
        scope = JobScope(job.pk, job.pool_id, dict(job.placement or {}))
        for name, host_id in sorted(hosts.get(job.pk, {}).items()):
            hcas = list(cas.get(host_id, []))
            known = {h.guid for h in hcas}
            hcas += [h for h in gone.get(name, []) if h.guid not in known]
            hcas.sort(key=hca_order)
            for h, rail in zip(hcas, rails([h.name for h in hcas]), strict=True):
                h.rail = rail
                if h.node_id is not None:
                    scope.port_guids |= guids_by_node.get(h.node_id, set())
            scope.hosts[name] = hcas
        if job.partition_id:
            scope.partition_ids.add(job.partition_id)
        if getattr(job.pool, "partition_id", None):
            scope.partition_ids.add(job.pool.partition_id)
        out.append(scope)
    return out


# --- the built-in sources ------------------------------------------------------------------------


def _hca_reason(code: str, host: str, hca: Hca, message: str, **details) -> Reason:
    return Reason(code, "node", hca.guid, message, host,
                  {"hca": hca.name, "rail": hca.rail, **details})  # fmt: skip


def _isolated_peers(guids: set[str]) -> dict[str, tuple[int | None, str, str, str, datetime]]:
    """``{HCA node GUID: (its port, "<switch> <port>", who, via, when)}`` for the HCAs of
    ``guids`` whose cable's switch port is isolated (``fabric.IsolatedPort``)."""
    out: dict[str, tuple[int | None, str, str, str, datetime]] = {}
    rows = IsolatedPort.objects.filter(peer_guid__in=guids).select_related("by").order_by("since")
    for row in rows:
        out.setdefault(row.peer_guid, (
            row.peer_port_num, port_name(row.node_name or row.node_guid, row.port_num),
            row.by.get_username() if row.by_id else "Weft", row.via, row.since,
        ))  # fmt: skip
    return out


class HcaSource:
    """``hca_link_down`` / ``hca_unreachable`` / ``host_removed`` (module docstring)."""

    name = "hca"
    codes = ("hca_link_down", "hca_unreachable", "host_removed")
    # port.isolated: a switch port isolated on purpose writes no link.down (fabric.services.isolation),
    # yet the HCA cabled to it has lost its link all the same
    triggers = ("link.down", "node.removed", "port.isolated")

    def reasons(self, scopes: list[JobScope]) -> dict[int, list[Reason]]:
        down: dict[str, list[tuple[int, str, int, str]]] = defaultdict(
            list
        )  # guid → (port, key, alarm, text)
        for pk, key, text in (
            Alarm.objects.open().filter(code="link.down").values_list("pk", "object_key", "object_repr")
        ):
            try:
                ends = split_link_key(key)
            except ValueError:
                continue
            for guid, port in ends:
                down[guid].append((port, key, pk, text))
        isolated = _isolated_peers(
            {h.guid for scope in scopes for hcas in scope.hosts.values() for h in hcas}
        )
        out: dict[int, list[Reason]] = {}
        for scope in scopes:
            found: list[Reason] = []
            for host, hcas in scope.hosts.items():
                if hcas and all(h.gone for h in hcas):
                    found.append(Reason("host_removed", "host", host,
                                        f"{host}: every HCA is gone from the fabric ({', '.join(h.name for h in hcas)})",
                                        host, {"hcas": [h.name for h in hcas]}))  # fmt: skip
                    continue
                for h in hcas:
                    if h.guid in down:
                        port, key, alarm, text = down[h.guid][0]
                        found.append(_hca_reason(
                            "hca_link_down", host, h,
                            f"{host}: HCA link of rail {h.rail} down ({h.name} port {port}: {text or key})",
                            port=port, link=key, alarm=alarm,
                        ))  # fmt: skip
                    elif h.guid in isolated:
                        port, switch_port, by, via, since = isolated[h.guid]
                        found.append(_hca_reason(
                            "hca_link_down", host, h,
                            f"{host}: HCA link of rail {h.rail} down: {switch_port} isolated by {by} "
                            f"{VIA.get(via, via)} at {since:%Y-%m-%d %H:%M:%S}",
                            port=port, isolated=switch_port, by=by,
                        ))  # fmt: skip
                    elif h.gone:
                        found.append(_hca_reason(
                            "hca_link_down", host, h,
                            f"{host}: HCA of rail {h.rail} gone from the fabric ({h.name}: its cable pulled?)",
                        ))  # fmt: skip
                    elif h.unreachable_since is not None:
                        found.append(_hca_reason(
                            "hca_unreachable", host, h,
                            f"{host}: HCA of rail {h.rail} ({h.name}) unreachable since "
                            f"{h.unreachable_since:%Y-%m-%d %H:%M:%S}",
                        ))  # fmt: skip
            if found:
                out[scope.job_id] = found
        return out


class PKeySource:
    """``pkey_drift``: the job's own or its pool's partition drifted on one of its ports."""

    name = "pkey"
    codes = ("pkey_drift",)
    triggers = ("partition.drift",)

    def reasons(self, scopes: list[JobScope]) -> dict[int, list[Reason]]:
        ids = {p for s in scopes for p in s.partition_ids}
        if not ids:
            return {}
        parts = {
            p.pk: p
            for p in Partition.objects.filter(pk__in=ids)
            .exclude(drift=[])
            .only("pk", "pkey", "name", "drift")
        }
        out: dict[int, list[Reason]] = {}
        for scope in scopes:
            found = []
            for pid in sorted(scope.partition_ids):
                part = parts.get(pid)
                for d in (part.drift or []) if part else []:
                    guid = str(d.get("guid", ""))
                    if guid and guid in scope.port_guids:
                        found.append(Reason(
                            "pkey_drift", "port", guid,
                            f"PKey {part.pkey_hex} ({part.name}) not as applied on port {guid}: expected "
                            f"{d.get('expected')}, seen {d.get('seen')}",
                            "", {"pkey": part.pkey_hex, "partition": part.pk, "expected": d.get("expected"),
                                 "seen": d.get("seen")},
                        ))  # fmt: skip
            if found:
                out[scope.job_id] = found
        return out


class CongestionSource:
    """``path_congested`` from the job's HCA links and its leaves' uplinks (until routes)."""

    name = "congestion"
    codes = ("path_congested",)
    triggers = ("port.congestion",)

    def reasons(self, scopes: list[JobScope]) -> dict[int, list[Reason]]:
        alarms = list(
            Alarm.objects.open().filter(code="port.congestion", port_id__isnull=False)
            .values_list("pk", "port_id", "object_key", "object_repr", "message")
        )  # fmt: skip
        if not alarms:
            return {}
        by_port = {a[1]: a for a in alarms}
        out: dict[int, list[Reason]] = {}
        for scope in scopes:
            nodes = [h.node_id for hcas in scope.hosts.values() for h in hcas if h.node_id]
            hca_links = list(
                Link.objects.filter(Q(port_a__node_id__in=nodes) | Q(port_b__node_id__in=nodes))
                .values_list("port_a_id", "port_b_id", "port_a__node_id", "port_b__node_id")
            )  # fmt: skip
            ports = {p for a, b, _, _ in hca_links for p in (a, b)}
            leaves = {nb if na in nodes else na for _, _, na, nb in hca_links}
            for a, b in Link.objects.filter(
                (Q(port_a__node_id__in=leaves) & Q(port_b__node__node_type=NodeType.SWITCH))
                | (Q(port_b__node_id__in=leaves) & Q(port_a__node__node_type=NodeType.SWITCH))
            ).values_list("port_a_id", "port_b_id"):
                ports.update((a, b))
            found = [
                Reason("path_congested", "port", key, f"congested: {text or key} ({message})", "",
                       {"alarm": pk, "approximation": "hca+leaf-uplinks"})
                for pk, port_id, key, text, message in (by_port[p] for p in sorted(ports) if p in by_port)
            ]  # fmt: skip
            if found:
                out[scope.job_id] = found
        return out


for _source in (HcaSource(), PKeySource(), CongestionSource()):
    register_source(_source)


# --- evaluation ----------------------------------------------------------------------------------


def job_reasons(scopes: list[JobScope]) -> dict[int, list[Reason]]:
    """Every registered source's reasons, merged per job (one per ``(code, object_key)``, the
    first source's), sorted by host, code and key."""
    merged: dict[int, dict[tuple[str, str], Reason]] = defaultdict(dict)
    for source in list(SOURCES.values()):
        try:
            found = source.reasons(scopes)
        except Exception:  # one broken source must not hide the others' causes
            log.exception("reason source %s failed", source.name)
            continue
        for job_id, reasons in found.items():
            for r in reasons:
                merged[job_id].setdefault(r.key, r)
    return {
        j: sorted(rs.values(), key=lambda r: (r.host, r.code, r.object_key)) for j, rs in merged.items() if rs
    }


def _keys(faults: Iterable[dict]) -> set[tuple[str, str]]:
    return {(f.get("code", ""), f.get("object_key", "")) for f in faults or ()}


def summary(faults: list[dict]) -> str:
    """The human reason of a degraded job: its causes' messages joined (at most 300 chars)."""
    return "; ".join(f.get("message", "") for f in faults)[:300]


def evaluate(job_ids: Iterable[int] | None = None, *, now: datetime | None = None) -> dict[str, int]:
    """Re-evaluate the running and degraded jobs (all, or ``job_ids``): degrade, recover, update
    causes, and act on ``on_fault`` (module docstring). Returns ``{"jobs", "degraded",
    "recovered", "updated", "requeued", "replace_wanted"}``."""
    now = now or timezone.now()
    _forget_stale(job_ids)
    qs = Job.objects.filter(state__in=RUNNING_STATES, allocation__isnull=False).select_related("pool")
    if job_ids is not None:
        qs = qs.filter(pk__in=list(job_ids))
    jobs = list(qs.order_by("pk"))
    counts = {
        "jobs": len(jobs),
        "degraded": 0,
        "recovered": 0,
        "updated": 0,
        "requeued": 0,
        "replace_wanted": 0,
    }
    if not jobs:
        return counts
    reasons = job_reasons(job_scopes(jobs))
    replace = False
    fabrics: set[int] = set()
    for job in jobs:
        new = [r.as_dict() for r in reasons.get(job.pk, [])]
        if _keys(new) == _keys(job.faults) and (job.state == JobState.DEGRADED) == bool(new):
            continue
        outcome = _apply(job.pk, new, now)
        if outcome:
            counts[outcome] = counts.get(outcome, 0) + 1
            fab = records.fabric_for(job)
            if fab is not None:
                fabrics.add(fab.pk)
        replace |= outcome == "replace_wanted"
    for fabric_id in sorted(fabrics):  # the job events' mail now, not on the minute flush
        try:
            process_pending_events(fabric_id)
        except Exception:  # the flush applies them within a minute
            log.exception("could not apply the job events of fabric %s", fabric_id)
    if replace:
        queue.request_pass()
        _queue_pass()
    return counts


def _forget_stale(job_ids) -> None:
    """Clear the causes kept on jobs that no longer run (placed again by a move, pending): what
    they said was about hosts they no longer hold. An ended job keeps them (why it ended
    degraded), as its record."""
    stale = Job.objects.filter(state__in=[JobState.PLACED, JobState.PENDING]).exclude(faults=[])
    if job_ids is not None:
        stale = stale.filter(pk__in=list(job_ids))
    for pk in stale.values_list("pk", flat=True):
        with transaction.atomic():
            Job.objects.select_for_update().filter(
                pk=pk, state__in=[JobState.PLACED, JobState.PENDING]
            ).update(faults=[], degraded_at=None)


def _queue_pass() -> None:
    try:
        enqueue.send("scheduler.pass")
    except Exception:  # the broker may be down: the periodic pass catches up
        log.warning("could not queue a scheduling pass", exc_info=True)


def _apply(job_id: int, new: list[dict], now: datetime) -> str | None:
    """Write one job's new causes (its own transaction); returns what happened."""
    with transaction.atomic():
        try:
            job = records.locked(job_id)
        except Job.DoesNotExist:
            return None
        if job.state not in RUNNING_STATES or not job.allocation_id:
            return None
        old = list(job.faults or [])
        added = _keys(new) - _keys(old)
        previous = job.state
        if new:
            job.faults = new
            job.reason = summary(new)
            if job.state == JobState.RUNNING:
                job.state, job.degraded_at = JobState.DEGRADED, now
            job.save(update_fields=["state", "faults", "degraded_at", "reason"])
            if added or previous != JobState.DEGRADED:
                _note(job, "job.degraded", "degraded", f"{job}: degraded ({job.reason})", new, now, previous)
            outcome = "degraded" if previous != JobState.DEGRADED else "updated"
            failing = [f for f in new if f["code"] in FAILING_CODES]
            policy = job.effective_on_fault
            if failing and added & _keys(failing) and policy == OnFault.REQUEUE:
                _requeue(job, failing, now)
                return "requeued"
            if failing and policy == OnFault.REPLACE:
                return "replace_wanted"
            return outcome
        job.faults, job.degraded_at = [], None
        job.state, job.reason = JobState.RUNNING, ""
        job.save(update_fields=["state", "faults", "degraded_at", "reason"])
        _note(
            job,
            "job.recovered",
            "recovered",
            f"{job}: running again (every fabric fault cleared)",
            old,
            now,
            previous,
        )
        return "recovered"


def _note(
    job, code: str, decision: str, message: str, faults: list[dict], now: datetime, previous: str
) -> None:
    """History row, event, audit and signal of a degrade/recover (in the caller's transaction)."""
    details = {"faults": faults, "on_fault": job.effective_on_fault}
    records.record_decision(job, decision, [f["message"] for f in faults] or [message], details, now)
    queue.job_event(job, code, message, now, details)
    audit.record(f"job.{'degrade' if code == 'job.degraded' else 'recover'}", job,
                 {"state": [previous, job.state], "faults": [f["code"] + " " + f["object_key"] for f in faults]})  # fmt: skip
    records.send_changed(job, previous, "fault")


def _requeue(job, failing: list[dict], now: datetime, why: str = "") -> None:
    """Requeue a locked degraded job (its on_fault, or a replacement that found no host)."""
    reason = why or f"fabric fault ({summary(failing)})"
    job.faults, job.degraded_at = [], None
    job.save(update_fields=["faults", "degraded_at"])
    requeue_job(job, reason, now, None, "fault")


# --- replacement (inside a scheduling pass) ------------------------------------------------------


def _free_whole(inv, host: str, pool_model: str, job_model: str) -> int:
    return sum(
        n for model, n in inv.gpus.get(host, {}).items()
        if (not pool_model or pool_model.lower() in model) and (not job_model or job_model.lower() in model)
    )  # fmt: skip


@dataclass
class Replacement:
    """What replacing a degraded job's failed hosts would do (:func:`plan_replacement`).

    ``failed``: its hosts with a failing cause (:data:`FAILING_CODES`), by name; ``picks``:
    failed host → the healthy host of the same placement unit that takes its GPUs (empty when
    none); ``placement``: the job's placement now (host → GPUs); ``new``: its placement after
    (host → GPUs; ``{}`` when no replacement exists); ``why``: why there is none ("" when there
    is); ``causes``: the failing causes' summary."""

    job_id: int
    failed: list[str]
    picks: dict[str, str]
    placement: dict[str, int]
    new: dict[str, int]
    why: str
    causes: str

    @property
    def ok(self) -> bool:
        return bool(self.new)


def failing_hosts(job) -> list[str]:
    """The job's hosts named by a failing cause (:data:`FAILING_CODES`), sorted."""
    return sorted(
        {f.get("host") for f in job.faults or () if f.get("code") in FAILING_CODES and f.get("host")}
    )


_GUID = re.compile(r"0x[0-9a-f]{16}")


def _unit_of(job, host: str, loc) -> str | None:
    """The placement unit (tier-1 domain key) of ``host``: its site's, or — a host whose only HCA
    link is down is no longer in the locality tree (no cable to a leaf) — the unit whose leaf its
    failing causes name (``details["link"]``: its pulled cable's link key carries the leaf's
    GUID). None when neither says."""
    site = loc.hosts.get(host)
    if site is not None:
        return site.unit
    texts = [
        f"{f.get('object_key', '')} {(f.get('details') or {}).get('link', '')}"
        for f in job.faults or ()
        if f.get("host") == host
    ]
    named = set(_GUID.findall(" ".join(texts)))
    for key, domain in loc.domains.items():
        if domain.tier == 1 and named & set(domain.switches):
            return key
    return None


def plan_replacement(
    job, loc, unusable: dict[str, str], inv, taken: dict[str, int] | None = None
) -> Replacement:
    """Plan the replacement of ``job``'s failed hosts (read only): for each, a host of the same
    placement unit (``loc.hosts[...].unit``), not the job's, not unusable (``unusable``:
    ``state.unusable_hosts``), with at least as many free whole GPUs of the pool's and the job's
    models (``inv``: ``state.load_inventory``, minus ``taken``: host → GPUs already promised in
    this plan) as it held on the failed host: the fewest such first, then by name. The one rule
    of the scheduling pass's replacement (:func:`replace_faulted`) and the rebalancer's dry run
    (``rebalance``). ``taken`` is updated with the picks."""
    taken = taken if taken is not None else {}
    failed = failing_hosts(job)
    placement = dict(job.placement or {})
    causes = summary([f for f in job.faults or () if f.get("host") in failed])
    if job.kind != JobKind.GPU:
        return Replacement(
            job.pk, failed, {}, placement, {}, f"a {job.kind} job is not moved host by host", causes
        )
    if not failed:
        return Replacement(job.pk, failed, {}, placement, {}, "no host of it lost its fabric", causes)
    new = {h: n for h, n in placement.items() if h not in failed}
    picks: dict[str, str] = {}
    mine: dict[str, int] = {}
    for host in failed:
        need, unit = placement.get(host, 0), _unit_of(job, host, loc)
        cands = sorted(
            (free, name) for name, s in loc.hosts.items()
            if unit is not None and s.unit == unit and name not in placement and name not in new
            and name not in unusable
            and (free := _free_whole(inv, name, job.pool.gpu_model, job.gpu_model)
                 - taken.get(name, 0) - mine.get(name, 0)) >= need
        )  # fmt: skip
        if not need or not cands:
            unit = unit if unit is not None else "its unit"
            return Replacement(
                job.pk, failed, {}, placement, {},
                f"no healthy host of {loc.domains[unit].name if unit in loc.domains else unit} has {need} free "
                f"GPUs to replace {host}", causes,
            )  # fmt: skip
        pick = cands[0][1]
        new[pick] = need
        picks[host] = pick
        mine[pick] = mine.get(pick, 0) + need
    for name, n in mine.items():
        taken[name] = taken.get(name, 0) + n
    return Replacement(job.pk, failed, picks, placement, new, "", causes)


def replace_hosts(plan: Replacement, loc, now: datetime, *, user=None, source: str = "replace") -> None:
    """Carry out ``plan`` (:func:`plan_replacement`): move the job to ``plan.new`` through the
    queue (``queue.move``, refused when its allocation or placement changed since the plan),
    clear its causes, and record ``job.replaced`` (tenant mail) with the failed hosts and their
    replacements; one transaction. Raises what ``queue.move`` raises (``JobError``,
    ``AllocationError``, ``Job.DoesNotExist``). The scheduling pass (:func:`replace_faulted`), the
    rebalancer's real run and the admin's ``replace/`` all replace through it."""
    failed, added = plan.failed, sorted(set(plan.new) - set(plan.placement))
    why = f"replaced {', '.join(failed)} ({plan.causes})"
    job = Job.objects.get(pk=plan.job_id)
    with transaction.atomic():
        moved = queue.move(
            plan.job_id, plan.new, loc, expected_allocation=job.allocation_id, expected_placement=plan.placement,
            reason=why[:300], details={"replaced": failed}, now=now, user=user,
        )  # fmt: skip
        moved.faults, moved.degraded_at = [], None
        moved.save(update_fields=["faults", "degraded_at"])
        kept = sorted(set(plan.new) & set(plan.placement))
        queue.job_event(
            moved, "job.replaced",
            # what happened and what happens next, for the tenant's mail (issue 26 §4)
            f"{moved}: {', '.join(failed)} lost its fabric ({plan.causes}); its GPUs there were released and "
            f"as many taken on {', '.join(added)} in the same placement unit"
            + (f", beside {', '.join(kept)}" if kept else "")
            + ". The job is placed on its new hosts with its quota, priority and place kept, and starts again "
            "there (its runner restarts it from its last checkpoint); nothing else is needed.",
            now, {"failed": failed, "replacements": added, "placement": plan.new, "by": source},
        )  # fmt: skip
        records.send_changed(moved, JobState.DEGRADED, "replace")


def requeue_degraded(job_id: int, now: datetime, why: str) -> bool:
    """Requeue a degraded job (its locked row; pending again with its submit time and priority,
    ``queue.ends.requeue_job``). False when it is no longer degraded."""
    with transaction.atomic():
        locked = records.locked(job_id)
        if locked.state != JobState.DEGRADED:
            return False
        _requeue(locked, locked.faults, now, why=why)
        return True


def flush_job_events(jobs) -> None:
    """Apply the job events of ``jobs``' fabrics now (their mail), not on the minute flush."""
    for fabric_id in sorted({f.pk for j in jobs if (f := records.fabric_for(j)) is not None}):
        try:
            process_pending_events(fabric_id)
        except Exception:  # the flush applies them within a minute
            log.exception("could not apply the job events of fabric %s", fabric_id)


def replace_now(job_id: int, *, user=None, now: datetime | None = None) -> Job:
    """The admin's replacement of a degraded job's failed hosts, whatever its ``on_fault`` (the
    rebalancer proposes it for a ``notify`` job): planned and carried out by the scheduler's own
    rule (:func:`plan_replacement`, :func:`replace_hosts`) under the pass lock, so a host goes
    to it or to a pass's new job, never both. Returns the moved job.

    Raises:
        queue.JobConflict: the job is not degraded by a failing cause, or a pass holds the lock
            (409, nothing done; the refused attempt is audited as ``job.replace``, ``done`` false).
        queue.JobError: no healthy host of its unit has the GPUs, or the move was refused.
    """
    now = now or timezone.now()
    try:
        with single_instance(queue.PASS_LOCK, queue.PASS_LIMIT_S) as mine:
            if not mine:
                raise queue.JobConflict("a scheduling pass or rebalancing run is running: try again")
            job = Job.objects.select_related("pool", "tenant").get(pk=job_id)
            if job.state != JobState.DEGRADED or not failing_hosts(job):
                raise queue.JobConflict(
                    f"{job} is {job.state}, not degraded by a host that lost its fabric: nothing to replace",
                    state=job.state,
                )
            loc = state.current_locality()
            plan = plan_replacement(job, loc, state.unusable_hosts(loc), state.load_inventory(loc, {"gpu"}))
            if not plan.ok:
                raise queue.JobConflict(f"{job}: {plan.why}", state=job.state)
            try:
                replace_hosts(plan, loc, now, user=user, source="admin")
            except AllocationError as exc:
                raise queue.JobConflict(
                    f"the pools refused the replacement ({exc})", state=job.state
                ) from None
    except queue.JobConflict as exc:  # a refused attempt is audited too (who tried what, and why not)
        with transaction.atomic():
            audit.record(
                "job.replace",
                Job.objects.get(pk=job_id),
                {"done": False, "refused": str(exc)[:300]},
                user=user,
            )
        raise
    flush_job_events([job])
    return Job.objects.get(pk=job_id)


def replace_faulted(now: datetime, loc=None) -> dict[str, int]:
    """Give each degraded job whose ``on_fault`` is ``replace`` and whose causes include a
    failing one (:data:`FAILING_CODES`) healthy hosts for its failed ones
    (:func:`plan_replacement`, carried out by :func:`replace_hosts`). Called by the scheduling
    pass under its lock before it reads the free inventory for the pending jobs, so a host goes
    to the replacement or to a new job, never both. A job that cannot be given such hosts (none
    free, not whole GPUs, the move refused) is requeued. Returns ``{"replaced", "requeued"}``.
    ``loc``: the locality tree (default: the current one)."""
    out = {"replaced": 0, "requeued": 0}
    jobs = [
        j for j in Job.objects.filter(state=JobState.DEGRADED, allocation__isnull=False).select_related("pool", "tenant")
        .order_by("-priority", "submitted_at", "pk")
        if j.effective_on_fault == OnFault.REPLACE and any(f.get("code") in FAILING_CODES for f in j.faults or ())
    ]  # fmt: skip
    if not jobs:
        return out
    loc = loc or state.current_locality()
    unusable = state.unusable_hosts(loc)
    inv = state.load_inventory(loc, {"gpu"})
    for job in jobs:
        plan = plan_replacement(job, loc, unusable, inv)
        why = plan.why
        if plan.ok:
            try:
                replace_hosts(plan, loc, now)
                for name in set(plan.new) - set(plan.placement):  # this pass's inventory: taken
                    for model in list(inv.gpus.get(name, {})):
                        inv.gpus[name][model] = 0
                out["replaced"] += 1
                continue
            except Exception as exc:  # the move refused (changed meanwhile, GPUs taken): requeue
                why = f"no replacement could be bound ({exc})"
        if requeue_degraded(job.pk, now, f"fabric fault: {why}"):
            out["requeued"] += 1
    if out["replaced"] or out["requeued"]:
        flush_job_events(jobs)
    return out


# --- telling the runner --------------------------------------------------------------------------


def webhook_event(state: str, previous: str, source: str) -> str:
    """The webhook event name of a job's state change (``job.degraded``, ``job.recovered``,
    ``job.requeued``, ``job.replaced``, else ``job.<state>``)."""
    if source == "replace":
        return "job.replaced"
    if state == JobState.PENDING and previous:
        return "job.requeued"
    if state == JobState.RUNNING and previous == JobState.DEGRADED:
        return "job.recovered"
    return f"job.{state}"


def announce(job_id: int, state: str, previous: str, source: str) -> None:
    """Post a job's state change to its webhook (the job's, else its tenant's), signed
    (``outbound.services.queue_webhook``). Nothing when neither has a URL."""
    job = Job.objects.select_related("tenant", "pool").filter(pk=job_id).first()
    if job is None:
        return
    url, secret = (
        (job.webhook_url, job.webhook_secret) if job.webhook_url else (job.tenant.webhook_url, job.tenant.webhook_secret)
    )  # fmt: skip
    if not url or (source == "rebalance" and (job.decision or {}).get("replaced")):
        return  # (a replacement's move: its own "replace" change follows)
    data = {
        "job": {"id": job.pk, "name": job.name, "tenant": job.tenant.name, "pool": job.pool.name,
                "state": state, "previous": previous, "reason": job.reason, "faults": job.faults,
                "on_fault": job.effective_on_fault, "placement": job.placement,
                "submitted_at": job.submitted_at, "priority_class": job.priority_class},
        "source": source,
    }  # fmt: skip
    queue_webhook(url, secret, webhook_event(state, previous, source), data, source=f"job:{job.pk}")


def tenant_recipients(job) -> list[str]:
    """The tenant's contacts (``Tenant.contacts``: addresses with an ``@``)."""
    return [a for a in (job.tenant.contacts or []) if isinstance(a, str) and "@" in a]
