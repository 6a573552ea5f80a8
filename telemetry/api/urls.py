from django.urls import path

from .heatmap import HeatmapCellView, HeatmapView
from .series import PortSeriesView

app_name = "telemetry-api"
urlpatterns: list = [
    path("heatmap/<int:fabric_id>/", HeatmapView.as_view(), name="heatmap"),
    path("heatmap/<int:fabric_id>/cells/<int:port_id>/", HeatmapCellView.as_view(), name="heatmap-cell"),
    path("port-series/<int:port_id>/", PortSeriesView.as_view(), name="port-series"),
]
