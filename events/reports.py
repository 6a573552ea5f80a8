"""Health reports a user asks for (page and API): run, store and audit in one transaction.

The scheduled report (``events.tasks.health_report_task``) is not a user's request and is not
audited; it calls ``events.health.run_report``.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from accounts import audit

from .health import build_report
from .models import HealthReport


def run_health_report(fabric, user: Any = None) -> HealthReport:
    """Run the health checks of ``fabric`` now for ``user`` and return the stored report.

    The checks run first (reads only); the ``HealthReport`` row (``trigger="manual"``,
    ``created_by=user``) and its ``health.run`` audit entry (fabric name and status) are then written
    in one transaction: when the audit entry cannot be written, no report is stored.
    """
    report = build_report(fabric, user=user, trigger="manual")
    with transaction.atomic():
        report.save()
        audit.record("health.run", report, {"fabric": fabric.name, "status": report.status}, user=user)
    return report
