"""``manage.py alarms``: JSON list on the last line, --active and --fabric filters."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from events.engine import process_pending_events
from events.services import EventSpec, clear_alarm, record_events

pytestmark = pytest.mark.django_db


def run(*args) -> list[dict]:
    out = StringIO()
    call_command("alarms", *args, stdout=out)
    return json.loads(out.getvalue().strip().splitlines()[-1])


def test_alarms_command(topo, users):
    from fabric.models import Fabric

    record_events(topo.fabric, [
        EventSpec(code="link.down", message="a", object_type="link", object_key="k1", object_repr="A <-> B"),
        EventSpec(code="node.removed", message="b", object_type="node", object_key="0x9", object_repr="host9"),
    ])  # fmt: skip
    process_pending_events(topo.fabric.pk)
    other = Fabric.objects.create(name="other")
    record_events(other, [EventSpec(code="link.down", message="c", object_type="link", object_key="k2")])
    process_pending_events(other.pk)
    rows = run()
    assert len(rows) == 3
    first = next(r for r in rows if r["object"] == "A <-> B")
    assert (first["type"], first["severity"], first["state"], first["count"]) == (
        "link.down",
        "critical",
        "active",
        1,
    )
    assert first["first_seen"] and first["last_seen"]
    removed = next(r for r in rows if r["type"] == "node.removed")
    clear_alarm(removed["id"], users["operator"], "replaced")
    assert sorted(r["type"] for r in run("--active", "--fabric", "lab")) == ["link.down"]
    assert len(run("--fabric", "lab")) == 2
    with pytest.raises(CommandError, match="no fabric named 'nope'"):
        run("--fabric", "nope")
