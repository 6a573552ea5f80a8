"""The job queue: the one writer of :class:`~scheduler.models.Job` and
:class:`~scheduler.models.JobDecision` (issue 12). A package (issue 27): the module moved to
``passes`` whole first, so that its history follows; the use cases are split out of it next.
The public names stay importable from ``scheduler.services.queue``."""

from __future__ import annotations

from pools.services.allocation import MAX_COUNT

from .passes import (
    IDEMPOTENCY_FIELD,
    MAX_SEGMENTS,
    MAX_TIME_LIMIT_S,
    PASS_LIMIT_S,
    PASS_LOCK,
    TENANT_MAIL_CODES,
    IdempotencyConflict,
    InvalidJob,
    JobConflict,
    JobError,
    JobSpec,
    allocation_lost,
    bind_job,
    cancel,
    check_capacity,
    describe,
    end_previous_run,
    expire_idempotency_keys,
    expire_time_limits,
    finish,
    job_event,
    key_expired,
    move,
    pass_inputs,
    queue_order,
    queued_job,
    request_pass,
    run_pass,
    seen_by,
    set_reclaimer,
    set_replacer,
    start,
    submit,
    submit_with_key,
    sync_job_partitions,
)
from .passes import (
    _fabric_for as _fabric_for,  # until the split (scheduler.services.faults)
)
from .passes import (
    _locked as _locked,  # until the split (scheduler.services.faults)
)
from .passes import (
    _record_decision as _record_decision,  # until the split (scheduler.services.faults)
)
from .passes import (
    _requeue as _requeue,  # until the split (scheduler.services.faults)
)
from .passes import (
    _send as _send,  # until the split (scheduler.services.faults)
)

__all__ = [
    "IDEMPOTENCY_FIELD",
    "IdempotencyConflict",
    "InvalidJob",
    "JobConflict",
    "JobError",
    "JobSpec",
    "MAX_COUNT",
    "MAX_SEGMENTS",
    "MAX_TIME_LIMIT_S",
    "PASS_LIMIT_S",
    "PASS_LOCK",
    "TENANT_MAIL_CODES",
    "allocation_lost",
    "bind_job",
    "cancel",
    "check_capacity",
    "describe",
    "end_previous_run",
    "expire_idempotency_keys",
    "expire_time_limits",
    "finish",
    "job_event",
    "key_expired",
    "move",
    "pass_inputs",
    "queue_order",
    "queued_job",
    "request_pass",
    "run_pass",
    "seen_by",
    "set_reclaimer",
    "set_replacer",
    "start",
    "submit",
    "submit_with_key",
    "sync_job_partitions",
]
