"""REST fields shared by every app.

``FiniteFloatField`` replaces DRF's ``FloatField`` for model float fields (``WeftConfig.ready``):
DRF accepts "nan" and "inf", which then broke every later read of the object (JSON has no NaN or
Infinity: a 500 on each GET of the list) and, on PostgreSQL, the audit entry of the write itself."""

from __future__ import annotations

import math

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
