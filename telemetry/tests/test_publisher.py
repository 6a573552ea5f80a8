"""The sweep publisher thread (``telemetry.services.publisher``, ``WEFT_SWEEP_PUBLISH_ASYNC``).

With the setting on (the PostgreSQL + Redis default) ``publish`` only queues: one thread per
process sends ``sweep_committed`` to the real receivers (heatmap producer, counter rules), in the
order the sweeps committed, every one. PostgreSQL only: the thread needs its own connection to
see the committed rows (an in-memory SQLite test database is per connection).
"""

from __future__ import annotations

import threading

import pytest

from telemetry.models import Sweep
from telemetry.services import publisher
from telemetry.signals import sweep_committed
from tests.support.telemetry import make_fabric, write_sweep

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_queued_sweeps_reach_the_receivers_in_order_from_the_publisher_thread(settings):
    settings.WEFT_SWEEP_PUBLISH_ASYNC = True
    lab = make_fabric("pub")
    fabric, port = lab["fabric"], lab["ports"][("leaf1", 1)]
    sweeps = [write_sweep(fabric, {port: {"utilisation": u, "congestion": 0.0}}) for u in (0.1, 0.2, 0.3)]
    seen: list[tuple[int, str]] = []

    def record(sender, fabric_id, sweep_id, **kwargs):
        seen.append((sweep_id, threading.current_thread().name))

    sweep_committed.connect(record, sender=Sweep, weak=False)
    try:
        for s in sweeps:
            publisher.publish(fabric.pk, s.pk)
        assert publisher.flush(30), "the publisher thread did not drain its queue"
    finally:
        sweep_committed.disconnect(record, sender=Sweep)
    assert seen == [(s.pk, "weft-sweep-publisher") for s in sweeps]
    assert publisher.pending() == 0
