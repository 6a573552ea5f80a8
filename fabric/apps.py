from django.apps import AppConfig


class FabricConfig(AppConfig):
    """Topology: fabrics, nodes, ports, links, SMs, discovery and import."""

    name = "fabric"

    def ready(self) -> None:
        from events import registry

        from . import signals  # noqa: F401  (connects the receivers)
        from .api import errors as api_errors
        from .event_types import EVENT_TYPES

        registry.register(self.label, EVENT_TYPES)
        api_errors.register()  # the REST answers of the fabric services' errors
