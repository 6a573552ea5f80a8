"""``__any`` (``core.lookups``) and ``core.bulk.update_rows``: the same rows and
values as Django's own ``__in`` and ``save``, on SQLite and on PostgreSQL (where both are
written with one array parameter per list or column)."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.bulk import update_rows
from pools.models import Pool, Tenant
from scheduler.models import Job

pytestmark = pytest.mark.backend  # the = ANY(array) lookup (PostgreSQL)


@pytest.fixture
def tenants(db) -> list[Tenant]:
    return [Tenant.objects.create(name=f"t{i}") for i in range(6)]


@pytest.mark.django_db
def test_any_matches_what_in_matches(tenants):
    ids = [tenants[0].pk, tenants[3].pk, tenants[5].pk, 10**9]
    assert sorted(Tenant.objects.filter(pk__any=ids).values_list("name", flat=True)) == ["t0", "t3", "t5"]
    assert list(Tenant.objects.filter(pk__any=ids).order_by("pk")) == list(
        Tenant.objects.filter(pk__in=ids).order_by("pk")
    )
    # None is ignored (as by __in), a string field works too, duplicates change nothing
    assert Tenant.objects.filter(pk__any=[None, tenants[1].pk, tenants[1].pk]).count() == 1
    assert Tenant.objects.filter(name__any=["t2", "t4", "nope"]).count() == 2
    assert Tenant.objects.exclude(pk__any=ids).count() == 3


@pytest.mark.django_db
def test_any_of_nothing_sends_no_query(tenants):
    with CaptureQueriesContext(connection) as ctx:
        assert list(Tenant.objects.filter(pk__any=[])) == []
        assert list(Tenant.objects.filter(pk__any=[None])) == []
        assert Tenant.objects.filter(pk__any=[]).update(description="x") == 0
    assert ctx.captured_queries == []


@pytest.mark.django_db
def test_any_updates_and_locks_like_in(tenants):
    ids = [t.pk for t in tenants[:4]]
    assert Tenant.objects.filter(pk__any=ids).update(description="bulk") == 4
    assert sorted(Tenant.objects.filter(description="bulk").values_list("pk", flat=True)) == ids
    pool = Pool.objects.create(name="p", tenant=tenants[2])
    assert list(Pool.objects.filter(tenant_id__any=ids).values_list("name", flat=True)) == ["p"]
    assert list(Pool.objects.filter(tenant__any=[tenants[2]]).values_list("pk", flat=True)) == [pool.pk]
    # a subquery on the right falls back to IN
    assert Tenant.objects.filter(pk__any=Pool.objects.values("tenant_id")).get() == tenants[2]


@pytest.mark.django_db
def test_any_is_one_array_parameter_on_postgresql(tenants):
    if connection.vendor != "postgresql":
        pytest.skip("the array form is PostgreSQL's")
    ids = [t.pk for t in tenants]
    with CaptureQueriesContext(connection) as ctx:
        assert Tenant.objects.filter(pk__any=ids).count() == 6
    (q,) = ctx.captured_queries
    assert "= ANY(" in q["sql"] and " IN (" not in q["sql"]


@pytest.mark.django_db
def test_update_rows_sets_each_rows_values(tenants):
    pool = Pool.objects.create(name="p", tenant=tenants[0])
    jobs = [
        Job.objects.create(
            name=f"j{i}",
            tenant=tenants[0],
            pool=pool,
            count=1,
            priority=25,
            submitted_at=datetime(2026, 1, 1, tzinfo=UTC),
        )
        for i in range(3)
    ]
    start = datetime(2026, 5, 4, 3, 2, 1, tzinfo=UTC)
    rows = [
        (jobs[0].pk, "quota", "it's 'quoted'", {"code": "quota", "reasons": ["a", 'b "c"'], "n": [1, 2]}, start, ["h1", "h2"]),
        (jobs[1].pk, "", "", {}, None, []),
        (jobs[2].pk, "capacity", "x" * 300, {"nested": {"k": None}}, None, ["h3"]),
    ]  # fmt: skip
    fields = ["pending_code", "reason", "decision", "reserved_start", "reserved_hosts"]
    assert update_rows(Job, fields, rows) == 3
    got = {j.pk: j for j in Job.objects.filter(pk__any=[r[0] for r in rows])}
    for pk, *values in rows:
        assert [getattr(got[pk], f) for f in fields] == values
    assert update_rows(Job, fields, []) == 0
