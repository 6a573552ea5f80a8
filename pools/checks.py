"""System checks of the pools app (registered in ``PoolsConfig.ready()``).

``pools.W001`` (tag ``database``: ``manage.py check --database default``, and ``migrate``): a
pool PKey stored inside a job PKey range in force on its fabric. The pools API refuses both
ways into that state (``pools.services.partitions.check_pool_pkey`` / ``check_job_range``);
this reports data from before, or written past the API.
"""

from __future__ import annotations

from django.core import checks
from django.db import DatabaseError


@checks.register(checks.Tags.database)
def job_ranges_hold_no_pool_pkey(app_configs=None, databases=None, **kwargs) -> list[checks.CheckMessage]:
    """One ``pools.W001`` warning per pool PKey inside a job PKey range (none when the check
    runs without a database, or before the pools tables exist)."""
    if not databases:
        return []
    from .services.partitions import job_range_overlaps

    try:
        overlaps = job_range_overlaps()
    except DatabaseError:  # not migrated yet (``migrate`` runs database checks first)
        return []
    return [
        checks.Warning(
            text,
            hint="change the pool's PKey (PATCH /api/pools/pools/<id>/ pkey) or the job range "
            "(job_pkey_min/job_pkey_max): job partitions take their PKeys from that range",
            id="pools.W001",
        )
        for text in overlaps
    ]
