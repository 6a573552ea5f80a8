"""An index on ``Allocation.job``: the scheduler finds a job's allocations by its reference
(``scheduler.services.timeline``) and the lab seeding checks which references hold GPUs
(``pools.lab``); without it each is a scan of every allocation ever made."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("pools", "0008_host_agent_group"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="allocation",
            index=models.Index(fields=["job"], name="allocation_job"),
        ),
    ]
