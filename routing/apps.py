from django.apps import AppConfig


class RoutingConfig(AppConfig):
    """The SM's forwarding tables (issue 24 §1): LFT snapshots, paths, the routing report."""

    name = "routing"

    def ready(self) -> None:
        from events import health, registry

        from . import signals  # noqa: F401  (receivers)
        from .event_types import EVENT_TYPES
        from .services.health import routing_findings

        registry.register(self.label, EVENT_TYPES)
        health.register_check("routing", "Routing (forwarding tables)", routing_findings)
