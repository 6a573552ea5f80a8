"""Signals of the fabric app.

``discovery_committed`` is sent after a discovery/import transaction commits (from
``transaction.on_commit``), with ``fabric_id`` and ``discovery_id``. The events app evaluates its
rules from it; nothing in the fabric app depends on who listens.
"""

from django.dispatch import Signal

discovery_committed = Signal()  # kwargs: fabric_id: int, discovery_id: int
