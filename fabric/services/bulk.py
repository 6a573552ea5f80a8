"""Fast bulk inserts for the ingest (tens of thousands of rows for a 5,000-node fabric).

Django's ``bulk_create`` builds a model instance and prepares every value of every row; for the
Selene fabric (44k rows) that costs seconds. Here rows are plain tuples in column order, written
with PostgreSQL ``COPY ... FROM STDIN`` (psycopg 3 ``Copy.write_row``), or one ``executemany``
``INSERT`` on other databases (SQLite in the embedded deployment and unit tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import connection


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
