from django.urls import path

import core.converters  # noqa: F401  (registers <pk:>)

from .heatmap import HeatmapAnnotationsView, HeatmapCellView, HeatmapView
from .porttable import PortTableView
from .series import PortSeriesView

app_name = "telemetry-api"
urlpatterns: list = [
    path("heatmap/<pk:fabric_id>/", HeatmapView.as_view(), name="heatmap"),
    path("heatmap/<pk:fabric_id>/cells/<pk:port_id>/", HeatmapCellView.as_view(), name="heatmap-cell"),
    path("heatmap/<pk:fabric_id>/annotations/", HeatmapAnnotationsView.as_view(), name="heatmap-annotations"),
    path("port-table/", PortTableView.as_view(), name="port-table"),
    path("port-series/<pk:port_id>/", PortSeriesView.as_view(), name="port-series"),
]
