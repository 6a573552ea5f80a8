"""Signals of the telemetry app.

``sweep_committed`` is sent after a counter sweep's transaction commits (from
``transaction.on_commit``), with ``fabric_id`` and ``sweep_id``. Listeners: the heatmap
producer (publishes the delta over Channels) and the events rules engine.
"""

from django.dispatch import Signal

sweep_committed = Signal()  # kwargs: fabric_id: int, sweep_id: int
