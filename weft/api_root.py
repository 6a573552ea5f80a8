"""``GET /api/``: the REST API's root (the walkthrough found a 404 there): its sections and their
collections, with links, and where the OpenAPI schema and its docs are.

Built from the URL configuration itself (``weft.urls``: each ``api/<section>/`` include; the
routers' registered collections and the plain paths without parameters), so a new endpoint shows
up here without an edit. Answer (JSON, or DRF's browsable page)::

    {"sections": {"fabric": {"fabrics": "http://…/api/fabric/fabrics/", …}, …},
     "schema": ".../api/schema/", "docs": ".../api/docs/", "redoc": ".../api/redoc/",
     "ufm": ".../ufmRestV3/"}

Any signed-in Viewer may read it (``accounts.permissions.RolePermission``, as every GET)."""

from __future__ import annotations

from django.urls import URLResolver, get_resolver, reverse
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView


def api_sections() -> dict[str, list[str]]:
    """``{section: [collection path relative to /api/<section>/]}``, sorted, from the URL conf."""
    out: dict[str, set[str]] = {}
    for pattern in get_resolver().url_patterns:
        route = str(pattern.pattern)
        if not (isinstance(pattern, URLResolver) and route.startswith("api/") and route.count("/") == 2):
            continue
        section = route.split("/")[1]
        module = pattern.urlconf_module
        router = getattr(module, "router", None)
        names = out.setdefault(section, set())
        if router is not None:
            names.update(f"{prefix}/" for prefix, _, _ in router.registry)
        for sub in getattr(module, "urlpatterns", []):
            sub_route = str(sub.pattern)
            if sub_route and "<" not in sub_route and not sub_route.startswith("^"):
                names.add(sub_route)
    return {section: sorted(names) for section, names in sorted(out.items()) if names}


class ApiRootView(APIView):
    """The API's sections and collections, and the schema and docs (module docstring)."""

    @extend_schema(exclude=True)  # a navigation document, not an operation of the API
    def get(self, request):
        url = request.build_absolute_uri
        return Response(
            {
                "sections": {
                    section: {name.rstrip("/"): url(f"/api/{section}/{name}") for name in names}
                    for section, names in api_sections().items()
                },
                "schema": url(reverse("schema")),
                "docs": url(reverse("swagger-ui")),
                "redoc": url(reverse("redoc")),
                "ufm": url("/ufmRestV3/"),
            }
        )
