
from django.db import migrations, models
from django.db.models.functions import Trim


def names_from_descriptions(apps, schema_editor):
    """Existing nodes: no map yet, so the name is the trimmed description (as ingest writes it)."""
    Node = apps.get_model("fabric", "Node")
    Node.objects.update(name=Trim("description"))


class Migration(migrations.Migration):

    dependencies = [
        ('fabric', '0005_node_unreachable_since_notice_source'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='node',
            options={'ordering': ['fabric', 'node_type', 'name']},
        ),
        migrations.AddField(
            model_name='fabric',
            name='node_name_map',
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name='fabric',
            name='node_name_map_changed',
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name='fabric',
            name='node_name_map_path',
            field=models.CharField(blank=True, max_length=1024),
        ),
        migrations.AddField(
            model_name='node',
            name='name',
            field=models.CharField(blank=True, db_index=True, max_length=128),
        ),
        migrations.RunPython(names_from_descriptions, migrations.RunPython.noop),
    ]
