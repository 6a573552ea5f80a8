"""Which events and alarms a user may read (issue 22: tenants saw other tenants' job and allocation events).

Events that carry a tenant's data (a job's name, hosts, GPUs, PKey; an allocation's pool and
GPUs) have ``Event.tenant_id`` set by the service that records them (``EventSpec.tenant_id``).
Who sees which tenants is ``accounts.scoping`` (pools registers the rule). Every reader of events
for a user (the events API, the events and alarm pages, the UFM-compatible events) filters with
:func:`scope_events`; every reader of alarms (the alarms API and pages, their CSV export, the
fabric page's alarm cards, UFM ``app/alarms``, the ``ws/alarms/`` pushes) with
:func:`scope_alarms` / :func:`may_read`. An alarm carries its raising event's ``tenant_id``
(``partition.drift`` of a tenant's pool); ``accounts.scoping.STAFF_ONLY`` rows (several tenants'
data in one) are read by fabric-wide staff only.
"""

from __future__ import annotations

from django.db.models import Q, QuerySet

from accounts.scoping import visible_tenant_ids


def scope_events(qs: QuerySet, user) -> QuerySet:
    """``qs`` (events) narrowed to what ``user`` may read: the fabric-wide events (no tenant) and
    those of the user's tenants; unchanged for fabric-wide staff."""
    ids = visible_tenant_ids(user)
    if ids is None:
        return qs
    return qs.filter(Q(tenant_id__isnull=True) | Q(tenant_id__in=sorted(ids)))


def scope_alarms(qs: QuerySet, user) -> QuerySet:
    """``qs`` (alarms) narrowed to what ``user`` may read, as :func:`scope_events`."""
    return scope_events(qs, user)


def may_read(tenant_id: int | None, tenant_ids: set[int] | None) -> bool:
    """Whether a row of ``tenant_id`` is readable by a user who sees ``tenant_ids``
    (:func:`accounts.scoping.visible_tenant_ids`: None for all)."""
    return tenant_ids is None or tenant_id is None or tenant_id in tenant_ids
