from django.apps import AppConfig


class WeftConfig(AppConfig):
    """Project-level commands: ``serve`` (ASGI server + in-process worker) and ``demo``."""

    name = "weft"
    verbose_name = "Weft"

    def ready(self):
        from . import fields, lookups

        fields.install()  # model float fields refuse NaN/infinity in every REST API
        lookups.install()  # ``field__any=[…]``: one array parameter on PostgreSQL
