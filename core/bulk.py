"""Fast bulk inserts for the ingest (tens of thousands of rows for a 5,000-node fabric), and
fast per-row updates (:func:`update_rows`: a scheduling pass placing hundreds of jobs).

Django's ``bulk_create`` builds a model instance and prepares every value of every row; for the
Selene fabric (44k rows) that costs seconds. Here rows are plain tuples in column order, written
with PostgreSQL ``COPY ... FROM STDIN`` (psycopg 3 ``Copy.write_row``), or one ``executemany``
``INSERT`` on other databases (SQLite in the embedded deployment and unit tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from operator import attrgetter

from django.db import connection, connections
from django.db.models import Field, JSONField


def insert_rows(model, columns: Sequence[str], rows: Sequence[tuple], *, with_ids: bool = False):
    """Insert ``rows`` (tuples ordered as ``columns``, the model's database column names) into
    ``model``'s table in the current transaction.

    Returns the number of rows, or with ``with_ids`` the list of the new primary keys in row order
    on PostgreSQL (taken from the id sequence up front, so no read-back is needed) and None on
    other databases (the caller reads the ids back). Values must already be database values (ints,
    strs, bools, None, aware datetimes); no model defaults or ``auto_now_add`` are applied.
    """
    if not rows:
        return [] if with_ids else 0
    ids = None
    if with_ids and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                [model._meta.db_table, len(rows)],
            )
            ids = [r[0] for r in cursor.fetchall()]
        columns = ["id", *columns]
        rows = [(i, *row) for i, row in zip(ids, rows, strict=True)]
    table = connection.ops.quote_name(model._meta.db_table)
    cols = ", ".join(connection.ops.quote_name(c) for c in columns)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            adapt = connection.ops.adapt_datetimefield_value
            marks = ", ".join(["%s"] * len(columns))
            prepared = [tuple(adapt(v) if isinstance(v, datetime) else v for v in row) for row in rows]
            cursor.executemany(f"INSERT INTO {table} ({cols}) VALUES ({marks})", prepared)
    if with_ids:
        return ids
    return len(rows)


def update_rows(model, fields: Sequence[str], rows: Sequence[tuple], *, chunk: int = 5000) -> int:
    """Set ``fields`` (model field names) of many rows of ``model``, each row its own values, in
    the current transaction: ``rows`` are ``(pk, value, …)`` tuples with Python values as the
    model holds them (dicts for a ``JSONField``, model pks for a foreign key's ``*_id``).

    Django's ``bulk_update`` builds a ``CASE WHEN`` expression per field and row (seconds for a
    few hundred rows of ten fields); here PostgreSQL gets one ``UPDATE … FROM unnest(…)`` per
    ``chunk`` rows with one array parameter per column (cast to the column's type): the statement
    text does not grow with the rows, so psycopg does not parse and fill thousands of placeholders.
    Other databases get one ``executemany``. Values are prepared by each field
    (``get_db_prep_value``); no ``auto_now`` is applied. Returns the number of rows given.
    """
    if not rows:
        return 0
    ops = connection.ops
    concrete = [model._meta.get_field(f) for f in fields]
    pk = model._meta.pk
    table = ops.quote_name(model._meta.db_table)

    conn = connections[connection.alias]  # the real one: the proxy is a lookup per value

    def prep(row: tuple) -> list:
        return [pk.get_db_prep_value(row[0], conn)] + [
            f.get_db_prep_value(v, conn) for f, v in zip(concrete, row[1:], strict=True)
        ]

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            names = [ops.quote_name(f.column) for f in [pk, *concrete]]
            sets = ", ".join(f"{n} = v.{n}" for n in names[1:])
            arrays = ", ".join(f"%s::{f.db_type(connection)}[]" for f in [pk, *concrete])
            sql = (
                f"UPDATE {table} AS t SET {sets} FROM unnest({arrays}) AS v({', '.join(names)}) "
                f"WHERE t.{names[0]} = v.{names[0]}"
            )
            for i in range(0, len(rows), chunk):
                columns = zip(*map(prep, rows[i : i + chunk]), strict=True)
                cursor.execute(sql, [list(c) for c in columns])
        else:
            sets = ", ".join(f"{ops.quote_name(f.column)} = %s" for f in concrete)
            cursor.executemany(
                f"UPDATE {table} SET {sets} WHERE {ops.quote_name(pk.column)} = %s",
                [(*p[1:], p[0]) for p in map(prep, rows)],
            )
    return len(rows)


def create_objects(objs: Sequence) -> list:
    """``Model.objects.bulk_create(objs)`` for unsaved instances of one model, written with
    ``COPY`` on PostgreSQL (:func:`insert_rows`): every concrete field's value as Django would save
    it (``pre_save`` with ``add``, so ``auto_now_add`` and defaults hold; ``get_db_prep_save``, so a
    ``JSONField`` is sent as JSON; a plain int, str, bool or None of another field as it is), the primary keys taken from the id sequence up front and set on
    the instances. Django's ``bulk_create`` compiles one parameter per value and psycopg quotes each
    into the statement text (a scheduling pass: thousands of allocation items, events, audit
    entries, decisions — most of a pass's binding time); ``COPY`` streams the rows instead. Other
    databases use ``bulk_create`` itself. Returns the instances (``objs``, pks set), in order.
    No signals are sent (as ``bulk_create``). Raises what the database raises (``IntegrityError``
    on a constraint), in the caller's transaction.
    """
    objs = list(objs)
    if not objs:
        return objs
    model = type(objs[0])
    if connection.vendor != "postgresql":
        return model.objects.bulk_create(objs, batch_size=500)
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    # a plain int/str/bool/None is sent as it is (what get_db_prep_save returns for it on these
    # fields: the hot path, thousands of rows); JSON, datetimes and anything else are prepared
    # by their field, and a field with its own pre_save (auto_now_add) gets it called. Columns
    # are read with one attrgetter, and prepared with the real connection (not the proxy's
    # lookup per value).
    conn = connections[connection.alias]
    get = attrgetter(*[f.attname for f in fields])
    pre = [(i, f.pre_save) for i, f in enumerate(fields) if type(f).pre_save is not Field.pre_save]
    prep = [f.get_db_prep_save for f in fields]
    json = [isinstance(f, JSONField) for f in fields]
    plain = (int, str, bool, type(None))
    width = range(len(fields))

    def row(obj) -> tuple:
        values = list(get(obj)) if len(fields) > 1 else [get(obj)]
        for i, pre_save in pre:
            values[i] = pre_save(obj, True)
        for i in width:
            v = values[i]
            if json[i] or type(v) not in plain:
                values[i] = prep[i](v, conn)
        return tuple(values)

    rows = [row(o) for o in objs]
    ids = insert_rows(model, [f.column for f in fields], rows, with_ids=True)
    for obj, pk in zip(objs, ids, strict=True):
        obj.pk = pk
        obj._state.adding, obj._state.db = False, connection.alias
    return objs
