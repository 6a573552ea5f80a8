"""Websocket routes of the telemetry app (included by ``weft.asgi``)."""

from django.urls import path

import core.converters  # noqa: F401  (registers <pk:>)

from .consumers import HeatmapConsumer

websocket_urlpatterns = [
    path("ws/heatmap/<pk:fabric_id>/", HeatmapConsumer.as_asgi(), name="ws-heatmap"),
]
