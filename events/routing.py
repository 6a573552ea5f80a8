"""Websocket routes of the events app (included by ``weft.asgi``)."""

from django.urls import path

from .consumers import AlarmConsumer

websocket_urlpatterns: list = [
    path("ws/alarms/", AlarmConsumer.as_asgi()),
    path("ws/alarms/<int:fabric_id>/", AlarmConsumer.as_asgi()),
]
