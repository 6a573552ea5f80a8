"""Job submit with an idempotency key (``Idempotency-Key`` header, per user): a client retrying
a submit after a timeout gets the job its first request queued (200, same id, header
``Idempotent-Replayed: true``) instead of a duplicate; the same key with another request is a
409 naming the first job and the fields that differ; another user's key is their own; a bad
key is a 400 naming the header. Nothing is written by a replay or a refusal."""

from __future__ import annotations

import pytest
from django.db import transaction

from accounts.models import AuditEntry
from events.models import Event
from pools.models import TenantMembership
from scheduler.models import Job
from scheduler.services.queue import IdempotencyConflict, InvalidJob, JobSpec, submit_with_key
from tests.support.jobs import gpu_cluster

URL = "/api/scheduler/jobs/"
KEY = "8e03978e-40d5-43e8-bc93-6894a57f9324"


@pytest.fixture
def setup(db, users):
    c = gpu_cluster(2, 2, 8)
    TenantMembership.objects.create(tenant=c.tenant, user=users["operator"], role="operator")
    TenantMembership.objects.create(tenant=c.tenant, user=users["admin"], role="operator")
    return c


def _counts() -> tuple[int, int, int]:
    return (
        Job.objects.count(),
        AuditEntry.objects.filter(action="job.submit").count(),
        Event.objects.filter(code="job.submitted").count(),
    )


def test_a_retried_submit_returns_the_first_job(setup, client_for):
    c = setup
    op = client_for("operator")
    body = {"name": "train", "pool": c.pool.pk, "count": 8, "tier": "leaf", "tier_mode": "required"}
    first = op.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY=KEY)
    assert first.status_code == 201, first.content
    assert first.json()["idempotency_key"] == KEY and "Idempotent-Replayed" not in first
    after_first = _counts()
    assert after_first[0] == 1
    # the retry: same key, same request (the tier by number now, the tenant spelled out): 200, same job
    again = op.post(
        URL, {**body, "tier": 1, "tenant": c.tenant.pk}, format="json", HTTP_IDEMPOTENCY_KEY=f'"{KEY}"'
    )
    assert again.status_code == 200, again.content
    assert again.json()["id"] == first.json()["id"] and again["Idempotent-Replayed"] == "true"
    assert _counts() == after_first  # no job, audit entry or event written
    # still the same job once it moved on (cancelled), not a new one
    op.post(f"{URL}{first.json()['id']}/cancel/", {}, format="json")
    again = op.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY=KEY)
    assert (again.status_code, again.json()["id"], again.json()["state"]) == (
        200,
        first.json()["id"],
        "cancelled",
    )
    # without a key, every submit is a new job (as before)
    assert op.post(URL, body, format="json").status_code == 201
    assert op.post(URL, body, format="json").status_code == 201
    assert Job.objects.count() == 3


def test_same_key_other_request_is_409_and_other_users_keys_are_their_own(setup, client_for):
    c = setup
    op = client_for("operator")
    body = {"name": "train", "pool": c.pool.pk, "count": 8}
    job_id = op.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY=KEY).json()["id"]
    before = _counts()
    r = op.post(URL, {**body, "count": 16, "priority_class": "high"}, format="json", HTTP_IDEMPOTENCY_KEY=KEY)
    assert r.status_code == 409, r.content
    err = r.json()
    assert (err["code"], err["field"], err["job"]) == ("idempotency_key_reused", "Idempotency-Key", job_id)
    assert err["differs"] == ["count", "priority_class"] and f"job {job_id}" in err["detail"]
    assert _counts() == before
    # another user sending the same key queues their own job
    other = client_for("admin").post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY=KEY)
    assert other.status_code == 201 and other.json()["id"] != job_id
    assert Job.objects.filter(idempotency_key=KEY).count() == 2


@pytest.mark.parametrize("key", ["", "   ", "x" * 256, "has space", "naïve", '""'])
def test_bad_keys_are_400_naming_the_header(setup, client_for, key):
    c = setup
    r = client_for("operator").post(
        URL, {"name": "t", "pool": c.pool.pk, "count": 1}, format="json", HTTP_IDEMPOTENCY_KEY=key
    )
    assert r.status_code == 400, r.content
    assert "1-255 visible ASCII characters" in r.json()["Idempotency-Key"][0]
    assert Job.objects.count() == 0


def test_service_replays_compares_and_the_database_keeps_keys_unique(setup, users):
    """The service: a replay (the name's surrounding spaces do not count), a conflict naming the
    field, the database's unique (owner, key) that decides between two racing submits (raced for
    real on PostgreSQL below), and keys only for a signed-in user."""
    c = setup
    spec = JobSpec(name="a", pool_id=c.pool.pk, count=8)
    job, created = submit_with_key(spec, "k1", user=users["operator"])
    assert created
    again, created = submit_with_key(
        JobSpec(name=" a ", pool_id=c.pool.pk, count=8), "k1", user=users["operator"]
    )
    assert (again.pk, created) == (job.pk, False)
    with pytest.raises(IdempotencyConflict) as err:
        submit_with_key(JobSpec(name="b", pool_id=c.pool.pk, count=8), "k1", user=users["operator"])
    assert err.value.status == 409 and err.value.details["differs"] == ["name"]
    # the unique constraint itself: a second row with the same owner and key cannot be stored
    from django.db import IntegrityError

    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.create(
            name="a", tenant=c.tenant, pool=c.pool, owner=users["operator"], count=8, priority=500,
            idempotency_key="k1",
        )  # fmt: skip
    # keys need a signed-in user (they are per user)
    with pytest.raises(InvalidJob, match="signed-in user"):
        submit_with_key(spec, "k2", user=None)


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_racing_retries_on_postgresql_queue_one_job(monkeypatch, django_user_model):
    """Four submits with one key at once, over real parallel connections (a client retrying
    while its first request is still being served): one job, and every caller gets its id —
    the losers of the unique (owner, key) insert read the winner's row and replay it."""
    import threading

    from django.db import connection, connections

    from scheduler import receivers

    assert connection.vendor == "postgresql"
    monkeypatch.setattr(receivers, "queue_pass", lambda: None)
    c = gpu_cluster(1, 2, 8, name="idem")
    user = django_user_model.objects.create_user("retrier")
    barrier = threading.Barrier(4)
    results, errors = [], []

    def one() -> None:
        try:
            barrier.wait(timeout=30)
            results.append(submit_with_key(JobSpec(name="a", pool_id=c.pool.pk, count=8), KEY, user=user))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert Job.objects.filter(owner=user).count() == 1
    job = Job.objects.get(owner=user)
    assert sorted((j.pk, created) for j, created in results) == [(job.pk, False)] * 3 + [(job.pk, True)]
    assert AuditEntry.objects.filter(action="job.submit", object_id=str(job.pk)).count() == 1


# --- the key's time to live (WEFT_IDEMPOTENCY_TTL_S) ----------------------------------------------


def _submitted_ago(job_id: int, seconds: float) -> None:
    """Set the job's submit time ``seconds`` back from now (no sleeping)."""
    from datetime import timedelta

    from django.utils import timezone

    Job.objects.filter(pk=job_id).update(submitted_at=timezone.now() - timedelta(seconds=seconds))


def test_a_key_is_kept_for_its_ttl_then_the_prune_task_frees_it(setup, client_for, settings):
    from events.tasks import prune_task

    c = setup
    settings.WEFT_IDEMPOTENCY_TTL_S = 3600
    op = client_for("operator")
    body = {"name": "train", "pool": c.pool.pk, "count": 8}
    first = op.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY=KEY).json()["id"]
    # within the TTL (submitted 3590 s ago of 3600): the prune keeps the key, a retry replays
    _submitted_ago(first, 3590)
    assert prune_task()["idempotency_keys"] == 0
    assert Job.objects.get(pk=first).idempotency_key == KEY
    again = op.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY=KEY)
    assert (again.status_code, again.json()["id"], again["Idempotent-Replayed"]) == (200, first, "true")
    before = _counts()
    # past the TTL (3610 s ago): the daily prune clears that key (the job stays, keyless) …
    _submitted_ago(first, 3610)
    assert prune_task()["idempotency_keys"] == 1
    old = Job.objects.get(pk=first)
    assert old.idempotency_key == "" and old.name == "train"
    assert prune_task()["idempotency_keys"] == 0  # nothing left to clear
    # … and the same key queues a new job (201), which now holds the key
    new = op.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY=KEY)
    assert new.status_code == 201 and new.json()["id"] != first and "Idempotent-Replayed" not in new
    assert new.json()["idempotency_key"] == KEY
    assert _counts() == (before[0] + 1, before[1] + 1, before[2] + 1)
    assert list(Job.objects.filter(idempotency_key=KEY).values_list("pk", flat=True)) == [new.json()["id"]]
    # and a retry of that one replays it, not the old job
    assert op.post(URL, body, format="json", HTTP_IDEMPOTENCY_KEY=KEY).json()["id"] == new.json()["id"]


def test_an_expired_key_not_yet_pruned_is_free_too(setup, users, settings):
    """Between the TTL's end and the next daily prune the key is already free: a submit with it
    takes it from the old job (a different request is then no conflict), one second before the
    end it still replays or conflicts."""
    c = setup
    settings.WEFT_IDEMPOTENCY_TTL_S = 600
    op = users["operator"]
    old, created = submit_with_key(JobSpec(name="a", pool_id=c.pool.pk, count=8), "k-ttl", user=op)
    assert created
    _submitted_ago(old.pk, 599)
    with pytest.raises(IdempotencyConflict):
        submit_with_key(JobSpec(name="b", pool_id=c.pool.pk, count=4), "k-ttl", user=op)
    assert submit_with_key(JobSpec(name="a", pool_id=c.pool.pk, count=8), "k-ttl", user=op) == (old, False)
    _submitted_ago(old.pk, 601)
    new, created = submit_with_key(JobSpec(name="b", pool_id=c.pool.pk, count=4), "k-ttl", user=op)
    assert created and new.pk != old.pk and (new.name, new.count, new.idempotency_key) == ("b", 4, "k-ttl")
    old.refresh_from_db()
    assert old.idempotency_key == "" and old.count == 8
