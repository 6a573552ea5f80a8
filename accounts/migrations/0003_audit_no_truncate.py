# Written by hand (issue 22): the audit log is append-only in the database on both backends:
# PostgreSQL refuses TRUNCATE too (a statement-level trigger, next to 0002's row trigger), SQLite
# refuses UPDATE and DELETE (but the user_id -> NULL of a user's deletion). See
# accounts/append_only_sql.py.

from django.db import migrations

from accounts.append_only_sql import add_triggers, drop_triggers


def forwards(apps, schema_editor):
    add_triggers(schema_editor)


def backwards(apps, schema_editor):
    drop_triggers(schema_editor)


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_apitoken_append_only_audit"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards),
    ]
