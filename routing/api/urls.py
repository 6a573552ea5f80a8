from django.urls import path

import core.converters  # noqa: F401  (registers <pk:>)

from .views import RoutingSnapshotsView, RoutingTraceView, RoutingView

app_name = "routing-api"
urlpatterns: list = [
    path("fabrics/<pk:fabric_id>/routing/", RoutingView.as_view(), name="routing"),
    path("fabrics/<pk:fabric_id>/routing/trace/", RoutingTraceView.as_view(), name="routing-trace"),
    path(
        "fabrics/<pk:fabric_id>/routing/snapshots/", RoutingSnapshotsView.as_view(), name="routing-snapshots"
    ),
]
