"""Scheduler API (``/api/scheduler/``, namespace ``scheduler-api``)."""

from django.urls import path

from .views import TopologyExportView

app_name = "scheduler-api"
urlpatterns = [path("topology/", TopologyExportView.as_view(), name="topology")]
