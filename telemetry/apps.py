from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    """Port-counter polling, rates, congestion, history, Prometheus metrics and the heatmap."""

    name = "telemetry"

    def ready(self) -> None:
        from fabric.signals import discovery_committed

        from . import producer
        from .signals import sweep_committed

        # The live heatmap: publish each committed sweep's delta; reload layouts on topology change.
        sweep_committed.connect(producer.on_sweep_committed, dispatch_uid="telemetry.heatmap.sweep")
        discovery_committed.connect(
            producer.on_discovery_committed, dispatch_uid="telemetry.heatmap.topology"
        )
