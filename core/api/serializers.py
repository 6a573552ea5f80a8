"""The serializer base of every app's REST API: NetBox's ``brief_fields``
(``netbox/api/serializers/base.py``: one serializer a model, a brief mode selecting some of its fields).

A model's serializer declares its short form in ``Meta.brief_fields`` (id, url, display and the
natural key, in the order they are written). ``XSerializer(nested=True)`` is that short form:
how one object names another (a port its node, a job its pool) and what ``?brief=1`` answers
(``core.api.views.BriefModeMixin``), so a 5,000-node list stays small. The OpenAPI schema names the
short form ``Brief<Name>`` (``core.api.schema.AutoSchema``), beside ``<Name>``.

The short form is the full form's fields, not copies of them: a field reads and writes the same
in both. Where it may not (a brief link names its ports by id, the full one nests them), the
serializer gives that field's short form in ``brief_overrides``.
"""

from __future__ import annotations

import copy

from django.core.exceptions import ImproperlyConfigured
from rest_framework import serializers


class StrictPrimaryKeyRelatedField(serializers.PrimaryKeyRelatedField):
    """DRF's primary-key field, refusing a fractional number: ``{"user": 1.5}`` was looked up as
    ``pk=1.5``, which Django's integer field truncates to 1 (another row than the caller wrote)."""

    def to_internal_value(self, data):
        if isinstance(data, float) and not data.is_integer():
            self.fail("incorrect_type", data_type="fractional number")
        return super().to_internal_value(data)


class BaseModelSerializer(serializers.ModelSerializer):
    """A ``ModelSerializer`` with a brief form: ``Meta.brief_fields`` (a list of field names, each
    one of ``Meta.fields``), selected by ``nested=True``.

    Raises:
        ImproperlyConfigured: ``nested=True`` on a serializer without ``Meta.brief_fields``, or a
            brief field that is not one of ``Meta.fields``.
    """

    serializer_related_field = StrictPrimaryKeyRelatedField

    #: ``{field name: field}``: the brief form of a field that differs from its full form (copied
    #: for each serializer, as declared fields are)
    brief_overrides: dict[str, serializers.Field] = {}

    def __init__(self, *args, nested: bool = False, **kwargs):
        self.nested = nested
        super().__init__(*args, **kwargs)

    def get_field_names(self, declared_fields, info):
        names = super().get_field_names(declared_fields, info)
        if not self.nested:
            return names
        brief = getattr(self.Meta, "brief_fields", None)
        if brief is None:
            raise ImproperlyConfigured(f"{type(self).__name__} is nested but its Meta has no brief_fields")
        unknown = [name for name in brief if name not in names]
        if unknown:
            raise ImproperlyConfigured(
                f"{type(self).__name__}.Meta.brief_fields: {unknown} not in Meta.fields"
            )
        return list(brief)

    def get_fields(self):
        fields = super().get_fields()
        if self.nested:
            for name, field in self.brief_overrides.items():
                if name in fields:
                    fields[name] = copy.deepcopy(field)
        return fields


def has_brief_form(serializer_class) -> bool:
    """Whether ``serializer_class`` declares a brief form (``Meta.brief_fields``)."""
    return getattr(getattr(serializer_class, "Meta", None), "brief_fields", None) is not None


def declare_field(
    serializer_class: type[serializers.Serializer], name: str, field: serializers.Field
) -> None:
    """Declare field ``name`` of ``serializer_class`` after the class is made: for two serializers
    that nest each other's brief form (a fabric names its last discovery, a discovery its fabric),
    the one defined first gets that field once the other exists. Call it before subclasses of
    ``serializer_class`` are made (they copy the declared fields when they are made)."""
    serializer_class._declared_fields[name] = field
