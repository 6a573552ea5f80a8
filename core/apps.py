from django.apps import AppConfig


class CoreConfig(AppConfig):
    """The kernel (``core``): no models; on start it installs what every app's models rely on."""

    name = "core"
    verbose_name = "Weft kernel"

    def ready(self):
        from . import fields, lookups

        fields.install()  # model float fields refuse NaN/infinity in every REST API
        lookups.install()  # ``field__any=[…]``: one array parameter on PostgreSQL
