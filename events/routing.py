"""Websocket routes of the events app (included by ``weft.asgi``)."""

from django.urls import path

import core.converters  # noqa: F401  (registers <pk:>)

from .consumers import AlarmConsumer

websocket_urlpatterns: list = [
    path("ws/alarms/", AlarmConsumer.as_asgi()),
    path("ws/alarms/<pk:fabric_id>/", AlarmConsumer.as_asgi()),
]
