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


def insert_rows(model, columns: Sequence[str], rows: Sequence[tuple]) -> int:
    """Insert ``rows`` (tuples ordered as ``columns``, the model's database column names) into
    ``model``'s table in the current transaction; returns the number of rows.

    Values must already be database values (ints, strs, bools, None, aware datetimes); no model
    defaults or ``auto_now_add`` are applied.
    """
    if not rows:
        return 0
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
    return len(rows)
