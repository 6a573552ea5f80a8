from django.apps import AppConfig


class RoutingConfig(AppConfig):
    """The SM's forwarding tables (issue 24 §1): LFT snapshots, paths, the routing report."""

    name = "routing"

    def ready(self) -> None:
        from core import enqueue
        from events import health, registry

        from . import signals  # noqa: F401  (receivers)
        from .event_types import EVENT_TYPES
        from .services.health import routing_findings
        from .tasks import collect_routes_task

        registry.register(self.label, EVENT_TYPES)
        enqueue.register(
            "routing.collect",
            lambda fabric_id, reason, countdown=None: collect_routes_task.apply_async(
                (fabric_id, reason), countdown=countdown
            ),
        )
        health.register_check("routing", "Routing (forwarding tables)", routing_findings)
