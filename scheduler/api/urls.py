"""Scheduler API (``/api/scheduler/``, namespace ``scheduler-api``): topology exports
(``topology/``), jobs, their decisions, the queue, and the rebalancer (``rebalance/``)."""

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
    path("rebalance/", jobs.RebalanceView.as_view(), name="rebalance"),
    *router.urls,
]
