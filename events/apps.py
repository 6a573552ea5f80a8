from django.apps import AppConfig


class EventsConfig(AppConfig):
    """Events, alarms, event policies, alert emails and health reports."""

    name = "events"

    def ready(self) -> None:
        from . import (  # noqa: F401  (checks: registers them; signals: connects the receivers)
            checks,
            registry,
            signals,
        )
        from .event_types import EVENT_TYPES

        registry.register(self.label, EVENT_TYPES)
