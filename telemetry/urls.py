from django.urls import path

from . import views

app_name = "telemetry"
urlpatterns: list = [
    path("heatmap/", views.heatmap_index, name="heatmap_index"),
    path("heatmap/<int:fabric_id>/", views.heatmap, name="heatmap"),
]
