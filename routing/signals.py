"""Signals of the routing app and its receivers (imported in ``RoutingConfig.ready()``).

Sent (from ``transaction.on_commit``):

* ``routes_changed`` after ``routing.services.collect.collect_routes`` stored a snapshot whose
  tables differ from the previous one; kwargs ``fabric_id``, ``snapshot_id``, ``moved`` (the
  snapshot's ``moved``: ``{"lids": n, "switches": {guid: n}}``). For the apps that keep anything
  computed from the routes (the jobs on every link).

Received: ``fabric.signals.discovery_committed`` (a topology change: the SM may have re-routed)
and ``fabric.signals.sm_state_changed`` (a new master routes anew): queue a read of the tables
of a live fabric (:func:`routing.tasks.collect_routes_task`, which compares digests and stores
only a change). The fabric app never imports this one.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.dispatch import Signal, receiver

from fabric.signals import discovery_committed, sm_state_changed

log = logging.getLogger(__name__)

routes_changed = Signal()  # kwargs: fabric_id: int, snapshot_id: int, moved: dict


def _queue(fabric_id: int, reason: str) -> None:
    """Queue a read of a live fabric's tables ``WEFT_ROUTING_SETTLE_S`` from now (the SM re-routes
    in its own sweep after the change): a Celery countdown; the embedded deployment's in-process
    pool waits it out with a timer and drops a delayed call when no pool runs (tests, one-shot
    commands: ``weft.celery``). Nothing in eager mode (``WEFT_CELERY_EAGER``): the read would run at
    once inside the discovery, before the SM has re-routed; the beat's read and ``manage.py
    collect_routes`` cover those."""
    from core import enqueue
    from fabric.collectors.tools import is_live
    from fabric.models import Fabric

    if settings.CELERY_TASK_ALWAYS_EAGER:
        return
    fabric = Fabric.objects.filter(pk=fabric_id).first()
    if fabric is None or not is_live(fabric):
        return
    try:
        enqueue.send("routing.collect", fabric_id, reason, countdown=settings.WEFT_ROUTING_SETTLE_S or 0.01)
    except Exception:
        log.exception("could not queue the routes read of fabric %s", fabric_id)


@receiver(discovery_committed, dispatch_uid="routing.after_discovery")
def read_routes_after_discovery(sender, fabric_id: int, **kwargs) -> None:
    """Queue a routes read of a live fabric after its topology was committed. Never raises."""
    _queue(fabric_id, "discovery")


@receiver(sm_state_changed, dispatch_uid="routing.after_sm_change")
def read_routes_after_sm_change(sender, fabric_id: int, moved: bool = False, **kwargs) -> None:
    """Queue a routes read when the master SM moved (a new master computes its own routes)."""
    if moved:
        _queue(fabric_id, "sm")
