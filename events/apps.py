from django.apps import AppConfig


class EventsConfig(AppConfig):
    """Events, alarms, event policies, alert emails and health reports."""

    name = "events"
