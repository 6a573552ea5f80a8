"""Websocket routes of the telemetry app (included by ``weft.asgi``)."""

from django.urls import path

from .consumers import HeatmapConsumer

websocket_urlpatterns = [
    path("ws/heatmap/<int:fabric_id>/", HeatmapConsumer.as_asgi(), name="ws-heatmap"),
]
