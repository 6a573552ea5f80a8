"""One coalesced apply path: the task, the API and the command all apply through
:func:`apply_pending` (lock ``fabric.partitions_apply.<id>``)."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

from django.conf import settings
from django.db import transaction

from weft.locks import single_instance

from ...choices import ApplyState
from ...models import Fabric, Partition
from ...tasks import apply_partitions_task
from .conf import conf_digest, partitions_path
from .opensm import apply

log = logging.getLogger(__name__)


# -- apply after a change, coalesced --------------------------------------------------------------

#: applies one :func:`apply_pending` call makes at most (then it leaves the rest to the next change)
MAX_APPLY_ROUNDS = 5


def is_current(fabric: Fabric, digest: str | None = None) -> bool:
    """True when the last apply wrote what is stored now and found it applied: every stored
    partition of ``fabric`` is ``applied`` with ``applied_hash`` = :func:`conf_digest`, and the
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
            apply_partitions_task.delay(fabric_id, force=force, request=token)
        except Exception:
            log.exception("could not queue the partitions apply of fabric %s", fabric_id)

    transaction.on_commit(send)
    return True


def _apply_limit_s() -> float:
    return float(settings.WEFT_PARTITIONS_VERIFY_TIMEOUT_S) + 120.0


def apply_pending(fabric: Fabric, *, force: bool = False, user=None) -> dict:
    """Apply the partitions of ``fabric`` unless :func:`is_current` (``force``: apply anyway),
    one apply per fabric at a time, until what was last written is what is stored.

    Coalescing: the caller that takes the lock ``fabric.partitions_apply.<id>`` applies; callers
    that find it taken return ``skipped`` at once. The holder compares what it wrote with
    :func:`conf_digest` after each apply and, after releasing the lock, once more: a change that
    committed before a skipped caller tried the lock committed before that check, so it is applied
    by the holder (or by a caller that takes the lock after it). A failed or drifting apply is
    not retried unless the stored partitions changed meanwhile; at most :data:`MAX_APPLY_ROUNDS`
    applies per call.

    Returns ``{"fabric", "applies", "skipped", "ok", "state", "seconds", "error"}`` (the last
    apply's ``ok``/``state``/``error``; ``skipped`` "" when this call held the lock).
    """
    out = {"fabric": fabric.name, "applies": 0, "skipped": "", "ok": None, "state": "", "seconds": 0.0,
           "error": ""}  # fmt: skip
    written = None  # sha256 of the last file this call wrote
    while out["applies"] < MAX_APPLY_ROUNDS:
        with single_instance(f"fabric.partitions_apply.{fabric.pk}", _apply_limit_s()) as mine:
            if not mine:
                if not out["applies"]:
                    out["skipped"] = "an apply of this fabric is running; it applies this change too"
                return out
            while out["applies"] < MAX_APPLY_ROUNDS:
                digest = conf_digest(fabric)
                if digest == written or (written is None and not force and is_current(fabric, digest)):
                    break
                result = apply(fabric, user=user)
                written = result.sha256 or digest
                out["applies"] += 1
                out.update(ok=result.ok, state=result.state, error=result.error,
                           seconds=round(out["seconds"] + result.seconds, 3))  # fmt: skip
                if result.state == ApplyState.PENDING:  # interrupted by a shutdown: stop here
                    return out
        if written is None or conf_digest(fabric) == written:
            return out
    return out
