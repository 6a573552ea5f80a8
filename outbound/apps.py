from django.apps import AppConfig


class OutboundConfig(AppConfig):
    """Signed outbound webhooks (issue 24): one delivery log and one sender for every app."""

    name = "outbound"
