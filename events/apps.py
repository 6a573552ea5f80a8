from django.apps import AppConfig
from django.db import transaction


def _on_discovery(sender, fabric_id: int, discovery_id: int | None = None, **kwargs) -> None:
    from .tasks import evaluate_discovery_task

    # Sent from on_commit already; deferring again is harmless and covers direct sends.
    transaction.on_commit(lambda: evaluate_discovery_task.delay(fabric_id, discovery_id))


def _on_sweep(sender, fabric_id: int, sweep_id: int, **kwargs) -> None:
    from .tasks import evaluate_sweep_task

    transaction.on_commit(lambda: evaluate_sweep_task.delay(fabric_id, sweep_id))


def _sync_policies(sender, **kwargs) -> None:
    from .rules import ensure_policies

    ensure_policies()


class EventsConfig(AppConfig):
    """Events, alarms, event policies, alert emails and health reports."""

    name = "events"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from fabric.signals import discovery_committed
        from telemetry.signals import sweep_committed

        discovery_committed.connect(_on_discovery, dispatch_uid="events.evaluate_discovery")
        sweep_committed.connect(_on_sweep, dispatch_uid="events.evaluate_sweep")
        post_migrate.connect(_sync_policies, sender=self, dispatch_uid="events.sync_policies")
