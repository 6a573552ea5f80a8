"""Which events a user may read (issue 22: tenants saw other tenants' job and allocation events).

Events that carry a tenant's data (a job's name, hosts, GPUs, PKey; an allocation's pool and
GPUs) have ``Event.tenant_id`` set by the service that records them (``EventSpec.tenant_id``).
Who sees which tenants is ``accounts.scoping`` (pools registers the rule). Every reader of events
for a user (the events API, the events and alarm pages, the UFM-compatible events) filters with
:func:`scope_events`.
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
