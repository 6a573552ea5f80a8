from django.apps import AppConfig


class LabConfig(AppConfig):
    """The fabric lab (ibsim + OpenSM + infiniband-diags) as a library, and its command."""

    name = "lab"

    def ready(self) -> None:
        from . import receivers  # noqa: F401  (connects them)
