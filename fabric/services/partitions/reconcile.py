"""Reconcile: compare the stored partitions with what the master SM applies, re-apply, alarm.

Nothing else notices when OpenSM stops running what Weft stores: a worker killed in the middle of
an apply (the partition stays ``pending``, and with Redis restarted no task is left to retry it),
an OpenSM recreated with another partitions file (the database still says ``applied`` while the
ports carry only the default PKey), an SM fail-over (the new master reads its own file). The
periodic :func:`reconcile` (beat ``fabric.tasks.reconcile_partitions_task``, every
``WEFT_PARTITIONS_RECONCILE_INTERVAL_S``) of a fabric Weft applies partitions to (one with a
partitions file, :func:`~.coalesce.auto_apply_enabled`):

1. **Pending too long**: partitions ``pending`` (or ``failed``) since more than
   ``WEFT_PARTITIONS_PENDING_ALARM_S`` → event ``partition.apply_stuck`` (an alarm) and a re-apply.
2. **The file**: the partitions file on disk (what the master SM reads, ``-P``) must hold what
   :func:`~.conf.generate_conf` makes now (its SHA-256): another text, or no file → drift.
3. **The ports**: ``smpquery pkeys`` of a window of each partition's member ports (and as many
   non-members) against the stored membership (:mod:`.verify`). The window moves with time
   (``floor(now / interval)``), so every member is read within ``ceil(M / sample)`` intervals
   (``WEFT_PARTITIONS_RECONCILE_SAMPLE`` ports per partition and run) with no state kept.
4. Drift (2 or 3) on a partition stored ``applied``/``partial``/``drift`` → event
   ``partition.reconcile_drift`` (an alarm naming what disagreed) and a re-apply.

Not compared (issue 26 §4, false drift alarms at the demo's start): while an apply of the fabric
runs (it holds ``fabric.partitions_apply.<id>``: the SM is being changed and the apply verifies
what it writes), and port drift read while the stored partitions changed (:func:`~.conf.conf_digest`
before and after the reads differ: the change's own apply verifies it).

Re-applies go through the one coalesced path (:func:`~.coalesce.apply_pending` with ``force``):
written, signalled to the *current* master SM (:func:`~.opensm.master_pid_file`: ``sminfo``,
not a remembered pid) and verified; a verified apply writes ``partition.applied``, which clears
both alarms. The reconcile writes only events here; the partitions' ``applied_*`` state stays the
apply's (:mod:`.opensm`), its one writer.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.locks import lock_remaining_s
from events.services import EventSpec, record_events

from ...choices import ApplyState, NodeType
from ...models import Fabric, Partition, Port
from ...parsers.partitions import KEYWORDS
from .coalesce import apply_pending, auto_apply_enabled, expire_stale_applies
from .common import fabric_event, named_in, notify_changed
from .conf import conf_digest, partitions_path
from .verify import PortCheck, verify_checks

log = logging.getLogger(__name__)

#: states that claim OpenSM runs the stored partition (a reconcile checks those on the ports)
CLAIMED = (ApplyState.APPLIED, ApplyState.PARTIAL, ApplyState.DRIFT)


@dataclass
class ReconcileResult:
    """What one :func:`reconcile` of a fabric found and did (the task's summary).

    ``stale_applies``: recorded applies no worker finished, failed now
    (:func:`~.coalesce.expire_stale_applies`); ``stuck``: PKeys pending/failed longer than the bound; ``file``: "" when the file on disk holds
    what is stored, else why not; ``checked_ports``: ports read; ``drift``: disagreeing ports
    (``[{"partition", "pkey", "guid", "expected", "seen"}]``, at most 20); ``unread``: ports that
    could not be read; ``reapplied``: the re-apply's summary (:func:`~.coalesce.apply_pending`) or
    None; ``events``: event codes written."""

    fabric: str
    skipped: str = ""
    stale_applies: int = 0
    stuck: list[str] = field(default_factory=list)
    file: str = ""
    checked_ports: int = 0
    drift: list[dict] = field(default_factory=list)
    unread: int = 0
    reapplied: dict | None = None
    events: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _window(items: list, size: int, turn: int) -> list:
    """``size`` items of ``items`` starting at ``turn * size`` (wrapping): over
    ``ceil(len / size)`` consecutive turns every item is in a window."""
    if len(items) <= size:
        return list(items)
    start = (turn * size) % len(items)
    return (items + items)[start : start + size]


def _reconcile_checks(fabric: Fabric, parts: list[Partition], sample: int, turn: int) -> list[PortCheck]:
    """The port checks of this turn: per partition, a window of its member ports in the fabric
    and a window of CA ports that are not members (skipped with a keyword member)."""
    ca_ports = list(
        Port.objects.filter(node__fabric=fabric, node__node_type=NodeType.CA)
        .exclude(port_guid="")
        .order_by("port_guid")
        .values_list("port_guid", flat=True)
    )
    wanted = sorted({m.port_guid for p in parts for m in p.members.all() if m.port_guid not in KEYWORDS})
    known: set[str] = set()
    for i in range(0, len(wanted), 500):
        known.update(
            Port.objects.filter(node__fabric=fabric, port_guid__in=wanted[i : i + 500]).values_list(
                "port_guid", flat=True
            )
        )
    checks: list[PortCheck] = []
    for p in parts:
        members = {m.port_guid: m.membership for m in p.members.all()}
        on_fabric = sorted(g for g in members if g in known)
        checks += [PortCheck(p.pk, g, members[g]) for g in _window(on_fabric, sample, turn)]
        if not any(g in KEYWORDS for g in members):
            outside = [g for g in ca_ports if g not in members]
            checks += [PortCheck(p.pk, g, None) for g in _window(outside, sample, turn)]
    return checks


def _file_state(fabric: Fabric, digest: str) -> str:
    """ "" when the partitions file holds the text of ``digest``, else what is wrong with it."""
    path = partitions_path(fabric)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if hashlib.sha256(data).hexdigest() != digest:
        return f"{path} does not hold the partitions Weft stores (replaced, or OpenSM recreated with another file)"
    return ""


def reconcile(fabric: Fabric, *, sample: int | None = None, read_timeout: float = 10.0) -> ReconcileResult:
    """One reconcile of ``fabric`` (module docstring). ``sample``: ports per partition and side
    read in this run (default ``WEFT_PARTITIONS_RECONCILE_SAMPLE``); ``read_timeout``: the bound
    on the port reads of the run, seconds (one read each, no waiting for agreement: an apply
    waits, a reconcile observes). Events are written in one transaction; a re-apply follows.

    Raises:
        ToolAborted: the worker is stopping (nothing recorded).
    """
    t0 = time.monotonic()
    out = ReconcileResult(fabric=fabric.name)
    out.stale_applies = expire_stale_applies(fabric)
    if not auto_apply_enabled(fabric):
        out.skipped = "no partitions file configured: Weft does not apply this fabric's partitions"
        return out
    if lock_remaining_s(f"fabric.partitions_apply.{fabric.pk}") is not None:
        out.skipped = "an apply of this fabric is running: it verifies what it writes"
        return out
    sample = settings.WEFT_PARTITIONS_RECONCILE_SAMPLE if sample is None else sample
    interval = float(settings.WEFT_PARTITIONS_RECONCILE_INTERVAL_S)
    turn = math.floor(time.time() / interval)
    parts = list(Partition.objects.filter(fabric=fabric).prefetch_related("members").order_by("pkey"))
    bound = timezone.now() - timedelta(seconds=settings.WEFT_PARTITIONS_PENDING_ALARM_S)
    stuck = [
        p for p in parts if p.applied_state in (ApplyState.PENDING, ApplyState.FAILED) and p.updated < bound
    ]
    out.stuck = [p.pkey_hex for p in stuck]
    digest = conf_digest(fabric)
    claimed = [p for p in parts if p.applied_state in CLAIMED and not p.is_default]
    if any(p.applied_state in CLAIMED for p in parts):
        out.file = _file_state(fabric, digest)
    if claimed and not out.file:
        checks = _reconcile_checks(fabric, claimed, sample, turn)
        out.checked_ports = len({c.guid for c in checks})
        drift, unread = verify_checks(fabric, claimed, checks, read_timeout, once=True)
        out.drift, out.unread = drift[:20], len(unread)
        if drift and conf_digest(fabric) != digest:  # changed while read: its apply verifies it
            out.skipped = "the partitions changed while their ports were read: their apply verifies them"
            out.drift = []
    specs: list[EventSpec] = []
    if stuck:
        oldest = min(p.updated for p in stuck)
        minutes = (timezone.now() - oldest).total_seconds() / 60
        specs.append(
            fabric_event(
                fabric,
                "partition.apply_stuck",
                f"{len(stuck)} partition(s) of {fabric.name} not applied for {minutes:.0f} min "
                f"({', '.join(out.stuck[:10])}): re-applying",
                {
                    "pkeys": out.stuck[:50],
                    "oldest": oldest.isoformat(),
                    "states": sorted({p.applied_state for p in stuck}),
                },
                parts=stuck,  # their PKeys: the event is their tenants' (issue 22)
            )  # fmt: skip
        )
    if out.file or out.drift:
        first = out.drift[0] if out.drift else None
        what = out.file or (
            f"{len(drift)} port(s) disagree (e.g. {first['guid']} in {first['partition']} {first['pkey']}: "
            f"expected {first['expected'] or 'not a member'}, seen {first['seen'] or 'absent'})"
        )
        specs.append(
            fabric_event(
                fabric,
                "partition.reconcile_drift",
                f"OpenSM does not run the partitions Weft stores for {fabric.name}: {what}; re-applying",
                {"file": out.file, "drift": out.drift, "checked_ports": out.checked_ports},
                parts=named_in(claimed, out.drift),  # the partitions its drift rows name
            )
        )
    if specs:
        with transaction.atomic():
            record_events(fabric, specs)
            notify_changed(fabric, [s.code for s in specs])
        out.events = [s.code for s in specs]
        out.reapplied = apply_pending(fabric, force=True)
    out.seconds = round(time.monotonic() - t0, 3)
    if specs:
        log.warning("partitions of %s reconciled: %s", fabric.name, out.as_dict())
    return out
