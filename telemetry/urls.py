from django.urls import path

import weft.converters  # noqa: F401  (registers <pk:>)

from . import views

app_name = "telemetry"
urlpatterns: list = [
    path("heatmap/", views.heatmap_index, name="heatmap_index"),
    path("heatmap/<pk:fabric_id>/", views.heatmap, name="heatmap"),
]
