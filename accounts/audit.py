"""Recording audit entries.

``record`` is called by services and API views for every change a user makes. The request's
user and address are taken from ``current_actor`` (set by ``AuditUserMiddleware`` for web
requests) when not passed, so services need not thread the request through.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any

from django.db import models

from core.bulk import create_objects

from .models import AuditEntry


@dataclass(frozen=True)
class Actor:
    """Who acts: a request (its user is read when an entry is written, after DRF has
    authenticated it) or an explicit user."""

    request: Any = None
    explicit_user: Any = None

    @property
    def user(self):
        if self.explicit_user is not None:
            return self.explicit_user
        return getattr(self.request, "user", None)

    @property
    def remote_addr(self) -> str | None:
        return self.request.META.get("REMOTE_ADDR") if self.request is not None else None


current_actor: contextvars.ContextVar[Actor] = contextvars.ContextVar("weft_actor", default=Actor())  # noqa: B039 - Actor is frozen


def _entry(action, obj, changes, user, remote_addr, object_repr, username) -> AuditEntry:
    """The unsaved entry :func:`record` and :func:`record_many` write (their arguments): the
    acting user defaults to the current request's (anonymous: none, the system)."""
    actor = current_actor.get()
    user = user if user is not None else actor.user
    if user is not None and not getattr(user, "is_authenticated", False):
        user = None
    return AuditEntry(
        user=user,
        username=getattr(user, "username", "") if user else (username or "")[:150],
        action=action,
        object_type=obj._meta.label_lower if obj is not None else "",
        object_id=str(obj.pk) if obj is not None and obj.pk is not None else "",
        object_repr=(object_repr if object_repr is not None else str(obj) if obj is not None else "")[:300],
        changes=changes or {},
        remote_addr=remote_addr or actor.remote_addr,
    )


def record(
    action: str,
    obj: models.Model | None = None,
    changes: dict[str, Any] | None = None,
    *,
    user=None,
    remote_addr: str | None = None,
    object_repr: str | None = None,
    username: str | None = None,
) -> AuditEntry:
    """Write one audit entry and return it.

    Args:
        action: a short verb phrase, e.g. ``"alarm.acknowledge"``, ``"fabric.discover"``.
        obj: the model instance concerned, if any.
        changes: JSON-serialisable details, e.g. ``{"severity": ["minor", "critical"]}``.
        user: the acting user; defaults to the current request's user, else the system.
        username: the name recorded when there is no acting user (a failed sign-in's user name).

    Entries are append-only (``accounts.models``): this and :func:`record_many` are the ways to
    write them.
    """
    entry = _entry(action, obj, changes, user, remote_addr, object_repr, username)
    entry.save(force_insert=True)
    return entry


def record_many(
    entries: list[tuple[str, models.Model | None, dict[str, Any] | None]], *, user=None
) -> list[AuditEntry]:
    """:func:`record` for many entries of one actor in one bulk insert (a scheduling pass binding
    hundreds of allocations): ``entries`` are ``(action, obj, changes)``; each becomes the entry
    :func:`record` would write. Returns them (in order)."""
    rows = [_entry(action, obj, changes, user, None, None, None) for action, obj, changes in entries]
    return create_objects(rows)  # COPY on PostgreSQL


def model_changes(old: models.Model | None, new: models.Model, fields: list[str]) -> dict[str, list]:
    """Return ``{field: [old, new]}`` for the ``fields`` that differ between two instances."""
    out: dict[str, list] = {}
    for name in fields:
        before = getattr(old, name, None) if old is not None else None
        after = getattr(new, name, None)
        if before != after:
            out[name] = [_jsonable(before), _jsonable(after)]
    return out


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str, list, dict)):
        return value
    return str(value)
