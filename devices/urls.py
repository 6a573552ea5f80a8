"""Device pages (namespace ``devices``)."""

from django.urls import path

import core.converters  # noqa: F401  (registers <pk:>)

from . import views

app_name = "devices"
urlpatterns = [
    path("devices/", views.DeviceListView.as_view(), name="device_list"),
    path("devices/new/", views.DeviceFormView.as_view(), name="device_add"),
    path("devices/<pk:pk>/", views.DeviceView.as_view(), name="device"),
    path("devices/<pk:pk>/edit/", views.DeviceFormView.as_view(), name="device_edit"),
    path("devices/<pk:pk>/delete/", views.DeviceDeleteView.as_view(), name="device_delete"),
]
