"""Signals of the fabric app and its receivers (imported in ``FabricConfig.ready()``).

Sent (always from ``transaction.on_commit``):

* ``discovery_committed`` after a discovery/import commits; kwargs ``fabric_id``,
  ``discovery_id``. Listeners: the events rules, the heatmap, and :func:`compare_with_reference`
  here.
* ``sm_state_changed`` after the SM service (``fabric.services.sm``) wrote ``sm.*`` events or saw
  the master move; kwargs ``fabric_id``, ``events`` (codes written), ``moved`` (bool), ``source``
  (``watch``/``discovery``/``sweep``). Listeners: the events app (applies the events) and
  :func:`rediscover_after_sm_move` here.
* ``partitions_changed`` after the partitions service committed (kwargs ``fabric_id``,
  ``events``, ``applied``). Listener: the events app (applies the ``partition.*`` events).

Nothing in the fabric app depends on who else listens.
"""

from __future__ import annotations

import logging

from django.dispatch import Signal, receiver

from .models import TopologyReference
from .tasks import compare_reference_task, discover_fabric_task

log = logging.getLogger(__name__)

discovery_committed = Signal()  # kwargs: fabric_id: int, discovery_id: int
sm_state_changed = Signal()  # kwargs: fabric_id: int, events: list[str], moved: bool, source: str
#: after a partitions change or apply commits (``fabric.services.partitions``); kwargs ``fabric_id``,
#: ``events`` (codes written), ``applied`` (bool: an apply ran)
partitions_changed = Signal()


@receiver(sm_state_changed, dispatch_uid="fabric.rediscover_after_sm_move")
def rediscover_after_sm_move(sender, fabric_id: int, moved: bool = False, source: str = "", **kwargs) -> None:
    """Queue a live discovery when a sweep or the SM watch saw the master SM move: the new master
    may have handed out new LIDs, so counters read by LID are suspect until the topology is read
    again. (A discovery that saw the move already has the new topology.) Never raises: the
    discovery beat catches up when the broker is down."""
    if not moved or source == "discovery":
        return
    try:
        discover_fabric_task.delay(fabric_id)
    except Exception:
        log.exception("could not queue the rediscovery of fabric %s after an SM move", fabric_id)


@receiver(discovery_committed, dispatch_uid="fabric.compare_with_reference")
def compare_with_reference(sender, fabric_id: int, **kwargs) -> None:
    """Queue the reference compare of a fabric whose Admin asked for its events (one query when
    not). Never raises: a failed queueing only loses this compare's events."""
    if not TopologyReference.objects.filter(fabric_id=fabric_id, raise_events=True).exists():
        return
    try:
        compare_reference_task.delay(fabric_id)
    except Exception:
        log.exception("could not queue the reference compare of fabric %s", fabric_id)
