from django.urls import path

import core.converters  # noqa: F401  (registers <pk:>)

from . import views

app_name = "telemetry"
urlpatterns: list = [
    path("heatmap/", views.heatmap_index, name="heatmap_index"),
    path("heatmap/<pk:fabric_id>/", views.heatmap, name="heatmap"),
    path("ports/", views.port_list, name="port_list"),
    path("ports/csv/", views.port_list_csv, name="port_list_csv"),
]
