from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    """Locality, topology exports, the job queue and topology-aware placement (issue 12)."""

    name = "scheduler"

    def ready(self) -> None:
        from events import registry

        from . import signals  # noqa: F401  (receivers)
        from .event_types import EVENT_TYPES

        registry.register(self.label, EVENT_TYPES)
