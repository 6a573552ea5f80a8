"""One coalesced apply path: the task, the API, the command and the reconcile all apply through
:func:`apply_pending` (lock ``fabric.partitions_apply.<id>``).

* :func:`queue_apply`: after a change (pools, UFM API), the task applies on a worker.
* :func:`request_apply`: an explicit apply (API, command): a ``fabric.PartitionApply`` record the
  client reads back (the API answers 202 with its id and never waits for OpenSM), run by the task
  or, for the command, in its own process by :func:`run_apply` (the same coalesced path).
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts import audit
from core import enqueue
from core.locks import single_instance
from core.sites import require_live

from ...choices import ApplyRunState, ApplyState
from ...models import Fabric, Partition, PartitionApply
from .conf import conf_digest, partitions_path
from .opensm import apply

log = logging.getLogger(__name__)


# -- apply after a change, coalesced --------------------------------------------------------------

#: applies one :func:`apply_pending` call makes at most (then it leaves the rest to the next change)
MAX_APPLY_ROUNDS = 5


def is_current(fabric: Fabric, digest: str | None = None) -> bool:
    """True when the last apply wrote what is stored now and found it applied: every stored
    partition of ``fabric`` is ``applied`` (or ``partial``: applied to every member the fabric
    has) with ``applied_hash`` = :func:`conf_digest`, and the
    partitions file (:func:`partitions_path`, when set) still holds that text. False with no
    stored partition (nothing says what OpenSM runs), any pending, failed or drifting one, or a
    file that is missing or was replaced (an OpenSM restarted with another file, a new lab)."""
    digest = digest or conf_digest(fabric)
    states = list(Partition.objects.filter(fabric=fabric).values_list("applied_state", "applied_hash"))
    if not states or not all(
        s in (ApplyState.APPLIED, ApplyState.PARTIAL) and h == digest for s, h in states
    ):
        return False
    path = partitions_path(fabric)
    if not path:
        return True
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest
    except OSError:
        return False


def auto_apply_enabled(fabric: Fabric) -> bool:
    """Whether changes made for the pools app are applied without an Admin: the fabric has a
    partitions file to write (:func:`partitions_path`). Without one they stay ``pending``."""
    return bool(partitions_path(fabric))


def queue_apply(fabric_id: int, *, force: bool = False) -> bool:
    """Queue ``fabric.tasks.apply_partitions_task`` for ``fabric_id`` when the caller's
    transaction commits (at once outside one), if :func:`auto_apply_enabled`. ``force``: apply
    even when :func:`is_current` (OpenSM restarted with another file, as a lab does).
    Returns whether it was queued. A broker that is down is logged, not raised: the partitions
    stay ``pending`` and the next change or an Admin's apply catches up."""
    fabric = Fabric.objects.filter(pk=fabric_id).first()
    if fabric is None or not auto_apply_enabled(fabric):
        return False
    # a token per request: the embedded worker drops a call equal to one still running, and the
    # running apply may have read the partitions before this change
    token = os.urandom(6).hex()

    def send() -> None:
        try:
            enqueue.send("fabric.apply_partitions", fabric_id, force=force, request=token)
        except Exception:
            log.exception("could not queue the partitions apply of fabric %s", fabric_id)

    transaction.on_commit(send)
    return True


def apply_limit_s() -> float:
    """Seconds one apply may hold the fabric's apply lock: the verification wait plus 120 s."""
    return float(settings.WEFT_PARTITIONS_VERIFY_TIMEOUT_S) + 120.0


def apply_pending(fabric: Fabric, *, force: bool = False, user=None, timeout: float | None = None) -> dict:
    """Apply the partitions of ``fabric`` unless :func:`is_current` (``force``: apply anyway),
    one apply per fabric at a time, until what was last written is what is stored.

    Coalescing: the caller that takes the lock ``fabric.partitions_apply.<id>`` applies; callers
    that find it taken return ``skipped`` at once. The holder compares what it wrote with
    :func:`conf_digest` after each apply and, after releasing the lock, once more: a change that
    committed before a skipped caller tried the lock committed before that check, so it is applied
    by the holder (or by a caller that takes the lock after it). A failed or drifting apply is
    not retried unless the stored partitions changed meanwhile; at most :data:`MAX_APPLY_ROUNDS`
    applies per call.

    ``timeout``: the verification wait of each apply (default ``WEFT_PARTITIONS_VERIFY_TIMEOUT_S``).
    When the holder is done, the requests that joined it (``PartitionApply`` rows ``coalesced``)
    get its result (:func:`_finish_coalesced`).

    Returns ``{"fabric", "applies", "skipped", "ok", "state", "seconds", "error", "signalled",
    "sha256", "checked_ports", "drift", "unverified"}`` (the last apply's; ``drift``/``unverified``
    up to 20 rows each; ``skipped`` "" when this call held the lock).
    """
    out = {"fabric": fabric.name, "applies": 0, "skipped": "", "ok": None, "state": "", "seconds": 0.0,
           "error": "", "signalled": "", "sha256": "", "checked_ports": 0, "drift": [],
           "unverified": []}  # fmt: skip
    try:
        return _apply_rounds(fabric, out, force=force, user=user, timeout=timeout)
    finally:
        if not out["skipped"]:
            _finish_coalesced(fabric, out)


def _apply_rounds(fabric: Fabric, out: dict, *, force: bool, user, timeout: float | None) -> dict:
    """The rounds of :func:`apply_pending` (its lock and its checks), filling ``out``."""
    written = None  # sha256 of the last file this call wrote
    while out["applies"] < MAX_APPLY_ROUNDS:
        with single_instance(f"fabric.partitions_apply.{fabric.pk}", apply_limit_s()) as mine:
            if not mine:
                if not out["applies"]:
                    out["skipped"] = "an apply of this fabric is running; it applies this change too"
                return out
            while out["applies"] < MAX_APPLY_ROUNDS:
                digest = conf_digest(fabric)
                if digest == written or (written is None and not force and is_current(fabric, digest)):
                    break
                result = apply(fabric, user=user, timeout=timeout)
                written = result.sha256 or digest
                out["applies"] += 1
                out.update(ok=result.ok, state=result.state, error=result.error,
                           seconds=round(out["seconds"] + result.seconds, 3), signalled=result.signalled,
                           sha256=result.sha256, checked_ports=result.checked_ports,
                           drift=result.drift[:20], unverified=result.unverified[:20],
                           verify_seconds=result.verify_seconds)  # fmt: skip
                if result.state == ApplyState.PENDING:  # interrupted by a shutdown: stop here
                    return out
        if written is None or conf_digest(fabric) == written:
            return out
    return out


# -- explicit applies: records a client reads back ------------------------------------------------


def request_apply(
    fabric: Fabric,
    *,
    user=None,
    source: str = "api",
    force: bool = True,
    timeout: float | None = None,
    queue: bool = True,
) -> PartitionApply:
    """Record an apply of ``fabric``'s partitions (``queued``) and queue the task that runs it
    (:func:`run_apply`) when the caller's transaction commits. Returns the record at once: the
    API answers 202 with its id; ``GET /api/fabric/partition-applies/<id>/`` reads it. ``force``
    (default): apply even when :func:`is_current` (an Admin's explicit apply). Audited
    (``partition.apply_request``) in the record's transaction. A broker that is down marks the
    record ``failed`` with the reason (nothing hangs ``queued``). ``queue`` False: only the record
    (the command runs it itself with :func:`run_apply`).

    Raises:
        core.sites.SiteDown: ``queue`` and the fabric's site has no live worker (503): nothing is
            recorded or queued.
    """
    if queue:
        require_live(fabric.site, f"The partitions apply of fabric {fabric.name} was")
    with transaction.atomic():
        rec = PartitionApply.objects.create(
            fabric=fabric, source=source, force=force, timeout_s=timeout,
            requested_by=user if getattr(user, "pk", None) else None,
        )  # fmt: skip
        audit.record("partition.apply_request", fabric, {"apply": rec.pk, "source": source}, user=user)
    if not queue:
        return rec
    token = os.urandom(6).hex()
    rec_id, fabric_id = rec.pk, fabric.pk

    def send() -> None:
        try:
            enqueue.send("fabric.apply_partitions", fabric_id, force=force, request=token, apply_id=rec_id)
        except Exception as exc:
            log.exception("could not queue the partitions apply %s of fabric %s", rec_id, fabric_id)
            PartitionApply.objects.filter(pk=rec_id, state=ApplyRunState.QUEUED).update(
                state=ApplyRunState.FAILED, ok=False, finished=timezone.now(),
                result={"error": f"could not queue the apply: {type(exc).__name__}: {exc}"[:500]},
            )  # fmt: skip

    transaction.on_commit(send)
    return rec


def run_apply(apply_id: int) -> dict:
    """Run the recorded apply ``apply_id`` through :func:`apply_pending` (the task's body; the
    command calls it in its own process). ``running`` while it runs, then ``done`` (``ok`` the
    apply's) or ``failed`` (an error before or during the apply) with :func:`apply_pending`'s
    summary in ``result``. When another apply of the fabric holds the lock, the record becomes
    ``coalesced`` and the holder writes its result when it ends; if the holder released the lock
    meanwhile, this call applies itself. Returns the summary (``{"skipped": ...}`` when the
    record does not exist or is no longer queued)."""
    rec = PartitionApply.objects.select_related("fabric", "requested_by").filter(pk=apply_id).first()
    if rec is None:
        return {"skipped": f"no partitions apply {apply_id}"}
    claimed = PartitionApply.objects.filter(pk=rec.pk, state=ApplyRunState.QUEUED).update(
        state=ApplyRunState.RUNNING, started=timezone.now()
    )
    if not claimed:
        return {"skipped": f"partitions apply {apply_id} is {rec.state}"}
    kwargs = {"force": rec.force, "user": rec.requested_by, "timeout": rec.timeout_s}
    try:
        out = apply_pending(rec.fabric, **kwargs)
        if out["skipped"]:
            PartitionApply.objects.filter(pk=rec.pk).update(state=ApplyRunState.COALESCED, result=out)
            out = apply_pending(rec.fabric, **kwargs)  # the holder may have finished meanwhile
            if out["skipped"]:
                return out  # the holder, still running, writes this record's result
    except Exception as exc:
        log.exception("partitions apply %s of fabric %s failed", rec.pk, rec.fabric.name)
        out = {"fabric": rec.fabric.name, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
    _finish(PartitionApply.objects.filter(pk=rec.pk), out)
    return out


def _finish(records, out: dict) -> int:
    """Mark ``records`` ``done`` (the apply verified, or nothing to apply: OpenSM already runs
    what is stored) or ``failed`` (not applied, drift, or an error), with ``out``."""
    ok = out.get("ok")
    if ok is None and out.get("applies") == 0 and not out.get("error"):
        ok = True
    state = ApplyRunState.DONE if ok else ApplyRunState.FAILED
    return records.update(state=state, ok=bool(ok), result=out, finished=timezone.now())


def _finish_coalesced(fabric: Fabric, out: dict) -> None:
    """Give the holder's result to the requests that joined its apply (``coalesced``)."""
    _finish(PartitionApply.objects.filter(fabric=fabric, state=ApplyRunState.COALESCED), out)


def expire_stale_applies(fabric: Fabric) -> int:
    """Fail the recorded applies of ``fabric`` still ``queued``, ``running`` or ``coalesced`` after
    twice :func:`apply_limit_s` (the worker that ran them was killed, or the queue lost them with a
    Redis restart): a client following one gets an answer, not "running" forever. The stored
    partitions stay as they are (pending ones are the reconcile's to re-apply). Returns how many."""
    bound = timezone.now() - timedelta(seconds=2 * apply_limit_s())
    stale = PartitionApply.objects.filter(
        fabric=fabric,
        state__in=[ApplyRunState.QUEUED, ApplyRunState.RUNNING, ApplyRunState.COALESCED],
        created__lt=bound,
    )
    return stale.update(
        state=ApplyRunState.FAILED, ok=False, finished=timezone.now(),
        result={"error": "no worker finished this apply (killed, or its queue was lost); the "
                         "reconcile re-applies what is pending"},
    )  # fmt: skip


def wait_apply(apply_id: int, timeout: float) -> PartitionApply:
    """The record ``apply_id`` once it is ``done`` or ``failed``, or as it is after ``timeout``
    seconds (the command waiting for an apply it joined). Polls the database (0.2-1 s)."""
    deadline = time.monotonic() + timeout
    interval = 0.2
    while True:
        rec = PartitionApply.objects.get(pk=apply_id)
        if rec.state in (ApplyRunState.DONE, ApplyRunState.FAILED) or time.monotonic() > deadline:
            return rec
        time.sleep(interval)
        interval = min(1.0, interval * 2)
