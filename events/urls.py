"""Pages of the events app (namespace ``events``), included at the site root."""

from django.urls import path

import core.converters  # noqa: F401  (registers <pk:>)

from . import views

app_name = "events"
urlpatterns = [
    path("", views.DashboardView.as_view(), name="dashboard"),
    path("dashboard/summary.json", views.DashboardSummaryView.as_view(), name="dashboard_summary"),
    path("alarms/", views.AlarmListView.as_view(), name="alarm_list"),
    path("alarms/acknowledge/", views.AlarmBulkAcknowledgeView.as_view(), name="alarm_bulk_acknowledge"),
    path("alarms/export.csv", views.AlarmCSVView.as_view(), name="alarm_csv"),
    path("alarms/<pk:pk>/", views.AlarmView.as_view(), name="alarm"),
    path("alarms/<pk:pk>/<str:op>/", views.AlarmActionView.as_view(), name="alarm_action"),
    path("events/", views.EventListView.as_view(), name="event_list"),
    path("health/", views.HealthListView.as_view(), name="healthreport_list"),
    path("health/<pk:pk>/", views.HealthReportView.as_view(), name="healthreport"),
    path("health/<pk:pk>.json", views.HealthReportJSONView.as_view(), name="healthreport_json"),
    path("event-policies/", views.EventPolicyListView.as_view(), name="eventpolicy_list"),
    path("event-policies/<pk:pk>/", views.EventPolicyEditView.as_view(), name="eventpolicy"),
    path("alert-targets/", views.AlertTargetListView.as_view(), name="alerttarget_list"),
    path("alert-targets/add/", views.AlertTargetCreateView.as_view(), name="alerttarget_add"),
    path("alert-targets/<pk:pk>/", views.AlertTargetView.as_view(), name="alerttarget"),
    path("alert-targets/<pk:pk>/<str:op>/", views.AlertTargetActionView.as_view(), name="alerttarget_action"),
]
