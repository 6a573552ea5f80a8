"""``__any``: ``field IN (list)`` sent to PostgreSQL as one array parameter.

Django renders ``pk__in=[…]`` with one placeholder per value. For the thousands of ids a
scheduling pass locks and updates (GPUs, jobs), that query text is long and psycopg's client-side
binding parses and fills it value by value: tens of milliseconds per statement, before the server
sees it. ``filter(pk__any=ids)`` means exactly what ``pk__in=ids`` means (same rows, ``None``
ignored, an empty list matches nothing without a query), but on PostgreSQL it is written
``"id" = ANY(%s::bigint[])`` with the whole list as one array parameter (the cast is the column's
type, so the btree index is used as for ``IN``). Other databases (SQLite: the embedded
deployment and the unit tests) get ``IN`` itself.

Registered on every model field by :func:`install` (``WeftConfig.ready``).
"""

from __future__ import annotations

from django.db.models import Field
from django.db.models.expressions import ColPairs
from django.db.models.fields.related import ForeignObject
from django.db.models.fields.related_lookups import RelatedIn
from django.db.models.lookups import In


class _ArrayParameter:
    """The PostgreSQL form of an ``IN`` lookup over plain values (module docstring)."""

    def as_postgresql(self, compiler, connection):
        if not self.rhs_is_direct_value() or isinstance(self.lhs, ColPairs):
            return self.as_sql(compiler, connection)
        field = self.lhs.output_field
        values = []
        for v in self.rhs:  # already prepared value by value (``get_prep_value``) by In
            if hasattr(v, "resolve_expression"):  # an expression in the list: IN renders it
                return self.as_sql(compiler, connection)
            if v is not None:
                values.append(field.get_db_prep_value(v, connection, prepared=True))
        if not values:
            return self.as_sql(compiler, connection)  # In: EmptyResultSet, no query
        lhs, lhs_params = self.process_lhs(compiler, connection)
        return f"{lhs} = ANY(%s::{field.rel_db_type(connection)}[])", (*lhs_params, values)


class AnyOf(_ArrayParameter, In):
    """``field__any=values``: :class:`~django.db.models.lookups.In` for a list of plain values,
    one array parameter on PostgreSQL (module docstring). A subquery or expressions on the right
    fall back to ``IN``."""

    lookup_name = "any"


class RelatedAnyOf(_ArrayParameter, RelatedIn):
    """``fk__any=[instances or ids]``: :class:`AnyOf` for a relation (Django's related fields
    keep their own lookups, as ``fk__in`` is ``RelatedIn``)."""

    lookup_name = "any"


def install() -> None:
    """Register ``__any`` on every model field and relation (idempotent)."""
    Field.register_lookup(AnyOf)
    ForeignObject.register_lookup(RelatedAnyOf)
