"""The API's pagination: LimitOffset with a ceiling on ``?limit=`` (``settings.WEFT_API_MAX_LIMIT``).

Without one, ``?limit=99999999999999999999`` overflowed the database's LIMIT (a 500) and any
large limit made one request serialise a whole table."""

from __future__ import annotations

from django.conf import settings
from rest_framework.pagination import LimitOffsetPagination


class WeftLimitOffsetPagination(LimitOffsetPagination):
    @property
    def max_limit(self) -> int:
        return settings.WEFT_API_MAX_LIMIT
