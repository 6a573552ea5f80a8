from django.apps import AppConfig


class DevicesConfig(AppConfig):
    """Ethernet/RoCE devices over SNMP (issue 15): identification, interfaces, sensors, LLDP
    links, rates through ``telemetry.semantics``, alarms, traps."""

    name = "devices"

    def ready(self) -> None:
        from events import registry

        from .event_types import EVENT_TYPES

        registry.register(self.label, EVENT_TYPES)

        from telemetry.metrics import register_collector

        from .metrics import DeviceCollector

        register_collector(DeviceCollector)

        from fabric.api.maplayout import register_layer

        from . import maplayer

        register_layer("ethernet", maplayer.build, maplayer.cache_part)

        from telemetry.api.heatmap import register_rows

        from .heatmap import heatmap_rows

        register_rows("ethernet", heatmap_rows)
