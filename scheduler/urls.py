"""Scheduler pages (namespace ``scheduler``): the queue, a job, submit, cancel and the dry run."""

from django.urls import path

import core.converters  # noqa: F401  (registers <pk:>)

from . import views

app_name = "scheduler"
urlpatterns = [
    path("scheduler/", views.QueueView.as_view(), name="queue"),
    path("scheduler/submit/", views.SubmitView.as_view(), name="submit"),
    path("scheduler/dry-run/", views.DryRunView.as_view(), name="dry_run"),
    path("scheduler/jobs/<pk:pk>/", views.JobView.as_view(), name="job"),
    path("scheduler/jobs/<pk:pk>/cancel/", views.CancelView.as_view(), name="job_cancel"),
]
