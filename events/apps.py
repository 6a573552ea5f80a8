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

        from telemetry.metrics import register_collector

        from .roles import RoleCollector

        register_collector(RoleCollector, group="roles")  # weft_role_up{role}: collect[]=roles
