"""Writing events: the one way every app records what happened (``record_events``).

Callers run inside their own transaction (the event commits with the change it describes); the
alarm engine (``events.engine``) applies the events' policies afterwards, after a discovery or
sweep, after the SM service's ``sm_state_changed`` signal, or at the latest on the minute flush.
Severity and category default to the registered type's (``events.registry``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from core.bulk import create_objects

from . import registry
from .models import Event


@dataclass
class EventSpec:
    """An event to write; see :class:`events.models.Event` for the fields. An empty ``severity``
    or ``category`` takes the registered type's default (``events.registry.get``)."""

    code: str
    message: str
    severity: str = ""
    category: str = ""
    object_type: str = ""
    object_key: str = ""
    object_repr: str = ""
    node_id: int | None = None
    port_id: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    #: the tenant whose data the event carries (a job's, an allocation's); None: fabric-wide
    tenant_id: int | None = None


def record_events(fabric, specs: list[EventSpec], at: datetime | None = None) -> list[Event]:
    """Bulk-create events for ``fabric`` (may be None for system events) at ``at`` (default now)
    and return them (``object_key`` cut to 120, ``object_repr`` to 300 characters)."""
    at = at or timezone.now()
    rows = [
        Event(
            fabric=fabric,
            at=at,
            code=s.code,
            severity=s.severity or registry.get(s.code).severity,
            category=s.category or registry.get(s.code).category,
            object_type=s.object_type,
            object_key=s.object_key[:120],
            object_repr=s.object_repr[:300],
            node_id=s.node_id,
            port_id=s.port_id,
            message=s.message,
            details=s.details,
            tenant_id=s.tenant_id,
        )
        for s in specs
    ]
    return create_objects(rows)  # COPY on PostgreSQL (a pass writes hundreds)
