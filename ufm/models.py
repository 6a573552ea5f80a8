"""What the UFM-compatible API stores of its own: its jobs (the isolated ports it reads and writes
are the fabric's ``IsolatedPort``).

Everything else it serves is another app's (the fabric's nodes, ports, links and partitions, the
events app's events and alarms); it changes partitions only through
``fabric.services.partitions``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from fabric.models import IsolatedPort

#: the isolated ports are the fabric's (``fabric.IsolatedPort``, same table): the port page's
#: Disable and this API's ``unhealthy_ports`` both isolate through ``fabric.services.isolation``
UnhealthyPort = IsolatedPort


class UfmJob(models.Model):
    """A UFM "job": what ``POST /actions`` (``mark_device_unhealthy``/``mark_device_healthy``)
    did, read back with ``GET /jobs/<id>`` (UFM answers 202 with ``Location: .../jobs/<id>``;
    the UFM SDK's ``batch_isolate_devices.py`` polls it until ``Status`` is ``Completed``). Weft
    runs the action within the request, so a job is stored finished: ``Completed`` or
    ``Completed With Errors`` (``summary`` says which ports failed)."""

    COMPLETED = "Completed"
    COMPLETED_WITH_ERRORS = "Completed With Errors"

    operation = models.CharField(max_length=64)
    status = models.CharField(max_length=32)
    #: ``{"object_ids": [...], "ports": [{"port", "done", ...}], "kept": [...]}``
    summary = models.JSONField(default=dict)
    created = models.DateTimeField(auto_now_add=True)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"job {self.pk} {self.operation} {self.status}"
