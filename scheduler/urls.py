"""Scheduler pages (namespace ``scheduler``): the queue, a job, submit, cancel, the dry run and the
fabric page's topology download."""

from django.urls import path

import core.converters  # noqa: F401  (registers <pk:>)

from . import export_views, views

app_name = "scheduler"
urlpatterns = [
    path("scheduler/", views.QueueView.as_view(), name="queue"),
    path("scheduler/submit/", views.SubmitView.as_view(), name="submit"),
    path("scheduler/dry-run/", views.DryRunView.as_view(), name="dry_run"),
    path("scheduler/jobs/<pk:pk>/", views.JobView.as_view(), name="job"),
    path("scheduler/jobs/<pk:pk>/cancel/", views.CancelView.as_view(), name="job_cancel"),
    path("scheduler/topology-export/", export_views.TopologyExportView.as_view(), name="topology_export"),
]
