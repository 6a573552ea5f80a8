"""Partition names become unique per fabric in the database (0014's constraint). Names were only
checked in Python before, so rows stored before (a race, a write past the services) may share a
name: this renames every later one (by id: the first created keeps its name) to
``<name>-0x<pkey>`` (cut to fit 64 characters; ``pkey_0x<pkey>`` for an empty name, the name an
import gives a nameless partition; ``-2``, ``-3``... appended while that is taken too).
Deterministic; nothing else changes. OpenSM reads the new names at the next apply (a name is a
label there; ports follow the PKey)."""

import logging

from django.db import migrations

log = logging.getLogger("fabric.migrations")

NAME_MAX = 64


def renamed(name: str, pkey: int, taken: set[str]) -> str:
    """A name for a later partition called ``name`` with PKey ``pkey`` that is not in ``taken``:
    ``<name>-0x<pkey>`` (``pkey_0x<pkey>`` for ""), then ``-2``, ``-3``... while taken."""
    base, tag = (name, f"-0x{pkey:04x}") if name else ("pkey", f"_0x{pkey:04x}")
    n = 1
    while True:
        suffix = tag if n == 1 else f"{tag}-{n}"
        candidate = base[: NAME_MAX - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        n += 1


def deduplicate(rows) -> dict[int, str]:
    """``{id: new name}`` for ``rows`` (``(id, fabric id, name, pkey)``): each name of a fabric kept
    by its lowest id, the later ones renamed (:func:`renamed`)."""
    taken: dict[int, set[str]] = {}
    for _pk, fabric_id, name, _pkey in rows:
        taken.setdefault(fabric_id, set()).add(name)
    first: set[tuple[int, str]] = set()
    out: dict[int, str] = {}
    for pk, fabric_id, name, pkey in sorted(rows):
        if (fabric_id, name) not in first:
            first.add((fabric_id, name))
            continue
        new = renamed(name, pkey, taken[fabric_id])
        taken[fabric_id].add(new)
        out[pk] = new
    return out


def forwards(apps, schema_editor):
    Partition = apps.get_model("fabric", "Partition")
    db = schema_editor.connection.alias
    rows = list(Partition.objects.using(db).values_list("pk", "fabric_id", "name", "pkey"))
    names = dict((pk, name) for pk, _f, name, _k in rows)
    for pk, new in sorted(deduplicate(rows).items()):
        log.warning("partition %s: name %r is another partition's on its fabric: renamed %r", pk, names[pk], new)
        Partition.objects.using(db).filter(pk=pk).update(name=new)


class Migration(migrations.Migration):
    dependencies = [
        ("fabric", "0012_topology_reference"),
    ]

    operations = [
        migrations.RunPython(forwards, migrations.RunPython.noop, elidable=True),
    ]
