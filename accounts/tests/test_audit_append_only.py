"""The audit log is append-only for everyone: no ORM path, admin page or API call changes or
deletes an entry; in SQL too, triggers refuse it (PostgreSQL: UPDATE, DELETE and TRUNCATE; SQLite:
UPDATE and DELETE). Deleting a user only unlinks their entries (the user name stays)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction
from django.test import Client

from accounts import audit
from accounts.models import AuditEntry, AuditLogIsAppendOnly

pytestmark = pytest.mark.backend  # the append-only audit trigger (PostgreSQL) vs the SQLite check


@pytest.fixture
def entry(people) -> AuditEntry:
    return audit.record(
        "fabric.delete", people.vic, {"name": ["lab", None]}, user=people.ada, remote_addr="192.0.2.1"
    )


@pytest.mark.parametrize(
    "attempt",
    [
        lambda e: e.delete(),
        lambda e: AuditEntry.objects.filter(pk=e.pk).delete(),
        lambda e: AuditEntry.objects.all().delete(),
        lambda e: AuditEntry._base_manager.filter(pk=e.pk).delete(),
        lambda e: AuditEntry.objects.filter(pk=e.pk).update(username="someone"),
        lambda e: AuditEntry.objects.update(changes={}),
        lambda e: AuditEntry.objects.filter(pk=e.pk).update(user=None, action="x"),
        lambda e: AuditEntry.objects.bulk_update([e], ["action"]),
        lambda e: AuditEntry.objects.update_or_create(pk=e.pk, defaults={"action": "x"}),
        lambda e: (setattr(e, "action", "x"), e.save()),
        lambda e: AuditEntry.objects.get(pk=e.pk).save(update_fields=["action"]),
    ],
)
def test_orm_cannot_change_or_delete(entry, attempt):
    before = AuditEntry.objects.values().get(pk=entry.pk)
    with pytest.raises(AuditLogIsAppendOnly):
        attempt(entry)
    assert AuditEntry.objects.values().get(pk=entry.pk) == before


def test_a_copy_with_the_same_key_is_not_an_update(entry):
    clone = AuditEntry(pk=entry.pk, action="forged")
    with pytest.raises(Exception):  # noqa: B017 - IntegrityError (SQLite, PostgreSQL) wrapped in the test's atomic
        with transaction.atomic():
            clone.save()
    assert AuditEntry.objects.get(pk=entry.pk).action == "fabric.delete"


def test_superuser_admin_pages_are_view_only(people, entry):
    client = Client()
    client.force_login(people.root)
    page = client.get(f"/admin/accounts/auditentry/{entry.pk}/change/")
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert client.post(f"/admin/accounts/auditentry/{entry.pk}/change/", {"action": "x"}).status_code == 403
    assert client.get(f"/admin/accounts/auditentry/{entry.pk}/delete/").status_code == 403
    assert client.get("/admin/accounts/auditentry/add/").status_code == 403
    changelist = client.get("/admin/accounts/auditentry/")
    assert changelist.status_code == 200 and b"delete_selected" not in changelist.content
    assert AuditEntry.objects.filter(pk=entry.pk, action="fabric.delete").exists()


@pytest.mark.parametrize("method", ["put", "patch", "delete", "post"])
def test_api_is_read_only_even_for_a_superuser(people, entry, api, method):
    url = "/api/accounts/audit/" if method == "post" else f"/api/accounts/audit/{entry.pk}/"
    resp = getattr(api(people.root), method)(url, {"action": "x"}, format="json")
    assert resp.status_code == 405
    assert AuditEntry.objects.filter(pk=entry.pk, action="fabric.delete").exists()
    assert AuditEntry.objects.exclude(action="user.login").count() == 1


def test_deleting_a_user_unlinks_their_entries(people, entry):
    get_user_model().objects.filter(pk=people.ada.pk).delete()
    kept = AuditEntry.objects.get(pk=entry.pk)
    assert (kept.user_id, kept.username, kept.action) == (None, "ada", "fabric.delete")


@pytest.mark.integration
def test_postgresql_trigger_refuses_sql_update_and_delete(people, entry):
    """Even SQL that bypasses the ORM (a DBA's ``psql``, a compromised process) cannot rewrite it."""
    if connection.vendor != "postgresql":
        pytest.skip("the trigger is PostgreSQL's")
    for sql in (
        "DELETE FROM accounts_auditentry WHERE id = %s",
        "UPDATE accounts_auditentry SET action = 'x' WHERE id = %s",
        "UPDATE accounts_auditentry SET user_id = NULL, username = 'x' WHERE id = %s",
    ):
        with pytest.raises(DatabaseError, match="append-only"):
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(sql, [entry.pk])
    with connection.cursor() as cursor:  # what deleting a user does: allowed
        cursor.execute("UPDATE accounts_auditentry SET user_id = NULL WHERE id = %s", [entry.pk])
    kept = AuditEntry.objects.get(pk=entry.pk)
    assert (kept.user_id, kept.username, kept.action) == (None, "ada", "fabric.delete")


def _raw(sql: str, params=()) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


def test_sql_that_bypasses_the_orm_cannot_rewrite_or_delete_on_either_database(people, entry):
    """SQLite (unit tests) and PostgreSQL (integration) alike: a raw UPDATE or DELETE is refused;
    the ``user_id → NULL`` of a user's deletion is the one change let through."""
    for sql in (
        "DELETE FROM accounts_auditentry WHERE id = %s",
        "DELETE FROM accounts_auditentry",
        "UPDATE accounts_auditentry SET action = 'x' WHERE id = %s",
        "UPDATE accounts_auditentry SET changes = '{}' WHERE id = %s",
        "UPDATE accounts_auditentry SET user_id = NULL, username = 'x' WHERE id = %s",
    ):
        with pytest.raises(DatabaseError, match="append-only"):
            _raw(sql, [entry.pk] if "%s" in sql else [])
    _raw("UPDATE accounts_auditentry SET user_id = NULL WHERE id = %s", [entry.pk])
    kept = AuditEntry.objects.get(pk=entry.pk)
    assert (kept.user_id, kept.username, kept.action) == (None, "ada", "fabric.delete")


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_postgresql_refuses_truncate_of_the_audit_log(people, entry):
    """``TRUNCATE`` does not fire row triggers: a statement-level one refuses it, also when it
    comes through a ``TRUNCATE auth_user CASCADE`` (committed rows, as in production: a TRUNCATE
    in the transaction that inserted them is refused by PostgreSQL for pending FK checks)."""
    if connection.vendor != "postgresql":
        pytest.skip("TRUNCATE is PostgreSQL's")
    for sql in ("TRUNCATE accounts_auditentry", "TRUNCATE accounts_auditentry RESTART IDENTITY CASCADE",
                "TRUNCATE auth_user CASCADE"):  # fmt: skip
        with pytest.raises(DatabaseError, match="append-only: TRUNCATE refused"):
            _raw(sql)
    assert AuditEntry.objects.filter(pk=entry.pk, action="fabric.delete").exists()


@pytest.mark.django_db(transaction=True)
def test_the_test_flush_still_empties_the_audit_log(people):
    """The flush between transactional tests sets the triggers aside in its own transaction
    (``conftest.py``): this test leaves an entry, and the next transactional test starts empty."""
    audit.record("fabric.delete", people.vic, {"name": ["lab", None]}, user=people.ada)
    assert AuditEntry.objects.filter(action="fabric.delete").count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_test_flush_still_empties_the_audit_log_after(people):
    assert not AuditEntry.objects.filter(action="fabric.delete").exists()
    audit.record("fabric.delete", people.vic, {"name": ["lab", None]}, user=people.ada)
    with pytest.raises(DatabaseError, match="append-only"):  # and the triggers are back
        _raw("DELETE FROM accounts_auditentry")
