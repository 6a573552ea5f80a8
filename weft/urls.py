"""Root URL configuration: UI pages per app, REST API under /api/<app>/, schema and docs."""

from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.http import HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from telemetry.metrics import metrics_view

urlpatterns = [
    path("favicon.ico", lambda request: HttpResponsePermanentRedirect(static("weft/favicon.svg"))),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
    path("accounts/", include("accounts.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # the schema answers 403 to anonymous clients (SERVE_PERMISSIONS); the doc pages send them to log in
    path("api/docs/", login_required(SpectacularSwaggerView.as_view(url_name="schema")), name="swagger-ui"),
    path("api/redoc/", login_required(SpectacularRedocView.as_view(url_name="schema")), name="redoc"),
    path("api/accounts/", include("accounts.api.urls")),
    path("api/fabric/", include("fabric.api.urls")),
    path("api/fabric/", include("telemetry.api.urls")),
    path("api/fabric/", include("events.api.urls")),
    path("", include("telemetry.urls")),
    path("", include("events.urls")),
    path("", include("fabric.urls")),
]
