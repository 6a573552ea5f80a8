"""Device pages (namespace ``devices``)."""

from django.urls import path

import weft.converters  # noqa: F401  (registers <pk:>)

from . import views

app_name = "devices"
urlpatterns = [
    path("devices/", views.DeviceListView.as_view(), name="device_list"),
    path("devices/<pk:pk>/", views.DeviceView.as_view(), name="device"),
]
