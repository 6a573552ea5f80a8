"""The "UFM integration" group (``ufm.auth.INTEGRATION_GROUP``): its members may change PKeys
through the UFM-compatible API without the Admin role. Created here so service accounts can be
added to it right after ``migrate``; removing the migration leaves the group (it may have members)."""

from django.db import migrations

GROUP = "UFM integration"  # ufm.auth.INTEGRATION_GROUP, frozen as of this migration


def create_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.get_or_create(name=GROUP)


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("ufm", "0002_unhealthy_peer_and_jobs"),
    ]

    operations = [migrations.RunPython(create_group, migrations.RunPython.noop)]
