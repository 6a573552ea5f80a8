"""Submitting a job: :func:`submit` (a new pending job, validated by :class:`~.spec.JobSpec` and
:func:`~.spec.check_capacity`, its pool's row locked against a racing delete) and
:func:`submit_with_key` (the same with the client's idempotency key, draft-ietf-httpapi-idempotency-key-header;
Stripe's semantics: a retry gets the first job, a different request with that key
:class:`IdempotencyConflict`, 409), and the keys' time to live (:func:`key_expired`,
:func:`expire_idempotency_keys`, run by the daily prune).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts import audit
from pools.models import Pool, Tenant

from ...choices import PRIORITY
from ...models import Job
from .records import job_event, send_changed
from .spec import InvalidJob, JobError, JobSpec, check_capacity, describe


def submit(spec: JobSpec, *, user=None, now: datetime | None = None) -> Job:
    """Queue a job (pending). Raises :class:`InvalidJob` (400, naming the field) and
    ``Pool.DoesNotExist``. A pass follows on commit (``scheduler.signals``)."""
    return _submit(spec, user, now, "")[0]


def submit_with_key(spec: JobSpec, key: str, *, user, now: datetime | None = None) -> tuple[Job, bool]:
    """:func:`submit` made safe to retry (a client that timed out and sends the same request
    again): ``key`` is the client's idempotency key (the ``Idempotency-Key`` header,
    draft-ietf-httpapi-idempotency-key-header; Stripe's semantics), unique per user
    (``Job.idempotency_key``). Returns ``(job, created)``: a new job, or — the key already used
    by ``user`` for the same request (every request field equal after validation: names of
    tiers and their numbers, a tenant left implicit and the pool's, are the same) — the job
    that first request queued, whatever its state now, and nothing is written. A key is kept
    ``WEFT_IDEMPOTENCY_TTL_S`` seconds from that job's submit (:func:`key_expired`): a key
    older than that is taken from the old job and queues a new one, as once the daily prune
    cleared it (:func:`expire_idempotency_keys`).

    Raises:
        InvalidJob: as :func:`submit`; a key that is not 1-255 visible ASCII characters, or no
            signed-in user (``field`` ``Idempotency-Key``).
        IdempotencyConflict: ``user`` used ``key`` for a different request (409; ``job`` the
            first one's id, ``differs`` the fields that differ). Nothing is written.
    """
    if not getattr(user, "is_authenticated", False):
        raise InvalidJob(
            "an idempotency key needs a signed-in user (keys are per user)", field=IDEMPOTENCY_FIELD
        )
    return _submit(spec, user, now, check_idempotency_key(key))


#: how the API names the idempotency key (the request header) in 400 and 409 answers
IDEMPOTENCY_FIELD = "Idempotency-Key"
IDEMPOTENCY_KEY_MAX = 255
#: the request fields of a job: two submits with one key must agree on every one
REQUEST_FIELDS = (
    "name", "tenant_id", "pool_id", "kind", "count", "gpu_model", "mig_profile", "memory_mib", "compute_pct",
    "gpus_per_host", "segments", "segment_hosts", "segment_tier", "priority_class", "preemptible", "requeue",
    "tier", "tier_mode", "time_limit_s", "on_fault", "webhook_url", "traffic",
)  # fmt: skip


class IdempotencyConflict(JobError):
    """The idempotency key was used by the same user for a different request (409)."""

    code = "idempotency_key_reused"


def check_idempotency_key(key: str) -> str:
    """``key`` as stored: surrounding whitespace and one pair of double quotes (the header's
    structured-field string form, ``"8e03978e-…"``) removed; 1-255 visible ASCII characters.
    Raises :class:`InvalidJob` (``field`` ``Idempotency-Key``) otherwise."""
    key = (key or "").strip()
    if len(key) >= 2 and key[0] == key[-1] == '"':
        key = key[1:-1]
    if not 1 <= len(key) <= IDEMPOTENCY_KEY_MAX or not all("\x21" <= c <= "\x7e" for c in key):
        raise InvalidJob(
            f"an idempotency key is 1-{IDEMPOTENCY_KEY_MAX} visible ASCII characters (a UUID, say)",
            field=IDEMPOTENCY_FIELD,
        )
    return key


def key_expired(job: Job, now: datetime) -> bool:
    """Whether ``job``'s idempotency key is past its time to live: ``WEFT_IDEMPOTENCY_TTL_S``
    seconds (default 86400) from ``job.submitted_at`` have passed at ``now`` (that moment
    included)."""
    return job.submitted_at <= now - timedelta(seconds=settings.WEFT_IDEMPOTENCY_TTL_S)


def expire_idempotency_keys(now: datetime | None = None) -> int:
    """Clear the idempotency keys of jobs submitted ``WEFT_IDEMPOTENCY_TTL_S`` seconds or more
    before ``now`` (:func:`key_expired`), so that their owners can use those keys again; the
    jobs themselves stay. One UPDATE; the submit's audit entry keeps the key it was sent with.
    Run by the daily prune (``events.services.prune`` → ``events.signals.prune_due``). Returns
    how many keys were cleared."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.WEFT_IDEMPOTENCY_TTL_S)
    return Job.objects.filter(submitted_at__lte=cutoff).exclude(idempotency_key="").update(idempotency_key="")


def _replay(existing: Job, fields: dict[str, Any], key: str) -> tuple[Job, bool]:
    differs = [f for f in REQUEST_FIELDS if getattr(existing, f) != fields[f]]
    if differs:
        raise IdempotencyConflict(
            f"idempotency key {key!r} was used for job {existing.pk} with another request "
            f"(differs in {', '.join(differs)}): use a new key for a new job",
            field=IDEMPOTENCY_FIELD, job=existing.pk, differs=differs,
        )  # fmt: skip
    return existing, False


def _submit(spec: JobSpec, user, now: datetime | None, key: str) -> tuple[Job, bool]:
    """:func:`submit` and :func:`submit_with_key` (``key`` empty: none): ``(job, created)``."""
    tier, seg_tier = spec.validate()
    now = now or timezone.now()
    owner = user if getattr(user, "is_authenticated", False) else None
    with transaction.atomic():
        # the pool row locked (FOR NO KEY UPDATE): a pool or tenant delete racing this submit
        # (pools.services.tenancy) waits and then sees the job, or this submit sees the pool gone
        pool = (
            Pool.objects.select_for_update(no_key=True, of=("self",))
            .select_related("tenant")
            .get(pk=spec.pool_id)
        )
        if pool.tenant_id is not None:
            if spec.tenant_id not in (None, pool.tenant_id):
                raise InvalidJob(f"pool {pool.name} belongs to another tenant", field="tenant")
            tenant_id = pool.tenant_id
        elif spec.tenant_id is None:
            raise InvalidJob(f"pool {pool.name} is shared: name the tenant the job is for", field="tenant")
        elif (
            Tenant.objects.select_for_update(no_key=True).filter(pk=spec.tenant_id).values_list("pk").first()
            is None
        ):
            raise InvalidJob(f"no tenant {spec.tenant_id}", field="tenant")
        else:
            tenant_id = spec.tenant_id
        check_capacity(spec, pool)
        fields = dict(
            name=spec.name.strip(), tenant_id=tenant_id, pool_id=pool.pk,
            kind=spec.kind, count=spec.count, gpu_model=spec.gpu_model, mig_profile=spec.mig_profile,
            memory_mib=spec.memory_mib, compute_pct=spec.compute_pct, gpus_per_host=spec.gpus_per_host,
            segments=spec.segments, segment_hosts=spec.segment_hosts, segment_tier=seg_tier,
            priority_class=spec.priority_class, preemptible=spec.preemptible,
            requeue=spec.preemptible if spec.requeue is None else spec.requeue,
            tier=tier, tier_mode=spec.tier_mode, time_limit_s=spec.time_limit_s, on_fault=spec.on_fault,
            webhook_url=spec.webhook_url, traffic=spec.traffic,
        )  # fmt: skip
        if key:
            existing = Job.objects.filter(owner=owner, idempotency_key=key).first()
            if existing is not None:
                if not key_expired(existing, now):
                    return _replay(existing, fields, key)
                # kept past its TTL and not pruned yet: the key is free again (as after the prune)
                Job.objects.filter(pk=existing.pk, idempotency_key=key).update(idempotency_key="")
        try:
            with transaction.atomic():  # a retry racing the first request: the unique key decides
                job = Job.objects.create(
                    **fields, owner=owner, idempotency_key=key, priority=PRIORITY[spec.priority_class],
                    webhook_secret=spec.webhook_secret,
                    submitted_at=now, reason="waiting for a scheduling pass",
                )  # fmt: skip
        except IntegrityError:
            existing = Job.objects.filter(owner=owner, idempotency_key=key).first() if key else None
            if existing is None:
                raise
            return _replay(existing, fields, key)
        job_event(job, "job.submitted", f"{job}: submitted ({describe(job)})", now)
        audit.record(
            "job.submit", job,
            {"pool": pool.name, "tenant": tenant_id, "request": describe(job), "priority_class": job.priority_class,
             "preemptible": job.preemptible, "requeue": job.requeue, "tier": job.tier, "tier_mode": job.tier_mode,
             "time_limit_s": job.time_limit_s, **({"idempotency_key": key} if key else {})},
            user=user,
        )  # fmt: skip
        send_changed(job, "", "submit")
    return job, True
