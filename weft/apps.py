from django.apps import AppConfig


class WeftConfig(AppConfig):
    """Project-level commands: ``serve`` (ASGI server + in-process worker) and ``demo``."""

    name = "weft"
    verbose_name = "Weft"

    def ready(self):
        from .fields import install

        install()  # model float fields refuse NaN/infinity in every REST API
