"""Base classes of every app's REST viewsets.

``?brief=1`` (NetBox's brief mode): list and detail answer the brief form of an object (id, url,
display, natural key: the serializer's ``Meta.brief_fields``, ``core.api.serializers``) instead of
the full one; the OpenAPI schema documents both (``core.api.schema.brief_alternatives``).
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import viewsets

from .serializers import has_brief_form

BRIEF_PARAM = OpenApiParameter(
    "brief", OpenApiTypes.BOOL, description="return the brief form (id, url, display, natural key)"
)


class BriefModeMixin:
    """``?brief=1`` (or true/yes) switches list and detail to the brief form of ``serializer_class``
    (its ``Meta.brief_fields``: ``core.api.serializers.BaseModelSerializer`` with ``nested=True``);
    a viewset whose serializer has no brief form ignores it."""

    @property
    def brief(self) -> bool:
        value = self.request.query_params.get("brief", "") if self.request else ""
        return value.lower() in {"1", "true", "yes", "on"} and has_brief_form(self.serializer_class)

    def get_serializer_class(self):
        if self.brief:
            return self.serializer_class
        return super().get_serializer_class()

    def get_serializer(self, *args, **kwargs):
        if self.brief:
            kwargs["nested"] = True
        return super().get_serializer(*args, **kwargs)


class ReadOnlyViewSet(BriefModeMixin, viewsets.ReadOnlyModelViewSet):
    """Read-only rows with a brief mode, ids as digits in the URL. Readable by every signed-in user
    (``accounts.permissions.RolePermission``'s default ``read_role``, Viewer)."""

    lookup_value_regex = r"\d+"
