"""Signals of the pools app (sent from ``transaction.on_commit``).

* ``inventory_committed`` after a host's GPU report is stored (``pools.services.inventory``);
  kwargs ``host_id``, ``fabric_id``, ``summary`` (the ingest summary dict). Listeners: the
  allocation service and pool pages (later parts of issue 11).
"""

from __future__ import annotations

from django.dispatch import Signal

inventory_committed = Signal()  # kwargs: host_id: int, fabric_id: int, summary: dict
