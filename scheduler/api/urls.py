"""Scheduler API (``/api/scheduler/``, namespace ``scheduler-api``): topology exports
(``topology/``), jobs, their decisions, and the queue."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from . import jobs
from .views import TopologyExportView

app_name = "scheduler-api"
router = DefaultRouter()
router.register("jobs", jobs.JobViewSet)
router.register("decisions", jobs.JobDecisionViewSet)
urlpatterns = [
    path("topology/", TopologyExportView.as_view(), name="topology"),
    path("queue/", jobs.QueueView.as_view(), name="queue"),
    *router.urls,
]
