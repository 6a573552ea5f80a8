"""Receivers of the telemetry app (connected in ``TelemetryConfig.ready()``), for the live heatmap:
``sweep_committed`` (publish the sweep's delta) and ``fabric.signals.discovery_committed`` (tell
clients to reload their row layout)."""

from django.dispatch import receiver

from fabric.signals import discovery_committed

from . import producer
from .signals import sweep_committed


@receiver(sweep_committed, dispatch_uid="telemetry.heatmap.sweep")
def publish_heatmap_delta(sender, fabric_id: int, sweep_id: int, **kwargs) -> None:
    """Publish the committed sweep's heatmap delta (``telemetry.producer.on_sweep_committed``)."""
    producer.on_sweep_committed(sender, fabric_id=fabric_id, sweep_id=sweep_id, **kwargs)


@receiver(discovery_committed, dispatch_uid="telemetry.heatmap.topology")
def publish_heatmap_topology(sender, fabric_id: int, discovery_id: int, **kwargs) -> None:
    """Tell heatmap clients the topology changed (``telemetry.producer.on_discovery_committed``)."""
    producer.on_discovery_committed(sender, fabric_id=fabric_id, discovery_id=discovery_id, **kwargs)
