"""Base classes of every app's REST viewsets.

``?brief=1`` (NetBox's brief mode): list and detail answer the brief form of an object (id, url,
display, natural key) instead of the full one; the OpenAPI schema documents both
(``core.api.schema.brief_alternatives``).
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import viewsets

BRIEF_PARAM = OpenApiParameter(
    "brief", OpenApiTypes.BOOL, description="return the brief form (id, url, display, natural key)"
)


class BriefModeMixin:
    """``?brief=1`` (or true/yes) switches list and detail to ``brief_serializer_class``."""

    brief_serializer_class = None

    @property
    def brief(self) -> bool:
        value = self.request.query_params.get("brief", "") if self.request else ""
        return value.lower() in {"1", "true", "yes", "on"}

    def get_serializer_class(self):
        if self.brief and self.brief_serializer_class is not None:
            return self.brief_serializer_class
        return super().get_serializer_class()


class ReadOnlyViewSet(BriefModeMixin, viewsets.ReadOnlyModelViewSet):
    """Read-only rows with a brief mode, ids as digits in the URL. Readable by every signed-in user
    (``accounts.permissions.RolePermission``'s default ``read_role``, Viewer)."""

    lookup_value_regex = r"\d+"
