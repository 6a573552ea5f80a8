"""Root URL configuration: UI pages per app, REST API under /api/<app>/, schema and docs."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from telemetry.metrics import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
    path("accounts/", include("accounts.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="redoc"),
    path("api/accounts/", include("accounts.api.urls")),
    path("api/fabric/", include("fabric.api.urls")),
    path("api/fabric/", include("telemetry.api.urls")),
    path("api/fabric/", include("events.api.urls")),
    path("", include("telemetry.urls")),
    path("", include("events.urls")),
    path("", include("fabric.urls")),
]
