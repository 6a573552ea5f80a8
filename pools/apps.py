from django.apps import AppConfig


class PoolsConfig(AppConfig):
    """GPU inventory (GPUs, MIG slices, rails), and later pools, tenants and quotas (issue 11)."""

    name = "pools"

    def ready(self) -> None:
        from events import registry

        from .event_types import EVENT_TYPES

        registry.register(self.label, EVENT_TYPES)

        from . import checks, receivers  # noqa: F401  (registers the checks, connects the receivers)
