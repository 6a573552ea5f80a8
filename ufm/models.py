"""What the UFM-compatible API stores of its own: the ports a client marked unhealthy.

Everything else it serves is another app's (the fabric's nodes, ports, links and partitions, the
events app's events and alarms); it changes partitions only through
``fabric.services.partitions``.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from fabric.keys import port_key


class UnhealthyPort(models.Model):
    """A switch port isolated through ``PUT /app/unhealthy_ports`` (UFM's ``ports_policy``
    ``UNHEALTHY`` with action ``isolate``): disabled in the fabric with ``ibportstate`` until a
    client marks it ``HEALTHY`` (the row is then deleted). Keyed by the switch's node GUID and
    the port number, so it outlives rediscoveries (the port row itself may lose its link)."""

    fabric = models.ForeignKey("fabric.Fabric", on_delete=models.CASCADE, related_name="unhealthy_ports")
    node_guid = models.CharField(max_length=18)
    port_num = models.PositiveSmallIntegerField()
    #: the node's name when it was isolated (shown when the node is gone)
    node_name = models.CharField(max_length=128, blank=True)
    #: the peer of the port when it was isolated, ``"<name> <port>"`` (its link is down since)
    peer = models.CharField(max_length=200, blank=True)
    #: the peer port's node GUID and port number when it was isolated (UFM's ``UnhealthyGUID``,
    #: ``UnhealthyPortNumber`` of ``GET /app/unhealthy_ports``); empty when it had no link
    peer_guid = models.CharField(max_length=18, blank=True)
    peer_port_num = models.PositiveSmallIntegerField(null=True, blank=True)
    since = models.DateTimeField(auto_now_add=True)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["fabric", "node_guid", "port_num"]
        constraints = [
            models.UniqueConstraint(fields=["fabric", "node_guid", "port_num"], name="unhealthy_port_unique")
        ]

    def __str__(self) -> str:
        return f"{self.node_name or self.node_guid} port {self.port_num}"

    @property
    def key(self) -> str:
        """The port's natural key ``"<node guid>/<port>"`` (``fabric.keys``)."""
        return port_key(self.node_guid, self.port_num)


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
