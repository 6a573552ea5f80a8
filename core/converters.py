"""URL path converters.

``<pk:name>``: a database row id in a URL, 1 to 18 decimal digits. Django's ``<int:>`` takes any
number of digits, and a 20-digit id overflowed the database's 64-bit integer inside the lookup
(SQLite: ``OverflowError``; PostgreSQL: ``NumericValueOutOfRange``) — a 500 where a missing row is a
404. Eighteen digits stay below 2**63 - 1, so every id that can exist matches and the rest are 404
from the resolver.
"""

from __future__ import annotations

from django.urls import register_converter


class RowIdConverter:
    """Match ``[0-9]{1,18}``; ``to_python`` gives an ``int``."""

    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(int(value))


register_converter(RowIdConverter, "pk")
