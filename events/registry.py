"""The event-type registry: every app declares the event types it writes.

Modelled on NetBox's ``netbox/events.py`` (``EventType(...).register()``): an app lists its types
in ``<app>/event_types.py`` as ``EVENT_TYPES = [EventType(...), ...]`` and registers them from its
``AppConfig.ready()`` with :func:`register`. The events app then

* creates an ``EventPolicy`` row (the admin-editable copy of the defaults) for every registered
  type after ``migrate`` (``events.policies.ensure_policies``);
* applies the type's defaults where no policy row exists yet (``events.policies.load_policies``).

Each type has a stable dotted ``code``. Alarms are keyed by ``(fabric, code, object_key)``; an
event whose type lists ``clears`` closes the open alarms of those codes on the same object key
(``clear_scope="key"``) or on the whole fabric (``clear_scope="fabric"``, e.g. any new SM master
clears "SM master lost").

This module imports no models, so ``event_types`` modules and models can both use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .choices import Category, ClearScope, Severity


@dataclass(frozen=True)
class EventType:
    """One event type and its default policy.

    Fields: ``code`` (dotted, at most 64 characters, e.g. ``link.down``), ``name`` (shown to
    admins), ``category`` (:class:`events.choices.Category`), ``severity`` (default
    :class:`events.choices.Severity`), ``raise_alarm`` (open an alarm per object key),
    ``email`` (mail recipients when the alarm opens, or per event for event-only types),
    ``notify_clear`` (also mail when it clears), ``ttl_s`` (0 keeps an alarm until it is cleared,
    otherwise it clears itself ``ttl_s`` seconds after it was last raised), ``threshold`` with
    ``threshold_unit`` and ``consecutive`` (only for condition types evaluated by a rule:
    counters, health), ``clear_consecutive`` and ``clear_factor`` (the clear hysteresis of such a
    rule: its alarm clears after ``clear_consecutive`` evaluations in a row at or below
    ``threshold × clear_factor``; a value between that and the threshold neither raises nor
    clears, and restarts the count), ``clears`` (codes whose open alarms an event of this type clears) with
    ``clear_scope`` (``key`` or ``fabric``), ``description``, and ``app`` (the app that declared
    it; set by :func:`register`).
    """

    code: str
    name: str
    category: str
    severity: str
    raise_alarm: bool = False
    email: bool = False
    notify_clear: bool = True
    ttl_s: int = 0
    threshold: float | None = None
    threshold_unit: str = ""
    consecutive: int = 1
    clear_consecutive: int = 1
    clear_factor: float = 1.0
    clears: tuple[str, ...] = field(default_factory=tuple)
    clear_scope: str = ClearScope.KEY
    description: str = ""
    app: str = ""


class RegistryError(ValueError):
    """A type that cannot be registered: a bad code, severity, category or scope, or a code
    already registered with different defaults (two apps claiming one code)."""


_TYPES: dict[str, EventType] = {}


def register(app: str, types: list[EventType] | tuple[EventType, ...]) -> None:
    """Register ``types`` as declared by ``app`` (its label). Registering the same types again
    (``ready()`` may run twice in tests) is a no-op.

    Raises:
        RegistryError: a code longer than 64 characters or without a dot, an unknown severity,
            category or clear scope, or a code that another app (or other defaults) already holds.
    """
    for t in types:
        if len(t.code) > 64 or "." not in t.code:
            raise RegistryError(f"{app}: event code {t.code!r} must be dotted and at most 64 characters")
        if t.severity not in Severity.values:
            raise RegistryError(f"{app}: {t.code}: severity {t.severity!r} is not one of {Severity.values}")
        if t.category not in Category.values:
            raise RegistryError(f"{app}: {t.code}: category {t.category!r} is not one of {Category.values}")
        if t.clear_scope not in ClearScope.values:
            raise RegistryError(f"{app}: {t.code}: clear_scope {t.clear_scope!r} is not key or fabric")
        owned = EventType(**{**t.__dict__, "app": app})
        known = _TYPES.get(t.code)
        if known is not None and known != owned:
            raise RegistryError(f"{app}: event code {t.code!r} is already registered by {known.app}")
        _TYPES[t.code] = owned


def get(code: str) -> EventType:
    """The registered type of ``code``; for an unregistered code (an event written by an older
    version, say), an Info, event-only type in category System named after the code."""
    known = _TYPES.get(code)
    if known is not None:
        return known
    return EventType(
        code, code.replace(".", " ").replace("_", " ").capitalize(), Category.SYSTEM, Severity.INFO
    )


def is_registered(code: str) -> bool:
    """Whether an app declared ``code``."""
    return code in _TYPES


def all_types() -> list[EventType]:
    """Every registered type, sorted by code."""
    return [_TYPES[c] for c in sorted(_TYPES)]


def clearing_codes(code: str) -> list[str]:
    """Codes of the registered types whose events clear alarms of ``code`` (inverse of ``clears``)."""
    return sorted(t.code for t in _TYPES.values() if code in t.clears)
