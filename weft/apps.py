from django.apps import AppConfig


class WeftConfig(AppConfig):
    """The composition root: project-level commands (``serve``: ASGI server + in-process worker;
    ``demo``), settings, urls, asgi and the Celery app."""

    name = "weft"
    verbose_name = "Weft"
