"""Root URL configuration: UI pages per app, REST API under /api/<app>/, schema and docs."""

from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.http import HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path
from django.views.decorators.http import require_safe
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

from core.content_security import third_party_ui
from telemetry.metrics import metrics_view
from ufm import urls as ufm_urls
from ufm.views import dologin
from weft.api_root import ApiRootView

urlpatterns = [
    path(
        "favicon.ico", require_safe(lambda request: HttpResponsePermanentRedirect(static("weft/favicon.svg")))
    ),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
    path("accounts/", include("accounts.urls")),
    path("oidc/", include("accounts.oidc_urls")),  # single sign-on (404 unless WEFT_OIDC_ISSUER is set)
    path("api/", ApiRootView.as_view(), name="api-root"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # the schema answers 401 to anonymous clients (SERVE_PERMISSIONS); the doc pages send them to log
    # in. Swagger UI's split view serves its start-up script as a file (no inline script: the CSP);
    # templates/drf_spectacular/redoc.html gives ReDoc's the nonce (core.content_security) and keeps
    # its bundle from fetching Redocly's logo from their CDN (nothing comes from outside).
    path(
        "api/docs/",
        third_party_ui(
            login_required(
                SpectacularSwaggerSplitView.as_view(url_name="schema", template_name="weft/swagger_ui.html")
            )
        ),
        name="swagger-ui",
    ),
    path(
        "api/redoc/",
        third_party_ui(login_required(SpectacularRedocView.as_view(url_name="schema"))),
        name="redoc",
    ),
    path("api/accounts/", include("accounts.api.urls")),
    path("api/fabric/", include("fabric.api.urls")),
    path("api/fabric/", include("telemetry.api.urls")),
    path("api/fabric/", include("events.api.urls")),
    path("api/fabric/", include("routing.api.urls")),
    path("api/pools/", include("pools.api.urls")),
    path("api/scheduler/", include("scheduler.api.urls")),
    # the UFM-compatible API (ufm app): one set of handlers, the authentication of each prefix
    path("ufmRest/", include((ufm_urls.patterns("basic"), "ufm"))),
    path("ufmRestV3/", include((ufm_urls.patterns("token"), "ufm-v3"))),
    path("ufmRestV2/", include((ufm_urls.patterns("session"), "ufm-v2"))),
    path("dologin", dologin, name="ufm-dologin"),
    path("api/devices/", include("devices.api.urls")),
    path("", include("telemetry.urls")),
    path("", include("events.urls")),
    path("", include("fabric.urls")),
    path("", include("pools.urls")),
    path("", include("scheduler.urls")),
    path("", include("devices.urls")),
]

# errors under /api/ answer JSON ({"detail": …}), elsewhere the pages of templates/ (core.api.errors)
handler400 = "core.api.errors.bad_request"
handler403 = "core.api.errors.permission_denied"
handler404 = "core.api.errors.page_not_found"
handler500 = "core.api.errors.server_error"
