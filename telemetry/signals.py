"""Signals the telemetry app sends (declarations only; its receivers are in
``telemetry/receivers.py``, connected in ``TelemetryConfig.ready()``).

Sent: ``sweep_committed`` after a counter sweep's transaction commits (from
``transaction.on_commit``), with ``fabric_id`` and ``sweep_id``. Listeners: the heatmap producer
(``telemetry.receivers``) and the events counter rules (``events.receivers``).
"""

from django.dispatch import Signal

sweep_committed = Signal()  # kwargs: fabric_id: int, sweep_id: int
