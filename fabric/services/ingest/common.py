"""The pieces every topology writer of the ingest shares: reading rows without the ORM, making a
Discovery the fabric's latest (and signalling it on commit), handing SMs to the SM service."""

from __future__ import annotations

import functools

from django.core.exceptions import EmptyResultSet
from django.db import connection, transaction
from django.utils import timezone

from ...models import Discovery, Fabric
from ...signals import discovery_committed
from .. import sm as sm_service
from .changes import Changes

#: rows per ``bulk_update`` batch
BATCH = 2000


def fetch_rows(qs) -> list[tuple]:
    """Rows of a ``values_list`` queryset as plain tuples (no per-row ORM work: 30k+ rows here)."""
    try:
        sql, params = qs.query.sql_with_params()
    except EmptyResultSet:  # an empty ``__in`` list
        return []
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def became_latest(fabric: Fabric, discovery: Discovery) -> None:
    """Make ``discovery`` the fabric's ``last_discovery`` and send ``discovery_committed`` on
    commit (inside the writer's transaction; every Discovery the topology writers record)."""
    Fabric.objects.filter(pk=fabric.pk).update(last_discovery=discovery)
    transaction.on_commit(
        functools.partial(
            discovery_committed.send, sender=Discovery, fabric_id=fabric.pk, discovery_id=discovery.pk
        )
    )


def sync_sms(fabric: Fabric, sms: list, ch: Changes) -> None:
    """Hand the source's SMs (``SMRecord``s) to the SM service (the one writer of SM rows and
    ``sm.*`` events)."""
    if not sms:
        return
    master = next((s for s in sms if s.is_master), None)
    others = [s for s in sms if s is not master]
    if master is None:  # no master in this source: store the SMs it lists, say nothing about the master
        for rec in others:
            ch.rows += sm_service.store_sm(fabric, rec, timezone.now(), touch=False)
        return
    seen = sm_service.observe_sms(fabric, master, others=others, source=sm_service.DISCOVERY)
    ch.rows += seen.rows + len(seen.events)
