"""Receivers of the fabric app (connected by ``FabricConfig.ready()``): what the fabric itself does
after its own signals (``fabric/signals.py``). They queue tasks; services never do (they queue
through ``core.enqueue``)."""

from __future__ import annotations

import logging

from django.dispatch import receiver

from .models import TopologyReference
from .signals import discovery_committed, sm_state_changed
from .tasks import compare_reference_task, discover_fabric_task

log = logging.getLogger(__name__)


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
