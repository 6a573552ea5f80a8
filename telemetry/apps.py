from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    """Port-counter polling, rates, congestion, history, Prometheus metrics and the heatmap."""

    name = "telemetry"

    def ready(self) -> None:
        from events import registry

        from . import checks, receivers  # noqa: F401  (registers the checks, connects the receivers)
        from .event_types import EVENT_TYPES

        registry.register(self.label, EVENT_TYPES)

        from . import maplayer

        maplayer.register()  # its overlay on the fabric map

        from .metrics import register_collector
        from .switchmetrics import SwitchHealthCollector

        register_collector(SwitchHealthCollector, group="switches")  # weft_switch_*: collect[]=switches

        from .cablemetrics import CableInfoCollector

        register_collector(CableInfoCollector, group="cables")  # weft_cable_*: collect[]=cables
