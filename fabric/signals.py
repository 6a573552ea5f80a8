"""Signals the fabric app sends (declarations only; its own receivers are in ``fabric/receivers.py``,
connected in ``FabricConfig.ready()``).

Sent (always from ``transaction.on_commit``):

* ``discovery_committed`` after a discovery/import commits; kwargs ``fabric_id``,
  ``discovery_id``. Listeners: the events rules, the heatmap, and :func:`fabric.receivers.compare_with_reference`.
* ``sm_state_changed`` after the SM service (``fabric.services.sm``) wrote ``sm.*`` events or saw
  the master move; kwargs ``fabric_id``, ``events`` (codes written), ``moved`` (bool), ``source``
  (``watch``/``discovery``/``sweep``). Listeners: the events app (applies the events) and
  :func:`fabric.receivers.rediscover_after_sm_move`.
* ``partitions_changed`` after the partitions service committed (kwargs ``fabric_id``,
  ``events``, ``applied``). Listener: the events app (applies the ``partition.*`` events).
* ``ports_enabled`` after switch ports were enabled (``ibportstate ... enable`` succeeded: the
  port page's Enable, UFM's healthy ports; ``fabric.services.isolation.set_isolated``); kwargs
  ``fabric_id``, ``ports`` (``[(node GUID, port number)]``). Listener: the lab
  (``lab.receivers``: a lab port does no link training, the lab trains it).

Nothing in the fabric app depends on who else listens.
"""

from __future__ import annotations

from django.dispatch import Signal

discovery_committed = Signal()  # kwargs: fabric_id: int, discovery_id: int
sm_state_changed = Signal()  # kwargs: fabric_id: int, events: list[str], moved: bool, source: str
#: after a partitions change or apply commits (``fabric.services.partitions``); kwargs ``fabric_id``,
#: ``events`` (codes written), ``applied`` (bool: an apply ran)
partitions_changed = Signal()
#: after switch ports were enabled (``fabric.services.isolation.set_isolated``, ``isolated=False``);
#: kwargs ``fabric_id``, ``ports`` (``[(node GUID, port number)]``)
ports_enabled = Signal()
