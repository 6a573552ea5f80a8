from django.apps import AppConfig


class EventsConfig(AppConfig):
    """Events, alarms, event policies, alert emails and health reports."""

    name = "events"

    def ready(self) -> None:
        from . import (  # noqa: F401  (registers the checks, connects the receivers)
            checks,
            receivers,
            registry,
        )
        from .event_types import EVENT_TYPES

        registry.register(self.label, EVENT_TYPES)

        from . import maplayer

        maplayer.register()  # its overlay on the fabric map
