from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    """Job queue and topology-aware placement (a later issue)."""

    name = "scheduler"
