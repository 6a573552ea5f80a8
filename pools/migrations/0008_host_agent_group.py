"""The "Host agent" group (``pools.api.permissions.AGENT_GROUP``): service accounts of host agents
post GPU reports through it without a person's role (README "GPU inventory"). Created here so it
exists right after ``migrate``, as the README says; reversing the migration leaves the group (it
may have members)."""

from django.db import migrations

GROUP = "Host agent"  # pools.api.permissions.AGENT_GROUP, frozen as of this migration


def create_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.get_or_create(name=GROUP)


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("pools", "0007_faults"),
    ]

    operations = [migrations.RunPython(create_group, migrations.RunPython.noop)]
