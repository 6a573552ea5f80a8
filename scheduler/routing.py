"""Websocket routes of the scheduler app (included by ``weft.asgi``)."""

from django.urls import path

from .consumers import JobConsumer

websocket_urlpatterns: list = [path("ws/jobs/", JobConsumer.as_asgi())]
