"""REST fields shared by every app.

``FiniteFloatField`` replaces DRF's ``FloatField`` for model float fields (``WeftConfig.ready``):
DRF accepts "nan" and "inf", which then broke every later read of the object (JSON has no NaN or
Infinity: a 500 on each GET of the list) and, on PostgreSQL, the audit entry of the write itself."""

from __future__ import annotations

import math

from django import forms
from django.core.validators import URLValidator
from django_filters.fields import IsoDateTimeField
from django_filters.filters import IsoDateTimeFilter
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers


class FiniteFloatField(serializers.FloatField):
    default_error_messages = {"not_finite": "A finite number is required (not NaN or infinity)."}

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not math.isfinite(value):
            self.fail("not_finite")
        return value


def install() -> None:
    """Make ModelSerializers map model ``FloatField`` to :class:`FiniteFloatField`."""
    from django.db import models

    serializers.ModelSerializer.serializer_field_mapping[models.FloatField] = FiniteFloatField


#: PostgreSQL refuses UTC offsets beyond ±15:59 (``timestamptz`` input); Python accepts up to ±23:59.
MAX_UTC_OFFSET_S = 16 * 3600 - 60


class BoundedIsoDateTimeFormField(IsoDateTimeField):
    """An ISO 8601 datetime form field whose UTC offset is within ±15:59 and year within 1..9998,
    so every database can compare with it (an offset of -17:00 was a 500 on PostgreSQL)."""

    default_error_messages = {
        "offset": "The UTC offset must be within ±15:59.",
        "range": "The date is out of range.",
    }

    def to_python(self, value):
        parsed = super().to_python(value)
        if parsed is None:
            return parsed
        offset = parsed.utcoffset()
        if offset is not None and abs(offset.total_seconds()) > MAX_UTC_OFFSET_S:
            raise forms.ValidationError(self.error_messages["offset"], code="offset")
        if not 1 < parsed.year < 9999:
            raise forms.ValidationError(self.error_messages["range"], code="range")
        return parsed


class BoundedIsoDateTimeFilter(IsoDateTimeFilter):
    """``django_filters.IsoDateTimeFilter`` with :class:`BoundedIsoDateTimeFormField`."""

    field_class = BoundedIsoDateTimeFormField


class IdentityUrlField(serializers.HyperlinkedIdentityField):
    """DRF's ``HyperlinkedIdentityField`` (the same absolute URL), with the view's URL resolved
    once per field and request and the object's pk put into it, instead of a ``reverse()`` (a walk
    of the URL resolver) per object: a 1,000-row list resolved 5,000 URLs. For views whose only
    URL argument is ``pk`` (``lookup_value_regex = r"\\d+"``)."""

    _PK = 987654321987654321  # a number no real row has, as the pk placeholder

    def get_url(self, obj, view_name, request, format):
        pk = getattr(obj, self.lookup_field)
        if pk in (None, ""):
            return None
        if self.lookup_url_kwarg != "pk":
            return super().get_url(obj, view_name, request, format)
        templates = self.__dict__.setdefault("_templates", {})
        key = (view_name, format, id(request))
        parts = templates.get(key)
        if parts is None:
            url = self.reverse(view_name, kwargs={"pk": self._PK}, request=request, format=format)
            if str(self._PK) not in url:  # a URL that does not spell the pk out: resolve per object
                return super().get_url(obj, view_name, request, format)
            head, _, tail = url.rpartition(str(self._PK))
            parts = templates[key] = (head, tail)
        return f"{parts[0]}{pk}{parts[1]}"


@extend_schema_field(
    {"oneOf": [{"type": "string", "format": "uri", "maxLength": 500}, {"type": "string", "enum": [""]}]}
)
class OptionalWebUrlField(serializers.URLField):
    """An http(s) URL, or ``""`` for none (a webhook target, say). Documented in OpenAPI as a URI
    *or* the empty string (a plain URLField is ``format: uri``, which ``""`` does not match, so
    a conforming client refused every object without one); other schemes (``ftp:``, ``file:``) are
    a 400 on the field, as no delivery could use them."""

    def __init__(self, **kwargs):
        kwargs.setdefault("allow_blank", True)
        kwargs.setdefault("max_length", 500)
        super().__init__(**kwargs)
        self.validators = [v for v in self.validators if not isinstance(v, URLValidator)]
        self.validators.append(URLValidator(schemes=["http", "https"], message="Enter an http(s) URL."))
