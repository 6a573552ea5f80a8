from django.apps import AppConfig


class UfmConfig(AppConfig):
    """The UFM-compatible REST API (issue 13): the subset of NVIDIA UFM's REST API that Volcano,
    ib-kubernetes, NVIDIA Carbide, the UFM SDK and the UFM Slurm plugin call, served from Weft's
    fabric, partitions, events and alarms (``ufm.views``)."""

    name = "ufm"
    verbose_name = "UFM-compatible API"

    def ready(self) -> None:
        from events import registry

        from .event_types import EVENT_TYPES

        registry.register(self.label, EVENT_TYPES)
