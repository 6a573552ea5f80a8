"""``/api/fabric/``: events, alarms, event-policies, health-reports, alert-targets."""

from rest_framework.routers import DefaultRouter

from . import views

app_name = "events-api"
router = DefaultRouter()
router.register("events", views.EventViewSet)
router.register("alarms", views.AlarmViewSet)
router.register("event-policies", views.EventPolicyViewSet)
router.register("health-reports", views.HealthReportViewSet)
router.register("alert-targets", views.AlertTargetViewSet)
urlpatterns = router.urls
