"""PostgreSQL: concurrent evaluations of one fabric serialise on the fabric row lock, so the same
condition raised from several workers at once gives one alarm with every raise counted."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from events.models import Alarm, Event
from events.rules import process_pending_events
from events.services import EventSpec, record_events

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_concurrent_raises_make_one_alarm(topo):
    assert connection.vendor == "postgresql"
    key = topo.link_key(("spine01", 1), ("leaf01", 1))
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []

    def worker():
        try:
            record_events(
                topo.fabric, [EventSpec(code="link.down", message="down", object_type="link", object_key=key)]
            )
            barrier.wait(10)
            process_pending_events(topo.fabric.pk)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    alarm = Alarm.objects.get()
    assert alarm.count == 6 and alarm.state == "active"
    assert Event.objects.filter(evaluated=False).count() == 0
