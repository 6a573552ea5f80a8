"""Signals of the pools app (sent from ``transaction.on_commit``).

* ``inventory_committed`` after a host's GPU report is stored (``pools.services.inventory``);
  kwargs ``host_id``, ``fabric_id``, ``summary`` (the ingest summary dict; after
  ``resolve_lost_rails`` gave GPUs their rail again: ``{"host", "fabric", "rails_resolved":
  [GPU index]}``). Listeners: the
  allocation service and pool pages (later parts of issue 11).
* ``allocation_changed`` after an allocation is created or ends (``pools.services.allocation``);
  kwargs ``allocation_id``, ``pool_id``, ``state`` (the new state), ``gpu_ids`` (sorted GPU
  pks), ``pool_partition_id`` (the pool's partition when the change was made, its row locked:
  None when it had none, so the partition receiver need not look). Listeners: ``pools.receivers`` (the pool's partition members), pool pages.

Receivers are in ``pools.receivers``, not here: what they call imports the allocation service,
which imports this module.
"""

from __future__ import annotations

from django.dispatch import Signal

inventory_committed = Signal()  # kwargs: host_id: int, fabric_id: int, summary: dict
allocation_changed = Signal()  # kwargs: allocation_id, pool_id, state, gpu_ids, pool_partition_id
