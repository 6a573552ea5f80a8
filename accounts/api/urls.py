from rest_framework.routers import DefaultRouter

from .views import ApiTokenViewSet, AuditEntryViewSet, UserViewSet

app_name = "accounts-api"
router = DefaultRouter()
router.register("users", UserViewSet)
router.register("tokens", ApiTokenViewSet)
router.register("audit", AuditEntryViewSet)
urlpatterns = router.urls
